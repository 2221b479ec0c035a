"""The reference interpreter on hand-built IR: SIMT semantics, memory checks, races, speed."""
from __future__ import annotations

import time

import numpy as np
import pytest

from zymo.backend import interp
from zymo.diagnostics import (BoundsError, KernelRuntimeError, LaunchError, RaceError,
                              WarpSyncError)
from zymo.ir.types import f32, f64, i32, i64, u32

from .helpers import KernelBuilder, array, atomic, bool_, warp


# ---- kernels used by several tests ----------------------------------------------------
def saxpy_module():
    """if i < n: y[i] = a * x[i] + y[i]"""
    k = KernelBuilder("saxpy", [("a", f32), ("x", array(f32)), ("y", array(f32))])
    i = k.global_id()
    n = k.cast(k.dim(k["x"]), i32)

    def then():
        value = k.add(k.mul(k["a"], k.load(k["x"], i)), k.load(k["y"], i))
        k.store(k["y"], i, value)
        return ()

    k.if_(k.cmp("lt", i, n), [], then)
    return k.finish()


def per_thread(body, dtype=i32, extra=()):
    """A kernel storing `body(k, i)` into out[i] for every thread i < len(out)."""
    k = KernelBuilder("per_thread", [("out", array(dtype)), *extra])
    i = k.global_id()
    n = k.cast(k.dim(k["out"]), i32)

    def then():
        k.store(k["out"], i, body(k, i))
        return ()

    k.if_(k.cmp("lt", i, n), [], then)
    return k.finish()


# ---- arithmetic and geometry ------------------------------------------------------------
def test_saxpy_with_strided_arrays():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(2000).astype(np.float32)[::2]
    y_base = rng.standard_normal((1000, 3)).astype(np.float32)
    y = y_base[:, 1]
    expected = np.float32(2.5) * x + y
    interp.run(saxpy_module(), 4, 256, [np.float32(2.5), x, y])
    np.testing.assert_array_equal(y, expected)
    assert np.array_equal(y_base[:, 1], expected)  # written through the view


