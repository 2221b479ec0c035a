"""CPU backend: atomics, strided and aliased arrays, local arrays, bounds checking, launches."""
from __future__ import annotations

import numpy as np
import pytest

from zymo.backend import cpu
from zymo.diagnostics import BoundsError, CompileError, LaunchError
from zymo.ir.types import Array, f32, f64, i32, i64, u32, u64
from zymo.ops import arith, atomic, memory, sync, thread

from .cpu_ir import KernelIR, i32c


def _guarded(k: KernelIR, array, body, axis: int = 0):
    i = k.global_id()
    k.if_(k.cmp("lt", k.cast(i, i64), k.dim(array, axis)), lambda: body(i) or [])


# ---- atomics ---------------------------------------------------------------------------------
@pytest.mark.parametrize("t", [i32, u64, f32, f64], ids=str)
def test_atomic_add_from_every_thread(t):
    """Many blocks (run on several host threads) add into a few counters; every thread also
    gets back a distinct old value of its counter."""
    k = KernelIR("count", x=Array(t, 1), total=Array(t, 1), old=Array(t, 1))

    def body(i):
        bucket = k.op(arith.Mod, i, i32c(k, 3))
        k.store(k["old"], i, k.op(atomic.AtomicAdd, k["total"], bucket, k.load(k["x"], i)))

    _guarded(k, k["x"], body)
    n = 100_000
    x = np.ones(n, t.dtype)
    total = np.zeros(3, t.dtype)
    old = np.zeros(n, t.dtype)
    cpu.compile(k.finish()).launch(-(-n // 128), 128, [x, total, old])
    assert total.tolist() == [len(range(b, n, 3)) for b in range(3)]
    for b in range(3):
        assert sorted(old[b::3].tolist()) == list(range(len(range(b, n, 3))))


@pytest.mark.parametrize("cls,reduce", [(atomic.AtomicMax, np.max), (atomic.AtomicMin, np.min)],
                         ids=["max", "min"])
@pytest.mark.parametrize("t", [i32, u32, f32, f64], ids=str)
def test_atomic_min_max(cls, reduce, t):
    k = KernelIR("extremum", x=Array(t, 1), out=Array(t, 1))
    _guarded(k, k["x"], lambda i: k.op(cls, k["out"], i32c(k, 0), k.load(k["x"], i)) and None)
    rng = np.random.default_rng(0)
    x = (rng.uniform(-1000, 1000, 50_000) if t.is_float
         else rng.integers(0 if not t.is_signed else -10**6, 10**6, 50_000)).astype(t.dtype)
    out = x[:1].copy()
    cpu.compile(k.finish()).launch(-(-len(x) // 256), 256, [x, out])
    assert out[0] == reduce(x)


def test_atomic_exchange_and_compare_and_swap():
    """A CAS loop implements a 'first writer wins' slot; exchange returns previous values."""
    k = KernelIR("cas", owner=Array(i32, 1), swaps=Array(i64, 1), seen=Array(i64, 1))

    def body(i):
        minus_one = i32c(k, -1)
        k.op(atomic.AtomicCas, k["owner"], i32c(k, 0), minus_one, i)
        k.store(k["seen"], i, k.op(atomic.AtomicExch, k["swaps"], i32c(k, 0), k.cast(i, i64)))

    _guarded(k, k["seen"], body)
    n = 5000
    owner = np.full(1, -1, np.int32)
    swaps = np.full(1, -1, np.int64)
    seen = np.zeros(n, np.int64)
    cpu.compile(k.finish()).launch(-(-n // 64), 64, [owner, swaps, seen])
    assert 0 <= owner[0] < n
    everything = np.sort(np.concatenate([seen, swaps]))
    np.testing.assert_array_equal(everything, np.arange(-1, n))


def test_shared_memory_atomics_histogram():
    k = KernelIR("histogram", x=Array(i32, 1), bins=Array(u32, 1))
    local_bins = k.op(memory.SharedAlloc, shape=(16,), dtype=u32)
    tid = k.tid()
    k.if_(k.cmp("lt", tid, i32c(k, 16)),
          lambda: k.store(local_bins, tid, k.const(0, u32)) or [])
    k.create(sync.Barrier)
    _guarded(k, k["x"], lambda i: k.op(atomic.AtomicAdd, local_bins, k.load(k["x"], i),
                                       k.const(1, u32)) and None)
    k.create(sync.Barrier)
    k.if_(k.cmp("lt", tid, i32c(k, 16)),
          lambda: k.op(atomic.AtomicAdd, k["bins"], tid, k.load(local_bins, tid)) and [])
    x = np.random.default_rng(1).integers(0, 16, 10_000).astype(np.int32)
    bins = np.zeros(16, np.uint32)
    cpu.compile(k.finish()).launch(-(-len(x) // 128), 128, [x, bins])
    np.testing.assert_array_equal(bins, np.bincount(x, minlength=16))


# ---- strides, layouts, aliasing ----------------------------------------------------------------
def _transpose_kernel(layout: str) -> KernelIR:
    A = Array(f64, 2, layout=layout)
    k = KernelIR("transpose_add", a=A, b=A, out=Array(f64, 2, layout=layout))
    col, row = k.global_id("x"), k.global_id("y")
    inside = k.op(arith.BitAnd, k.cmp("lt", k.cast(row, i64), k.dim(k["out"], 0)),
                  k.cmp("lt", k.cast(col, i64), k.dim(k["out"], 1)))
    k.if_(inside, lambda: k.store(k["out"], row, col, k.op(
        arith.Add, k.load(k["a"], row, col), k.load(k["b"], col, row))) or [])
    return k


def test_strided_views():
    """Any-layout arrays: a transposed view, a reversed view, a column slice."""
    rng = np.random.default_rng(2)
    base = rng.standard_normal((40, 60))
    a = base[::2, ::-2]            # (20, 30), negative column stride
    b = rng.standard_normal((30, 20)).T.copy().T  # (30, 20) as a transposed view
    out_base = np.zeros((20, 61))
    out = out_base[:, 1::2]        # (20, 30), non-contiguous
    cpu.compile(_transpose_kernel("A").finish()).launch((4, 3), (8, 8), [a, b, out])
    np.testing.assert_array_equal(out, a + b.T)
    assert not out_base[:, 0::2].any()


def test_c_layout_requires_contiguous_arrays():
    kernel = cpu.compile(_transpose_kernel("C").finish())
    a = np.ones((8, 8))
    kernel.launch((1, 1), (8, 8), [a, a.copy(), np.zeros((8, 8))])
    with pytest.raises(LaunchError, match="C-contiguous"):
        kernel.launch((1, 1), (8, 8), [a[:, ::2], a, np.zeros((8, 8))])


def test_overlapping_arrays_are_correct():
    """The same buffer as input and output (shifted views): no noalias promise is made."""
    k = KernelIR("shift", src=Array(f32, 1, layout="A"), dst=Array(f32, 1, layout="A"))
    _guarded(k, k["dst"], lambda i: k.store(k["dst"], i, k.op(
        arith.Add, k.load(k["src"], i), k.const(1.0, f32))))
    kernel = cpu.compile(k.finish())
    # one thread at a time in order: dst[i] = src[i] + 1 where dst is src shifted by one
    data = np.zeros(1001, np.float32)
    kernel.launch(1, 1000, [data[:-1], data[1:]])
    np.testing.assert_array_equal(data, np.arange(1001, dtype=np.float32))


def test_launch_argument_errors():
    k = KernelIR("noop", x=Array(f32, 1), s=i32)
    kernel = cpu.compile(k.finish())
    with pytest.raises(LaunchError, match="float64"):
        kernel.launch(1, 1, [np.zeros(3), 1])
    with pytest.raises(LaunchError, match="takes 2 arguments"):
        kernel.launch(1, 1, [np.zeros(3, np.float32)])
    with pytest.raises(LaunchError, match="at most 1024"):
        kernel.launch(1, (64, 32), [np.zeros(3, np.float32), 1])
    kernel.launch(0, 1, [np.zeros(3, np.float32), 1])   # an empty grid does nothing


# ---- local arrays ------------------------------------------------------------------------------
def test_local_arrays_are_per_thread():
    k = KernelIR("local", x=Array(i64, 1), out=Array(i64, 1))
    scratch = k.op(memory.LocalAlloc, shape=(8,), dtype=i64)

    def body(i):
        v = k.load(k["x"], i)

        def fill(j):
            k.store(scratch, j, k.op(arith.Mul, v, k.cast(j, i64)))
            return []

        k.for_(i32c(k, 0), i32c(k, 8), i32c(k, 1), [], fill)
        (total,) = k.for_(i32c(k, 0), i32c(k, 8), i32c(k, 1), [k.const(0, i64)],
                          lambda j, acc: [k.op(arith.Add, acc, k.load(scratch, j))])
        k.store(k["out"], i, total)

    _guarded(k, k["x"], body)
    x = np.arange(300, dtype=np.int64)
    out = np.zeros(300, np.int64)
    cpu.compile(k.finish()).launch(3, 128, [x, out])
    np.testing.assert_array_equal(out, 28 * x)


# ---- bounds checking ---------------------------------------------------------------------------
def _gather_kernel():
    k = KernelIR("gather", x=Array(f32, 2), index=Array(i32, 1), out=Array(f32, 1))
    from zymo.diagnostics import Loc
    k.loc = Loc("gather.py", 7, 13)
    _guarded(k, k["out"], lambda i: k.store(k["out"], i, k.load(
        k["x"], i32c(k, 1), k.load(k["index"], i))))
    return k.finish()


def test_bounds_error_names_array_index_shape_and_line():
    kernel = cpu.compile(_gather_kernel(), boundscheck=True)
    x = np.ones((2, 5), np.float32)
    out = np.zeros(100, np.float32)
    index = np.zeros(100, np.int32)
    kernel.launch(1, 128, [x, index, out])
    assert out.sum() == 100
    index[37] = 5
    with pytest.raises(BoundsError) as error:
        kernel.launch(1, 128, [x, index, out])
    message = str(error.value)
    assert "gather.py:7:13" in message and "`x`" in message
    assert "(1, 5)" in message and "(2, 5)" in message
    assert error.value.index == (1, 5) and error.value.shape == (2, 5)
    index[37] = -1
    with pytest.raises(BoundsError, match=r"\(1, -1\)"):
        kernel.launch(4, 32, [x, index, out])


def test_bounds_errors_stop_a_parallel_launch():
    kernel = cpu.compile(_gather_kernel(), boundscheck=True)
    n = 1 << 18
    index = np.zeros(n, np.int32)
    index[n // 2:] = 99
    with pytest.raises(BoundsError, match="99"):
        kernel.launch(n // 256, 256, [np.ones((2, 5), np.float32), index, np.zeros(n, np.float32)])


def test_without_boundscheck_there_is_no_check():
    kernel = cpu.compile(_gather_kernel())
    assert "zymo.error" not in kernel.llvm_ir and "cmpxchg" not in kernel.llvm_ir


# ---- what the CPU cannot do --------------------------------------------------------------------
def test_device_function_with_barrier_is_rejected():
    k = KernelIR("caller", x=Array(f32, 1))

    def synchronizing():
        k.create(sync.Barrier)
        return []

    k.device("sync_helper", {}, [], synchronizing)
    k.call("sync_helper", [])
    with pytest.raises(CompileError, match="inlined"):
        cpu.compile(k.finish())


def test_block_geometry_is_uniform_for_hoisting():
    """Block-level values (blockIdx * blockDim, shapes) computed once per block feed both a
    thread loop and block mode."""
    k = KernelIR("offsets", out=Array(i32, 1))
    base = k.op(arith.Mul, k.special(thread.BlockIdx), k.special(thread.BlockDim))
    shared = k.op(memory.SharedAlloc, shape=(32,), dtype=i32)
    k.store(shared, k.tid(), base)
    k.create(sync.Barrier)
    k.store(k["out"], k.global_id(), k.op(arith.Add, k.load(shared, i32c(k, 0)), k.tid()))
    out = np.zeros(96, np.int32)
    cpu.compile(k.finish()).launch(3, 32, [out])
    np.testing.assert_array_equal(out, np.arange(96))
