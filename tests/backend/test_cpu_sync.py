"""CPU backend: barriers and warp ops, split into phases (thread loops and block mode)."""
from __future__ import annotations

import numpy as np
import pytest

from zymo.backend import cpu, interp
from zymo.diagnostics import WarpSyncError
from zymo.ir.types import Array, bool_, f32, f64, i32, i64, u32
from zymo.ops import arith, memory, sync, thread, warp

from .cpu_ir import KernelIR, i32c

FULL = 0xFFFFFFFF


def _both(module, grid, block, make_args):
    """Run on the CPU and in the interpreter; the arguments after each."""
    got, want = make_args(), make_args()
    cpu.compile(module).launch(grid, block, got)
    interp.run(module, grid, block, want)
    return got, want


def _block_sum(loop: str, block: int) -> KernelIR:
    """out[blockIdx] = sum of x over the block: shared memory, tree reduction with a
    barrier inside a loop (`while` with a halving stride or `for` with uniform bounds)."""
    k = KernelIR(f"block_sum_{loop}", x=Array(f32, 1), out=Array(f32, 1))
    shared = k.op(memory.SharedAlloc, shape=(block,), dtype=f32)
    tid, i = k.tid(), k.global_id()
    inside = k.cmp("lt", k.cast(i, i64), k.dim(k["x"]))
    (v,) = k.if_(inside, lambda: [k.load(k["x"], i)], lambda: [k.const(0.0, f32)], [f32])
    k.store(shared, tid, v)
    k.create(sync.Barrier)

    def combine(stride):
        def add():
            total = k.op(arith.Add, k.load(shared, tid),
                         k.load(shared, k.op(arith.Add, tid, stride)))
            k.store(shared, tid, total)
        k.if_(k.cmp("lt", tid, stride), add)
        k.create(sync.Barrier)

    if loop == "while":
        half = k.op(arith.FloorDiv, k.special(thread.BlockDim), i32c(k, 2))

        def body(stride):
            combine(stride)
            return [k.op(arith.FloorDiv, stride, i32c(k, 2))]

        k.while_([half], lambda stride: k.cmp("gt", stride, i32c(k, 0)), body)
    else:
        levels = block.bit_length() - 1

        def body(level):
            combine(k.op(arith.Shr, i32c(k, block // 2), level))
            return []

        k.for_(i32c(k, 0), i32c(k, levels), i32c(k, 1), [], body)
    bid = k.special(thread.BlockIdx)
    k.if_(k.cmp("eq", tid, i32c(k, 0)), lambda: k.store(k["out"], bid, k.load(shared, i32c(k, 0)))
          or [])
    return k


@pytest.mark.parametrize("loop", ["while", "for"])
@pytest.mark.parametrize("block", [64, 256])
def test_shared_memory_reduction(loop, block):
    n = 1000
    x = np.random.default_rng(0).uniform(-1, 1, n).astype(np.float32)
    blocks = -(-n // block)
    out = np.zeros(blocks, np.float32)
    cpu.compile(_block_sum(loop, block).finish()).launch(blocks, block, [x, out])
    padded = np.zeros(blocks * block, np.float32)
    padded[:n] = x
    np.testing.assert_allclose(out, padded.reshape(blocks, block).sum(1), rtol=1e-5, atol=1e-5)


def test_values_live_across_barriers_per_thread():
    """Per-thread values (and a local array) computed before a barrier are used after it;
    threads read what their neighbours wrote before the barrier."""
    k = KernelIR("neighbours", x=Array(f64, 1), out=Array(f64, 1))
    shared = k.op(memory.SharedAlloc, shape=(128,), dtype=f64)
    scratch = k.op(memory.LocalAlloc, shape=(2,), dtype=f64)
    tid, i = k.tid(), k.global_id()
    mine = k.load(k["x"], i)
    k.store(scratch, i32c(k, 1), k.op(arith.Mul, mine, k.const(10.0, f64)))
    k.store(shared, tid, mine)
    k.create(sync.Barrier)
    right = k.op(arith.Mod, k.op(arith.Add, tid, i32c(k, 1)), i32c(k, 128))
    total = k.op(arith.Add, k.load(shared, right), k.load(scratch, i32c(k, 1)))
    k.store(k["out"], i, k.op(arith.Add, total, mine))
    x = np.arange(256, dtype=np.float64)
    out = np.zeros(256)
    cpu.compile(k.finish()).launch(2, 128, [x, out])
    right_x = x.reshape(2, 128)[:, np.r_[1:128, 0]].reshape(-1)
    np.testing.assert_array_equal(out, right_x + 11 * x)


def test_barrier_under_uniform_if_and_divergent_results():
    """A barrier inside an if whose condition is uniform (block index); the if's result
    is per thread."""
    k = KernelIR("uniform_if", out=Array(i32, 1))
    shared = k.op(memory.SharedAlloc, shape=(64,), dtype=i32)
    tid, i = k.tid(), k.global_id()
    bid = k.special(thread.BlockIdx)
    even = k.cmp("eq", k.op(arith.Mod, bid, i32c(k, 2)), i32c(k, 0))

    def then():
        k.store(shared, tid, k.op(arith.Mul, tid, i32c(k, 3)))
        k.create(sync.Barrier)
        return [k.load(shared, k.op(arith.Sub, i32c(k, 63), tid))]

    (v,) = k.if_(even, then, lambda: [k.op(arith.Neg, tid)], [i32])
    k.store(k["out"], i, v)
    got, want = _both(k.finish(), 4, 64, lambda: [np.zeros(256, np.int32)])
    np.testing.assert_array_equal(got[0], want[0])
    assert got[0][:64].tolist() == [3 * (63 - t) for t in range(64)]


def _warp_reduce_kernel() -> KernelIR:
    """Only warp 0 of each block reduces with shfl_down in a loop (a divergent if around a
    loop of shuffles); lane 0 writes the warp's sum."""
    k = KernelIR("warp_sum", x=Array(f32, 1), out=Array(f32, 1))
    tid, i = k.tid(), k.global_id()
    lane = k.special(thread.LaneId)
    warp_id = k.op(arith.FloorDiv, tid, i32c(k, 32))
    value = k.load(k["x"], i)
    mask = k.const(FULL, u32)

    def reduce():
        def body(step, v):
            delta = k.op(arith.Shr, i32c(k, 16), step)
            return [k.op(arith.Add, v, k.op(warp.ShflDown, mask, v, delta))]

        (total,) = k.for_(i32c(k, 0), i32c(k, 5), i32c(k, 1), [value], body)
        bid = k.special(thread.BlockIdx)
        k.if_(k.cmp("eq", lane, i32c(k, 0)), lambda: k.store(k["out"], bid, total) or [])

    k.if_(k.cmp("eq", warp_id, i32c(k, 0)), lambda: reduce() or [])
    return k


def test_warp_shuffle_reduction_under_divergent_if():
    x = np.random.default_rng(1).uniform(-1, 1, 4 * 96).astype(np.float32)
    out = np.zeros(4, np.float32)
    cpu.compile(_warp_reduce_kernel().finish()).launch(4, 96, [x, out])
    np.testing.assert_allclose(out, x.reshape(4, 96)[:, :32].sum(1), rtol=1e-5, atol=1e-6)


# the lanes that shuffle below (lane id not a multiple of 3), as a warp mask
THIRDS = sum(1 << lane for lane in range(32) if lane % 3)


def _divergent_shuffle(cls, mask: int) -> KernelIR:
    """Lanes whose id is not a multiple of 3 shuffle `x` with the operand `lanes[i]`."""
    k = KernelIR("shuffle", x=Array(f64, 1), lanes=Array(i32, 1), out=Array(f64, 1))
    i = k.global_id()
    lane = k.special(thread.LaneId)
    value = k.load(k["x"], i)
    operand = k.load(k["lanes"], i)
    active = k.cmp("ne", k.op(arith.Mod, lane, i32c(k, 3)), i32c(k, 0))
    (r,) = k.if_(active, lambda: [k.op(cls, k.const(mask, u32), value, operand)],
                 lambda: [k.const(-1.0, f64)], [f64])
    k.store(k["out"], i, r)
    return k


# the operand that makes lane `lane` read lane `source`
_OPERAND = {warp.ShflIdx: lambda lane, source: source,
            warp.ShflDown: lambda lane, source: source - lane,
            warp.ShflUp: lambda lane, source: lane - source,
            warp.ShflXor: lambda lane, source: lane ^ source}


@pytest.mark.parametrize("cls", list(_OPERAND), ids=lambda c: c.name)
def test_shuffles_with_divergent_lanes_match_interpreter(cls):
    """A shuffle under a branch, with the mask of the lanes that take it; each reads a lane
    of the mask, or one past the end of its warp (block of 48 threads: the second warp has 16
    lanes) or outside 0..31 (but for an indexed shuffle, which wraps), which gives a lane its own
    value."""
    n = 2 * 48
    lane = np.arange(n) % 48 % 32
    source = np.random.default_rng(2).integers(0, 40, n)
    if cls is warp.ShflIdx:     # reads lane source % 32
        source %= 32
    source = np.where((source < 32) & (source % 3 == 0), source + 1, source)
    operand = _OPERAND[cls](lane, source).astype(np.int32)
    if cls is warp.ShflXor:     # lane ^ operand must land where `source` says: 0..63
        operand &= 63

    def args():
        return [np.arange(n, dtype=np.float64), operand.copy(), np.zeros(n)]

    got, want = _both(_divergent_shuffle(cls, THIRDS).finish(), 2, 48, args)
    np.testing.assert_array_equal(got[2], want[2])
    shuffled = lane % 3 != 0
    assert np.all(want[2][~shuffled] == -1.0)
    assert np.any(want[2][shuffled] != np.arange(n)[shuffled])   # values did move


@pytest.mark.parametrize("cls", list(_OPERAND), ids=lambda c: c.name)
def test_interpreter_rejects_a_full_mask_shuffle_under_a_branch(cls):
    """CUDA leaves a shuffle undefined (sm_70+ waits for lanes that never come) when its mask
    names lanes that took the other branch; the interpreter says so."""
    n = 48
    args = [np.arange(n, dtype=np.float64), np.ones(n, np.int32), np.zeros(n)]
    with pytest.raises(WarpSyncError, match="names lane 0, which has not exited"):
        interp.run(_divergent_shuffle(cls, FULL).finish(), 1, 48, args)


@pytest.mark.parametrize("cls,out_type", [(warp.Ballot, u32), (warp.VoteAll, bool_),
                                          (warp.VoteAny, bool_)], ids=lambda c: str(c))
def test_votes_over_active_lanes_match_interpreter(cls, out_type):
    k = KernelIR("vote", x=Array(f32, 1), out=Array(out_type, 1), active=Array(u32, 1))
    i = k.global_id()
    lane = k.special(thread.LaneId)
    positive = k.cmp("gt", k.load(k["x"], i), k.const(0.0, f32))
    participates = k.cmp("ne", k.op(arith.Mod, lane, i32c(k, 5)), i32c(k, 1))
    voters = sum(1 << lane for lane in range(32) if lane % 5 != 1)

    def vote():
        k.store(k["out"], i, k.op(cls, k.const(voters, u32), positive))
        k.store(k["active"], i, k.op(warp.ActiveMask))
        return []

    k.if_(participates, vote)
    rng = np.random.default_rng(3)
    n = 3 * 40
    x = rng.uniform(-1, 1, n).astype(np.float32)
    x[:32] = 1.0   # one warp where every active lane votes yes
    got, want = _both(k.finish(), 3, 40, lambda: [x.copy(), np.zeros(n, out_type.dtype),
                                                   np.zeros(n, np.uint32)])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])


def test_while_loop_with_divergent_trip_counts_and_warp_op():
    """A while loop containing a shuffle, whose trip count differs per pair of lanes: threads
    leave at different times and keep their own carried values; the mask is the lanes still
    looping."""
    k = KernelIR("divergent_while", n=Array(i32, 1), out=Array(i32, 1))
    i = k.global_id()

    def step(count, acc):
        got = k.op(warp.ShflXor, k.op(warp.ActiveMask), acc, i32c(k, 1))
        return [k.op(arith.Sub, count, i32c(k, 1)), k.op(arith.Add, acc, k.op(arith.BitAnd, got,
                                                                               i32c(k, 7)))]

    _, acc = k.while_([k.load(k["n"], i), i], lambda c, a: k.cmp("gt", c, i32c(k, 0)), step)
    k.store(k["out"], i, acc)
    counts = np.random.default_rng(4).integers(0, 6, 64).astype(np.int32)
    counts[1::2] = counts[::2]   # partners (lane ^ 1) loop as long as each other
    got, want = _both(k.finish(), 1, 64, lambda: [counts.copy(), np.zeros(64, np.int32)])
    np.testing.assert_array_equal(got[1], want[1])


def test_for_loop_with_per_thread_bounds_around_a_warp_op():
    """Trip counts fall with the lane, so the lane each thread reads from is still looping."""
    k = KernelIR("divergent_for", n=Array(i32, 1), out=Array(f32, 1))
    i = k.global_id()

    def body(iv, acc):
        neighbour = k.op(warp.ShflUp, k.op(warp.ActiveMask), acc, i32c(k, 1))
        return [k.op(arith.Add, neighbour, k.cast(iv, f32))]

    (acc,) = k.for_(k.load(k["n"], i), i32c(k, 0), i32c(k, -1), [k.cast(i, f32)], body)
    k.store(k["out"], i, acc)
    counts = np.random.default_rng(5).integers(0, 5, 64).astype(np.int32)
    counts = -np.sort(-counts.reshape(2, 32), axis=1).ravel()
    got, want = _both(k.finish(), 1, 64, lambda: [counts.copy(), np.zeros(64, np.float32)])
    np.testing.assert_array_equal(got[1], want[1])


def test_uniform_loop_results_are_used_after_it():
    """A double-buffered scan: the while loop carries (offset, source) the same in every
    thread, with a barrier inside; its final source is read after the loop."""
    k = KernelIR("scan", x=Array(f32, 1), out=Array(f32, 1))
    buf = k.op(memory.SharedAlloc, shape=(2, 64), dtype=f32)
    tid = k.tid()
    k.store(buf, i32c(k, 0), tid, k.load(k["x"], tid))
    k.create(sync.Barrier)

    def step(offset, source):
        v = k.load(buf, source, tid)
        (v,) = k.if_(k.cmp("ge", tid, offset),
                     lambda: [k.op(arith.Add, v, k.load(buf, source,
                                                        k.op(arith.Sub, tid, offset)))],
                     lambda: [v], [f32])
        other = k.op(arith.Sub, i32c(k, 1), source)
        k.store(buf, other, tid, v)
        k.create(sync.Barrier)
        return [k.op(arith.Mul, offset, i32c(k, 2)), other]

    _, source = k.while_([i32c(k, 1), i32c(k, 0)],
                         lambda offset, source: k.cmp("lt", offset, i32c(k, 64)), step)
    k.store(k["out"], tid, k.load(buf, source, tid))
    x = np.random.default_rng(6).uniform(0, 1, 64).astype(np.float32)
    out = np.zeros(64, np.float32)
    cpu.compile(k.finish()).launch(1, 64, [x, out])
    np.testing.assert_allclose(out, np.cumsum(x), rtol=1e-5)