def test_thread_geometry_3d():
    k = KernelBuilder("geometry", [("out", array(i32, 2))])
    tid = [k.tid(axis) for axis in "xyz"]
    ntid = [k.special(interp_ops().BlockDim, axis) for axis in "xyz"]
    ctaid = [k.special(interp_ops().BlockIdx, axis) for axis in "xyz"]
    nctaid = [k.special(interp_ops().GridDim, axis) for axis in "xyz"]
    linear_tid = k.add(tid[0], k.mul(ntid[0], k.add(tid[1], k.mul(ntid[1], tid[2]))))
    linear_block = k.add(ctaid[0], k.mul(nctaid[0], k.add(ctaid[1], k.mul(nctaid[1], ctaid[2]))))
    size = k.mul(k.mul(ntid[0], ntid[1]), ntid[2])
    row = k.add(k.mul(linear_block, size), linear_tid)
    lane = k.special(interp_ops().LaneId)
    for column, value in enumerate([*tid, *ctaid, lane]):
        k.store(k["out"], row, k.const(column), value)
    out = np.zeros((2 * 3 * 2 * 4 * 3 * 5, 7), np.int32)
    interp.run(k.finish(), (2, 3, 2), (4, 3, 5), [out])
    t = np.arange(60)
    np.testing.assert_array_equal(out[:60, 0], t % 4)
    np.testing.assert_array_equal(out[:60, 1], t // 4 % 3)
    np.testing.assert_array_equal(out[:60, 2], t // 12)
    np.testing.assert_array_equal(out[:, 6], np.tile(t % 32, 12))
    blocks = np.repeat(np.arange(12), 60)
    np.testing.assert_array_equal(out[:, 3], blocks % 2)
    np.testing.assert_array_equal(out[:, 4], blocks // 2 % 3)
    np.testing.assert_array_equal(out[:, 5], blocks // 6)


def interp_ops():
    from zymo.ops import thread
    return thread


def test_integer_arithmetic_wraps_silently():
    module = per_thread(lambda k, i: k.mul(k.add(i, 2**31 - 8), k.const(3)))
    out = np.zeros(16, np.int32)
    with np.errstate(all="raise"):
        interp.run(module, 1, 16, [out])
    expected = ((np.arange(16, dtype=np.int64) + 2**31 - 8) * 3 + 2**31) % 2**32 - 2**31
    np.testing.assert_array_equal(out, expected)


# ---- control flow ---------------------------------------------------------------------
def test_divergent_if_merges_per_thread():
    def body(k, i):
        even = k.cmp("eq", k.mod(i, 2), 0)
        small = k.cmp("lt", i, 10)

        def inner():
            return k.if_(small, [i32], lambda: [k.mul(i, 100)], lambda: [k.mul(i, 2)])

        return k.if_(even, [i32], inner, lambda: [k.sub(k.const(0), i)])[0]

    out = np.zeros(40, np.int32)
    interp.run(per_thread(body), 2, 32, [out])
    i = np.arange(40)
    np.testing.assert_array_equal(out, np.where(i % 2 == 0, np.where(i < 10, 100 * i, 2 * i), -i))


def test_for_with_per_thread_bounds_and_negative_step():
    def body(k, i):
        # sum(range(i, -1, -3)) + sum(j*j for j in range(0, i, step_i)), step_i = x[i]
        total = k.for_(i, k.const(-1), k.const(-3), [k.const(0)],
                       lambda j, acc: [k.add(acc, j)])[0]
        step = k.load(k["steps"], i)
        squares = k.for_(k.const(0), i, step, [total],
                         lambda j, acc: [k.add(acc, k.mul(j, j))])[0]
        return squares

    steps = np.array([1, 2, 3, 4] * 10, np.int32)
    out = np.zeros(40, np.int32)
    interp.run(per_thread(body, extra=[("steps", array(i32))]), 1, 64, [out, steps])
    expected = [sum(range(i, -1, -3)) + sum(j * j for j in range(0, i, int(steps[i])))
                for i in range(40)]
    np.testing.assert_array_equal(out, expected)


def test_for_with_zero_step_is_an_error():
    module = per_thread(lambda k, i: k.for_(k.const(0), i, k.const(0), [i],
                                            lambda j, acc: [acc])[0])
    with pytest.raises(KernelRuntimeError, match="step must not be zero"):
        interp.run(module, 1, 4, [np.zeros(4, np.int32)])


def test_while_iterates_per_thread():
    def body(k, i):  # Collatz steps from i + 1
        def before(n, steps):
            return k.cmp("ne", n, 1)

        def step(n, steps):
            even = k.cmp("eq", k.mod(n, 2), 0)
            half = k.binary(interp_arith().FloorDiv, n, 2)
            triple = k.add(k.mul(n, 3), 1)
            return [k.value(interp_arith().Select, even, half, triple), k.add(steps, 1)]

        return k.while_([k.add(i, 1), k.const(0)], before, step)[1]

    out = np.zeros(100, np.int32)
    interp.run(per_thread(body), 4, 32, [out])

    def collatz(n):
        steps = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1
        return steps

    np.testing.assert_array_equal(out, [collatz(i + 1) for i in range(100)])


def interp_arith():
    from zymo.ops import arith
    return arith


def test_device_function_call():
    k = KernelBuilder("kernel", [("out", array(f64))])
    device = KernelBuilder("square_plus", [("v", f64), ("w", f64)], [f64], kind="device",
                           module=k.module)
    device.finish(device.add(device.mul(device["v"], device["v"]), device["w"]))
    i = k.global_id()
    value = k.cast(i, f64)
    (result,) = k.call("square_plus", [f64], value, k.const(0.5, f64))
    k.store(k["out"], i, result)
    out = np.zeros(64)
    interp.run(k.finish(), 2, 32, [out])
    np.testing.assert_array_equal(out, np.arange(64.0) ** 2 + 0.5)


# ---- memory ---------------------------------------------------------------------------
def test_local_and_const_arrays():
    from zymo.ops import memory
    k = KernelBuilder("local", [("out", array(f32, 2))])
    i = k.tid()
    scratch = k.local((3,), f32)
    table = k.value(memory.ConstArray, data=np.array([10.0, 20.0, 30.0], np.float32))
    for j in range(2):  # element 2 stays uninitialised
        value = k.add(k.load(table, k.const(j)), k.cast(i, f32))
        k.store(scratch, k.const(j), value)
    for j in range(3):
        k.store(k["out"], i, k.const(j), k.load(scratch, k.const(j)))
    out = np.zeros((8, 3), np.float32)
    interp.run(k.finish(), 1, 8, [out])
    np.testing.assert_array_equal(out[:, 0], 10 + np.arange(8))
    np.testing.assert_array_equal(out[:, 1], 20 + np.arange(8))
    assert np.isnan(out[:, 2]).all()  # uninitialised local memory reads as NaN


def test_shared_memory_tree_reduction():
    k = KernelBuilder("block_sum", [("x", array(f32)), ("sums", array(f32))])
    t = k.tid()
    block = k.special(interp_ops().BlockIdx)
    partial = k.shared((128,), f32, name="partial")
    k.store(partial, t, k.load(k["x"], k.global_id()))
    k.barrier()

    def level(stride, carried):
        def add_pair():
            other = k.load(partial, k.add(t, stride))
            k.store(partial, t, k.add(k.load(partial, t), other))
            return ()

        k.if_(k.cmp("lt", t, stride), [], add_pair)
        k.barrier()
        return [carried]

    # strides 64, 32, ..., 1: a loop with a negative step and a barrier inside
    k.for_(k.const(64), k.const(0), k.const(-1), [k.const(0)], lambda s, c: level(s, c))

    def write():
        k.store(k["sums"], block, k.load(partial, k.const(0)))
        return ()

    k.if_(k.cmp("eq", t, 0), [], write)
    module = k.finish()
    x = np.random.default_rng(1).integers(0, 10, 128 * 6).astype(np.float32)
    sums = np.zeros(6, np.float32)
    # stride s = 64, 63, ..., 1 reads partial[t + s] for t < s: never beyond 127, race free
    interp.run(module, 6, 128, [x, sums])
    expected = []
    for b in range(6):
        p = x[128 * b:128 * (b + 1)].copy()
        for s in range(64, 0, -1):
            p[:s] = p[:s] + p[s:2 * s]
        expected.append(p[0])
    np.testing.assert_array_equal(sums, expected)


def test_uninitialised_shared_memory_reads_as_poison():
    k = KernelBuilder("poison", [("f", array(f32)), ("n", array(i32))])
    t = k.tid()
    floats = k.shared((32,), f32)
    ints = k.shared((32,), i32)
    k.store(k["f"], t, k.load(floats, t))
    k.store(k["n"], t, k.load(ints, t))
    f, n = np.zeros(32, np.float32), np.zeros(32, np.int32)
    interp.run(k.finish(), 1, 32, [f, n])
    assert np.isnan(f).all()
    assert (n.view(np.uint8) == 0xA5).all()


def test_masked_off_threads_do_not_fault():
    out = np.zeros(10, np.float32)
    x = np.arange(10, dtype=np.float32)
    interp.run(saxpy_module(), 1, 64, [np.float32(1), x, out])  # 54 threads out of range
    np.testing.assert_array_equal(out, x)


def test_bounds_error_names_array_index_shape_and_line():
    k = KernelBuilder("oob", [("x", array(f32)), ("y", array(f32))])
    i = k.tid()
    k.at(7)
    value = k.load(k["x"], k.add(i, 1))
    k.store(k["y"], i, value)
    module = k.finish()
    with pytest.raises(BoundsError) as error:
        interp.run(module, 1, 8, [np.zeros(8, np.float32), np.zeros(8, np.float32)])
    text = str(error.value)
    assert "kernel.py:9:1" in text  # the load (line 7 is the constant, 8 the add)
    assert "index 8 is out of bounds for `x` with shape (8,)" in text
    assert "thread (7, 0, 0)" in text


def test_bounds_error_on_store_and_2d_index():
    k = KernelBuilder("oob2", [("m", array(f32, 2))])
    i = k.tid()
    k.store(k["m"], k.const(1), i, k.const(1.0, f32))
    with pytest.raises(BoundsError, match=r"index \(1, 4\) is out of bounds for `m` with shape "
                                          r"\(2, 4\)"):
        interp.run(k.finish(), 1, 5, [np.zeros((2, 4), np.float32)])


# ---- atomics ---------------------------------------------------------------------------
def atomic_kernel(cls, dtype, operand_of):
    """old[i] = atomic(cls, target, index_of(i), operand_of(i))"""
    k = KernelBuilder("atomics", [("target", array(dtype)), ("index", array(i32)),
                                  ("old", array(dtype)), ("operand", array(dtype))])
    i = k.global_id()
    where = k.load(k["index"], i)
    old = k.atomic(cls, k["target"], where, *operand_of(k, i))
    k.store(k["old"], i, old)
    return k.finish()


def test_atomic_add_conflicts_run_in_thread_order():
    n = 1024
    index = (np.arange(n) % 3).astype(np.int32)
    index[500:] = 2  # one heavily contended element, two light ones
    operand = np.arange(n, dtype=np.int64)
    target = np.zeros(3, np.int64)
    old = np.zeros(n, np.int64)
    module = atomic_kernel(atomic.AtomicAdd, i64, lambda k, i: [k.load(k["operand"], i)])
    interp.run(module, 4, 256, [target, index, old, operand])
    expected_old, state = [], [0, 0, 0]
    for t in range(n):
        expected_old.append(state[index[t]])
        state[index[t]] += operand[t]
    np.testing.assert_array_equal(old, expected_old)
    np.testing.assert_array_equal(target, state)


def test_atomic_float_add_is_sequential():
    n = 512
    operand = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    target = np.zeros(1, np.float32)
    old = np.zeros(n, np.float32)
    module = atomic_kernel(atomic.AtomicAdd, f32, lambda k, i: [k.load(k["operand"], i)])
    interp.run(module, 2, 256, [target, np.zeros(n, np.int32), old, operand])
    running = np.float32(0)
    for t in range(n):
        assert old[t] == running
        running = np.float32(running + operand[t])
    assert target[0] == running


def test_atomic_max_min_exch_sub():
    rng = np.random.default_rng(3)
    index = rng.integers(0, 4, 100).astype(np.int32)
    operand = rng.integers(-50, 50, 100).astype(np.int32)
    for cls, fn in [(atomic.AtomicMax, max), (atomic.AtomicMin, min),
                    (atomic.AtomicExch, lambda a, b: b), (atomic.AtomicSub, lambda a, b: a - b)]:
        target = np.array([5, -5, 0, 7], np.int32)
        old = np.zeros(100, np.int32)
        module = atomic_kernel(cls, i32, lambda k, i: [k.load(k["operand"], i)])
        interp.run(module, 1, 100, [target, index, old, operand])
        state = [5, -5, 0, 7]
        expected = []
        for t in range(100):
            expected.append(state[index[t]])
            state[index[t]] = fn(state[index[t]], int(operand[t]))
        np.testing.assert_array_equal(old, expected, err_msg=cls.name)
        np.testing.assert_array_equal(target, state, err_msg=cls.name)


def test_atomic_cas_first_thread_wins():
    module = atomic_kernel(atomic.AtomicCas, u32,
                           lambda k, i: [k.const(0, u32), k.cast(k.add(i, 1), u32)])
    target = np.zeros(2, np.uint32)
    index = np.array([0] * 40 + [1] * 24, np.int32)  # 40 contenders: scanned one by one
    old = np.zeros(64, np.uint32)
    interp.run(module, 1, 64, [target, index, old, np.zeros(64, np.uint32)])
    np.testing.assert_array_equal(target, [1, 41])
    np.testing.assert_array_equal(old, [0] + [1] * 39 + [0] + [41] * 23)


def test_atomics_in_masked_threads_only():
    k = KernelBuilder("count_odd", [("counter", array(i32))])
    i = k.global_id()
    odd = k.cmp("eq", k.mod(i, 2), 1)
    k.if_(odd, [], lambda: (k.atomic(atomic.AtomicAdd, k["counter"], k.const(0), k.const(1)), ())[1])
    counter = np.zeros(1, np.int32)
    interp.run(k.finish(), 3, 100, [counter])
    assert counter[0] == 150


# ---- warps -----------------------------------------------------------------------------
def warp_kernel(make):
    k = KernelBuilder("warp", [("x", array(i32)), ("out", array(i32 if True else u32))])
    i = k.global_id()
    value = make(k, k.load(k["x"], i), k.special(interp_ops().LaneId))
    k.store(k["out"], i, value if value.type == i32 else k.cast(value, i32))
    return k.finish()


FULL = 0xFFFFFFFF


@pytest.mark.parametrize("block", [64, 48])  # 48: the second warp has 16 lanes
def test_shuffles(block):
    x = np.arange(block, dtype=np.int32) * 10
    lanes = np.arange(block) % 32
    warp_base = np.arange(block) - lanes
    warp_size = np.minimum(32, block - warp_base)

    def source(src):
        inside = (src >= 0) & (src < warp_size)
        return np.where(inside, x[np.where(inside, warp_base + src, 0)], x)

    cases = {
        warp.ShflIdx: (5, source(np.full(block, 5))),
        warp.ShflDown: (3, source(lanes + 3)),
        warp.ShflUp: (2, source(lanes - 2)),
        warp.ShflXor: (1, source(lanes ^ 1)),
    }
    for cls, (lane, expected) in cases.items():
        module = warp_kernel(lambda k, v, laneid, cls=cls, lane=lane:
                             k.warp(cls, k.const(FULL, u32), v, k.const(lane)))
        out = np.zeros(block, np.int32)
        interp.run(module, 1, block, [x, out])
        np.testing.assert_array_equal(out, expected, err_msg=cls.name)


def test_shuffle_warp_reduction():
    def reduce(k, value, laneid):
        def level(offset, acc):
            return [k.add(acc, k.warp(warp.ShflDown, k.const(FULL, u32), acc, offset))]

        total = k.for_(k.const(16), k.const(0), k.const(-1), [value], level)
        return total[0]

    # offsets 16, 15, ..., 1 would not be a reduction; check against a model of the same steps
    x = np.arange(64, dtype=np.int32)
    out = np.zeros(64, np.int32)
    interp.run(warp_kernel(reduce), 1, 64, [x, out])
    acc = x.copy()
    for offset in range(16, 0, -1):
        lanes = np.arange(64) % 32
        src = np.where(lanes + offset < 32, np.arange(64) + offset, np.arange(64))
        acc = acc + acc[src]
    np.testing.assert_array_equal(out, acc)


def select(k, condition, a, b):
    return k.value(interp_arith().Select, condition, a, b)


@pytest.mark.parametrize("mask,source,message", [
    # lanes 0-15 and 16-31 shuffle as two groups, each reading within itself: defined
    ("halves", "within", None),
    (0, "within", "its own lane 0 is not in the mask 0x00000000"),
    ("halves", "across", "it reads lane 16, which is not in the mask 0x0000ffff"),
    ("mixed", "within", "lane 1 makes the call with another mask, 0x0000ffff instead of "
                        "0x00000003"),
])
def test_undefined_shuffles_are_errors(mask, source, message):
    """What CUDA leaves undefined in a shuffle, which a GPU may still run as hoped: a caller
    missing from its mask, members with different masks, reading a lane outside the mask."""
    def make(k, value, laneid):
        upper = k.cmp("ge", laneid, k.const(16))
        if mask == "halves":
            m = select(k, upper, k.const(0xFFFF0000, u32), k.const(0x0000FFFF, u32))
        elif mask == "mixed":   # lane 0 says {0, 1}, lane 1 says {0..15}
            m = select(k, k.cmp("eq", laneid, k.const(0)), k.const(0x3, u32),
                         select(k, upper, k.const(0xFFFF0000, u32), k.const(0x0000FFFF, u32)))
        else:
            m = k.const(mask, u32)
        lane = k.binary(interp_arith().BitXor, laneid, k.const(1 if source == "within" else 16))
        return k.warp(warp.ShflIdx, m, value, lane)

    x = np.arange(32, dtype=np.int32) * 10
    out = np.zeros(32, np.int32)
    if message is None:
        interp.run(warp_kernel(make), 1, 32, [x, out])
        np.testing.assert_array_equal(out, x[np.arange(32) ^ 1])
    else:
        with pytest.raises(WarpSyncError, match=message.replace("(", r"\(")) as error:
            interp.run(warp_kernel(make), 1, 32, [x, out])
        assert "warp.shfl_idx with an undefined result" in str(error.value)


def test_vote_naming_a_lane_on_the_other_branch_is_an_error():
    def make(k, value, laneid):
        return k.if_(k.cmp("lt", laneid, k.const(20)), [u32],
                     lambda: [k.warp(warp.Ballot, k.const(FULL, u32), k.cmp("gt", value, 3))],
                     lambda: [k.const(0, u32)])[0]

    with pytest.raises(WarpSyncError, match="names lane 20, which has not exited but does not "
                                            "make this call"):
        interp.run(warp_kernel(make), 1, 32, [np.arange(32, dtype=np.int32),
                                              np.zeros(32, np.int32)])


def test_ballot_all_any_activemask_under_divergence():
    def vote(cls):
        def make(k, value, laneid):
            predicate = k.cmp("eq", k.mod(value, 3), 0)
            divergent = k.cmp("lt", laneid, 20)
            return k.if_(divergent, [cls_type(cls)],
                         lambda: [k.warp(cls, k.const(0x000FFFFF, u32), predicate)]
                         if cls is not warp.ActiveMask else [k.warp(cls)],
                         lambda: [k.const(0, cls_type(cls))])[0]

        return make

    def cls_type(cls):
        return bool_ if cls in (warp.VoteAll, warp.VoteAny) else u32

    x = np.arange(64, dtype=np.int32)
    x[32:] = 3  # in the second warp every predicate holds
    results = {}
    for cls in (warp.Ballot, warp.VoteAll, warp.VoteAny, warp.ActiveMask):
        out = np.zeros(64, np.int32)
        interp.run(warp_kernel(vote(cls)), 1, 64, [x, out])
        results[cls] = out
    first = sum(1 << lane for lane in range(20) if x[lane] % 3 == 0)
    second = (1 << 20) - 1
    active = np.arange(64) % 32 < 20
    np.testing.assert_array_equal(results[warp.Ballot],
                                  np.where(active, [first] * 32 + [second] * 32, 0))
    np.testing.assert_array_equal(results[warp.VoteAll], active & (np.arange(64) >= 32))
    np.testing.assert_array_equal(results[warp.VoteAny], active)
    np.testing.assert_array_equal(results[warp.ActiveMask].view(np.uint32),
                                  np.where(active, (1 << 20) - 1, 0))


# ---- races -----------------------------------------------------------------------------
def test_write_write_race():
    k = KernelBuilder("ww", [("out", array(i32))])
    k.at(12)
    k.store(k["out"], k.const(0), k.tid())
    with pytest.raises(RaceError) as error:
        interp.run(k.finish(), 1, 4, [np.zeros(1, np.int32)])
    text = str(error.value)
    assert "data race on `out[0]`" in text
    assert "kernel.py:14:1" in text  # the store (12: the constant, 13: the thread id)
    assert "thread (0, 0, 0) writes it here" in text
    assert "thread (3, 0, 0) writes it at kernel.py:14:1" in text


def test_writes_of_one_value_do_not_race_but_reads_of_them_do():
    """Every thread clearing a whole shared array (ADEPT V0's memsets): memory ends the same in
    any order, so no race; a different value, or an unordered read, still races."""
    def build(value, read: bool):
        k = KernelBuilder("clear", [("out", array(i32))])
        tile = k.shared((8,), i32, name="tile")
        for slot in range(8):
            k.store(tile, k.const(slot), value(k))
        if not read:
            k.barrier()
        k.store(k["out"], k.tid(), k.load(tile, k.mod(k.tid(), 8)))
        return k.finish()

    out = np.full(64, 5, np.int32)
    interp.run(build(lambda k: k.const(0), read=False), 1, 64, [out])
    np.testing.assert_array_equal(out, 0)
    with pytest.raises(RaceError, match="tile"):
        interp.run(build(lambda k: k.tid(), read=False), 1, 32, [out])
    with pytest.raises(RaceError, match="read"):
        interp.run(build(lambda k: k.const(0), read=True), 1, 32, [out])
    # in global memory, threads of different blocks writing one value do not race either
    k = KernelBuilder("flag", [("flag", array(i32))])
    k.store(k["flag"], k.const(0), k.const(1))
    flag = np.zeros(1, np.int32)
    interp.run(k.finish(), 3, 32, [flag])
    assert flag[0] == 1


def test_write_read_race_and_barrier_orders():
    def build(with_barrier: bool, space: str):
        k = KernelBuilder("wr", [("data", array(f32)), ("out", array(f32))])
        t = k.tid()
        target = k.shared((65,), f32, name="tile") if space == "shared" else k["data"]
        k.store(target, t, k.cast(t, f32))
        if with_barrier:
            k.barrier()
        k.store(k["out"], t, k.load(target, k.add(t, 1)))
        return k.finish()

    for space in ("shared", "global"):
        with pytest.raises(RaceError, match="tile" if space == "shared" else "data"):
            interp.run(build(False, space), 1, 64, [np.zeros(65, np.float32),
                                                    np.zeros(64, np.float32)])
        out = np.zeros(64, np.float32)
        data = np.full(65, 64, np.float32)
        interp.run(build(True, space), 1, 64, [data, out])
        expected = np.arange(1, 65, dtype=np.float32)
        if space == "shared":
            expected[-1] = np.nan  # tile[64] was never written
        np.testing.assert_array_equal(out, expected)


def test_read_then_write_race():
    k = KernelBuilder("rw", [("data", array(i32))])
    t = k.tid()
    value = k.load(k["data"], k.const(0))  # everyone reads data[0]
    k.store(k["data"], t, value)           # thread 0 then writes it
    with pytest.raises(RaceError, match=r"thread \(0, 0, 0\) writes it here.*read it"):
        interp.run(k.finish(), 1, 8, [np.zeros(8, np.int32)])


def test_race_between_blocks_in_global_memory(monkeypatch):
    k = KernelBuilder("blocks", [("data", array(i32))])
    block = k.special(interp_ops().BlockIdx)
    first = k.cmp("eq", k.tid(), 0)
    k.if_(first, [], lambda: (k.store(k["data"], k.const(0), block), ())[1])
    with pytest.raises(RaceError, match="threads of different blocks are never ordered"):
        interp.run(k.finish(), 2, 32, [np.zeros(1, np.int32)])
    # blocks in separate batches race too: the shadow memory spans the launch
    monkeypatch.setattr(interp.driver, "BATCH_THREADS", 32)
    with pytest.raises(RaceError, match="block \\(1, 0, 0\\), thread \\(0, 0, 0\\) writes"):
        interp.run(k.module, 2, 32, [np.zeros(1, np.int32)])


def test_atomics_do_not_race_but_plain_reads_of_them_do():
    k = KernelBuilder("hist", [("hist", array(i32)), ("out", array(i32))])
    t = k.tid()
    slot = k.add(k.mul(k.special(interp_ops().BlockIdx), 4), t)
    bins = k.shared((4,), i32, name="bins")
    k.if_(k.cmp("lt", t, 4), [], lambda: (k.store(bins, t, k.const(0)), ())[1])
    k.barrier()
    k.atomic(atomic.AtomicAdd, bins, k.mod(t, 4), k.const(1))
    k.atomic(atomic.AtomicAdd, k["hist"], k.mod(t, 4), k.const(1))
    k.barrier()
    k.if_(k.cmp("lt", t, 4), [], lambda: (k.store(k["out"], slot, k.load(bins, t)), ())[1])
    hist, out = np.zeros(4, np.int32), np.zeros(12, np.int32)
    interp.run(k.finish(), 3, 64, [hist, out])
    np.testing.assert_array_equal(hist, [48] * 4)
    np.testing.assert_array_equal(out, [16] * 12)

    racy = KernelBuilder("racy", [("counter", array(i32)), ("out", array(i32))])
    t = racy.tid()
    racy.atomic(atomic.AtomicAdd, racy["counter"], racy.const(0), racy.const(1))
    racy.store(racy["out"], t, racy.load(racy["counter"], racy.const(0)))
    with pytest.raises(RaceError, match="atomically updated"):
        interp.run(racy.finish(), 1, 8, [np.zeros(1, np.int32), np.zeros(8, np.int32)])


def test_race_checking_can_be_turned_off():
    k = KernelBuilder("ww", [("out", array(i32))])
    k.store(k["out"], k.const(0), k.tid())
    out = np.zeros(1, np.int32)
    interp.run(k.finish(), 1, 4, [out], check_races=False)
    assert out[0] in range(4)


# ---- barriers --------------------------------------------------------------------------
def test_divergent_barrier_is_an_error():
    k = KernelBuilder("divergent", [("out", array(i32))])
    t = k.tid()

    def then():
        k.at(30)
        k.barrier()
        k.store(k["out"], t, t)
        return ()

    k.if_(k.cmp("lt", t, 16), [], then)
    k.store(k["out"], t, t)  # more work after the if: the other threads are not finished
    with pytest.raises(KernelRuntimeError, match="kernel.py:30:1.*divergent barrier"):
        interp.run(k.finish(), 1, 32, [np.zeros(32, np.int32)])


def test_barrier_after_early_return_is_fine():
    """The frontend's lowering of `if t >= n: return` then a barrier: returned threads have
    finished, so they do not count as missing at the barrier."""
    k = KernelBuilder("early_return", [("x", array(f32)), ("n", i32)])
    t = k.tid()
    tile = k.shared((64,), f32, name="tile")
    returned = k.if_(k.cmp("ge", t, k["n"]), [bool_], lambda: [k.const(True, bool_)],
                     lambda: [k.const(False, bool_)])[0]
    keep_going = k.value(interp_arith().Not, returned)

    def rest():
        k.store(tile, t, k.load(k["x"], t))
        k.barrier()
        k.store(k["x"], t, k.load(tile, k.sub(k.sub(k["n"], 1), t)))
        return [k.const(False, bool_)]

    k.if_(keep_going, [bool_], rest, lambda: [k.const(True, bool_)])
    x = np.arange(64, dtype=np.float32)
    interp.run(k.finish(), 1, 64, [x, np.int32(40)])
    np.testing.assert_array_equal(x[:40], np.arange(40)[::-1])
    np.testing.assert_array_equal(x[40:], np.arange(40, 64))


def test_uniform_branch_barrier_differs_between_blocks():
    """Blocks of one batch may take different uniform branches, each with its barrier."""
    k = KernelBuilder("per_block", [("out", array(i32))])
    t = k.tid()
    block = k.special(interp_ops().BlockIdx)
    tile = k.shared((32,), i32)

    def branch(scale):
        def fill():
            k.store(tile, t, k.mul(t, scale))
            k.barrier()
            k.store(k["out"], k.global_id(), k.load(tile, k.sub(k.const(31), t)))
            return ()

        return fill

    k.if_(k.cmp("eq", k.mod(block, 2), 0), [], branch(1), branch(-1))
    out = np.zeros(128, np.int32)
    interp.run(k.finish(), 4, 32, [out])
    rev = 31 - np.arange(32)
    np.testing.assert_array_equal(out, np.concatenate([rev, -rev, rev, -rev]))


# ---- speed -----------------------------------------------------------------------------
def test_saxpy_million_threads_is_fast():
    n = 4096 * 256
    x = np.ones(n, np.float32)
    y = np.arange(n, dtype=np.float32)
    module = saxpy_module()
    start = time.perf_counter()
    interp.run(module, 4096, 256, [np.float32(2), x, y])
    elapsed = time.perf_counter() - start
    np.testing.assert_array_equal(y, np.arange(n, dtype=np.float32) + 2)
    assert elapsed < 5.0, f"1M-thread saxpy took {elapsed:.2f} s"


# ---- launch checking -------------------------------------------------------------------
def test_arguments_are_checked():
    from zymo.diagnostics import LaunchError
    module = saxpy_module()
    x = np.zeros(4, np.float32)
    with pytest.raises(LaunchError, match="takes 3 arguments"):
        interp.run(module, 1, 4, [np.float32(1), x])
    with pytest.raises(LaunchError, match="argument `x` must be a NumPy array"):
        interp.run(module, 1, 4, [np.float32(1), x.astype(np.float64), x])
    with pytest.raises(LaunchError, match="grid"):
        interp.run(module, (0, 1), 4, [np.float32(1), x, x])


def test_bounds_checking_can_be_turned_off():
    k = KernelBuilder("oob", [("y", array(f32))])
    i = k.tid()
    k.store(k["y"], i, k.cast(i, f32))
    y = np.zeros(4, np.float32)
    interp.run(k.finish(), 1, 8, [y], check_bounds=False)  # threads 4..7 write nowhere
    np.testing.assert_array_equal(y, np.arange(4))


def test_dynamic_shared_memory_is_sized_at_launch_and_aliased():
    k = KernelBuilder("dynamic", [("x", array(f32)), ("out", array(f32))])
    t = k.tid()
    first = k.shared((0,), f32, name="first")
    second = k.shared((0,), f32, name="second")  # numba: every dynamic array starts at 0
    k.store(first, t, k.load(k["x"], k.global_id()))
    k.barrier()
    k.store(k["out"], k.global_id(), k.load(second, k.sub(k.const(31), t)))
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    interp.run(k.finish(), 2, 32, [x, out], shared_bytes=32 * 4)
    np.testing.assert_array_equal(out, np.concatenate([x[:32][::-1], x[32:][::-1]]))
    with pytest.raises(BoundsError, match="shape \\(0,\\)"):
        interp.run(k.module, 1, 32, [x, out])  # no dynamic shared memory given


@pytest.mark.parametrize("dtype", [i32, f64])
def test_dynamic_shared_memory_of_other_dtypes_races_by_bytes(dtype):
    """Thread t writes its f32 of dynamic shared memory; then, with or without a barrier,
    thread t reads an element of another dtype over the same bytes (as i32, another thread's
    f32; as f64, its own and a neighbour's)."""
    def build(barrier: bool):
        k = KernelBuilder("dynamic", [("x", array(f32)), ("out", array(dtype))])
        t = k.tid()
        floats = k.shared((0,), f32, name="floats")
        other = k.shared((0,), dtype, name="other")
        k.store(floats, t, k.load(k["x"], k.global_id()))
        if barrier:
            k.barrier()
        k.store(k["out"], k.global_id(), k.load(other, k.mod(k.add(t, 1), 16)))
        return k.finish()

    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, dtype.dtype)
    with pytest.raises(RaceError, match="memory shared with `floats`"):
        interp.run(build(barrier=False), 2, 32, [x, out], shared_bytes=32 * 4)
    interp.run(build(barrier=True), 2, 32, [x, out], shared_bytes=32 * 4)
    expected = x.reshape(2, 32).view(dtype.dtype)[:, (np.arange(32) + 1) % 16]
    np.testing.assert_array_equal(out, expected.ravel())


def test_a_block_of_more_than_1024_threads_is_refused_as_on_the_gpu():
    k = KernelBuilder("noop", [("out", array(i32))])
    k.store(k["out"], k.const(0), k.const(1))
    module = k.finish()
    with pytest.raises(LaunchError, match="at most 1024 threads"):
        interp.run(module, 1, (64, 32), [np.zeros(1, np.int32)])
    interp.run(module, 1, (32, 32), [np.zeros(1, np.int32)])
