"""CPU backend: structured control flow, device functions and thread geometry."""
from __future__ import annotations

import numpy as np
import pytest

from zymo.backend import cpu, interp
from zymo.ir.types import Array, bool_, f32, f64, i8, i32, i64, u32
from zymo.ops import arith, memory, thread

from .cpu_ir import KernelIR, i32c


def _guarded(k: KernelIR, array, body):
    """if i < len(array): body(i), with i the global thread id."""
    i = k.global_id()
    k.if_(k.cmp("lt", k.cast(i, i64), k.dim(array)), lambda: body(i))


def test_range_loops_follow_python_range():
    """Bounds and steps differ per thread, negative steps included (sign known only at run
    time); each thread counts its iterations and sums its induction variable."""
    k = KernelIR("ranges", lo=Array(i32, 1), hi=Array(i32, 1), step=Array(i32, 1),
                 count=Array(i32, 1), total=Array(i64, 1))

    def body(i):
        zero, one = i32c(k, 0), i32c(k, 1)
        count, total = k.for_(k.load(k["lo"], i), k.load(k["hi"], i), k.load(k["step"], i),
                              [zero, k.const(0, i64)],
                              lambda iv, c, t: [k.op(arith.Add, c, one),
                                                k.op(arith.Add, t, k.cast(iv, i64))])
        k.store(k["count"], i, count)
        k.store(k["total"], i, total)

    _guarded(k, k["lo"], body)
    rng = np.random.default_rng(0)
    n = 200
    lo = rng.integers(-50, 50, n).astype(np.int32)
    hi = rng.integers(-50, 50, n).astype(np.int32)
    step = rng.choice([-7, -3, -1, 1, 2, 5], n).astype(np.int32)
    count, total = np.zeros(n, np.int32), np.zeros(n, np.int64)
    cpu.compile(k.finish()).launch(1, 256, [lo, hi, step, count, total])
    for j in range(n):
        r = range(lo[j], hi[j], step[j])
        assert count[j] == len(r) and total[j] == sum(r), (lo[j], hi[j], step[j])


def test_range_at_the_integer_limits():
    """An i8 loop over range(-128, 127, s) must neither overflow nor run forever."""
    k = KernelIR("limits", out=Array(i32, 1))

    def body(i):
        lo, hi = k.const(-128, i8), k.const(127, i8)
        outputs = []
        for step in (1, 100, -1):
            first, last = (lo, hi) if step > 0 else (hi, lo)
            (count,) = k.for_(first, last, k.const(step, i8), [i32c(k, 0)],
                              lambda iv, c: [k.op(arith.Add, c, i32c(k, 1))])
            outputs.append(count)
        for slot, value in enumerate(outputs):
            k.store(k["out"], i32c(k, slot), value)

    k.if_(k.cmp("eq", k.global_id(), i32c(k, 0)), lambda: body(None))
    out = np.zeros(3, np.int32)
    cpu.compile(k.finish()).launch(1, 32, [out])
    assert out.tolist() == [len(range(-128, 127)), len(range(-128, 127, 100)),
                            len(range(127, -128, -1))]


def test_while_loop_collatz():
    k = KernelIR("collatz", x=Array(i64, 1), steps=Array(i32, 1))

    def body(i):
        one, two, three = (k.const(v, i64) for v in (1, 2, 3))

        def cond(n, s):
            return k.cmp("gt", n, one)

        def step(n, s):
            even = k.cmp("eq", k.op(arith.Mod, n, two), k.const(0, i64))
            (nxt,) = k.if_(even, lambda: [k.op(arith.FloorDiv, n, two)],
                           lambda: [k.op(arith.Add, k.op(arith.Mul, n, three), one)], [i64])
            return [nxt, k.op(arith.Add, s, i32c(k, 1))]

        _, steps = k.while_([k.load(k["x"], i), i32c(k, 0)], cond, step)
        k.store(k["steps"], i, steps)

    _guarded(k, k["x"], body)
    x = np.arange(1, 301, dtype=np.int64)
    steps = np.zeros(300, np.int32)
    cpu.compile(k.finish()).launch(3, 128, [x, steps])

    def collatz(n):
        s = 0
        while n > 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            s += 1
        return s

    assert steps.tolist() == [collatz(int(n)) for n in x]


def test_device_functions_are_called():
    """A device function taking an array and scalars, returning two values (not inlined)."""
    k = KernelIR("calls", x=Array(f64, 1), y=Array(f64, 1), z=Array(f64, 1))

    def stats(array, index, scale):
        value = k.load(array, index)
        return [k.op(arith.Mul, value, scale), k.op(arith.Add, value, scale)]

    k.device("stats", {"array": Array(f64, 1), "index": i32, "scale": f64}, [f64, f64], stats)

    def body(i):
        product, total = k.call("stats", [f64, f64], k["x"], i, k.const(3.0, f64))
        k.store(k["y"], i, product)
        k.store(k["z"], i, total)

    _guarded(k, k["x"], body)
    x = np.linspace(0, 1, 100)
    y, z = np.zeros(100), np.zeros(100)
    cpu.compile(k.finish()).launch(1, 128, [x, y, z])
    np.testing.assert_allclose(y, 3 * x)
    np.testing.assert_allclose(z, x + 3)


@pytest.mark.parametrize("grid,block", [((2, 3, 2), (4, 3, 2)), ((3, 1, 1), (40, 1, 1)),
                                        ((1, 2, 1), (8, 8, 1)), ((37, 5, 3), (8, 4, 2)),
                                        ((300, 1, 1), (128, 1, 1))])
def test_thread_geometry(grid, block):
    """Every thread records its ids; the linear id orders x fastest, as CUDA does."""
    k = KernelIR("geometry", out=Array(i32, 2))
    specials = [k.special(cls, axis) for cls in (thread.ThreadIdx, thread.BlockIdx,
                                                 thread.BlockDim, thread.GridDim)
                for axis in "xyz"] + [k.special(thread.LaneId)]
    tx, ty, tz, bx, by, bz, nx, ny, nz, gx, gy = specials[:11]
    linear_block = k.op(arith.Add, bx, k.op(arith.Mul, gx, k.op(arith.Add, by,
                                                                 k.op(arith.Mul, gy, bz))))
    linear_thread = k.op(arith.Add, tx, k.op(arith.Mul, nx, k.op(arith.Add, ty,
                                                                  k.op(arith.Mul, ny, tz))))
    threads = k.op(arith.Mul, k.op(arith.Mul, nx, ny), nz)
    row = k.op(arith.Add, k.op(arith.Mul, linear_block, threads), linear_thread)
    for column, value in enumerate(specials):
        k.store(k["out"], row, i32c(k, column), value)
    total = int(np.prod(grid) * np.prod(block))
    got = np.full((total, 13), -1, np.int32)
    module = k.finish()
    cpu.compile(module).launch(grid, block, [got])
    want = np.full_like(got, -1)
    interp.run(module, grid, block, [want])
    np.testing.assert_array_equal(got, want)   # every thread ran once, with its own ids


def test_nested_ifs_with_results_match_interpreter():
    k = KernelIR("nested", x=Array(f32, 1), out=Array(f32, 1), flags=Array(bool_, 1))

    def body(i):
        v = k.load(k["x"], i)
        zero = k.const(0.0, f32)
        positive = k.cmp("gt", v, zero)

        def inner():
            big = k.cmp("gt", v, k.const(0.5, f32))
            return k.if_(big, lambda: [k.op(arith.Mul, v, v), big],
                         lambda: [k.op(arith.Neg, v), big], [f32, bool_])

        r, flag = k.if_(positive, inner, lambda: [zero, positive], [f32, bool_])
        k.store(k["out"], i, r)
        k.store(k["flags"], i, flag)

    _guarded(k, k["x"], body)
    module = k.finish()
    x = np.random.default_rng(1).uniform(-1, 1, 500).astype(np.float32)
    results = []
    for run in (lambda args: cpu.compile(module).launch(2, 256, args),
                lambda args: interp.run(module, 2, 256, args)):
        args = [x, np.zeros(500, np.float32), np.zeros(500, bool)]
        run(args)
        results.append(args[1:])
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)


def test_uniform_scalar_parameters():
    """Scalars of several types arrive intact (bool, u32 above 2**31, f64)."""
    k = KernelIR("scalars", flag=bool_, big=u32, scale=f64, out=Array(f64, 1))

    def body():
        chosen = k.op(arith.Select, k["flag"], k.cast(k["big"], f64), k["scale"])
        k.store(k["out"], i32c(k, 0), chosen)

    k.if_(k.cmp("eq", k.global_id(), i32c(k, 0)), lambda: body() or [])
    module = k.finish()
    out = np.zeros(1)
    kernel = cpu.compile(module)
    kernel.launch(1, 1, [np.bool_(True), np.uint32(3_000_000_000), 2.5, out])
    assert out[0] == 3e9
    kernel.launch(1, 1, [False, 7, np.float64(2.5), out])
    assert out[0] == 2.5


def test_shared_constant_and_memory_ops_lower():
    """memory.const arrays live in the module; memory.dim of a static shape is a constant."""
    k = KernelIR("table", out=Array(i32, 1))
    table = k.op(memory.ConstArray, data=np.array([[3, 1, 4], [1, 5, 9]], np.int32))

    def body(i):
        row = k.op(arith.FloorDiv, i, i32c(k, 3))
        col = k.op(arith.Mod, i, i32c(k, 3))
        extent = k.cast(k.dim(table, 1), i32)
        k.store(k["out"], i, k.op(arith.Add, k.load(table, row, col), extent))

    _guarded(k, k["out"], body)
    out = np.zeros(6, np.int32)
    cpu.compile(k.finish()).launch(1, 32, [out])
    assert out.tolist() == [6, 4, 7, 4, 8, 12]


def test_kernels_indexing_rows_by_x_run_with_y_innermost():
    """`i, j = grid(2); out[i, j] = ...` makes threadIdx.y the contiguous axis: the CPU
    exchanges x and y, invisibly (ids, lane ids and results equal the interpreter's)."""
    A = Array(f32, 2)
    k = KernelIR("by_rows", a=A, out=A, lanes=Array(i32, 2), ids=Array(i32, 2))
    i, j = k.global_id("x"), k.global_id("y")
    inside = k.op(arith.BitAnd, k.cmp("lt", k.cast(i, i64), k.dim(k["out"], 0)),
                  k.cmp("lt", k.cast(j, i64), k.dim(k["out"], 1)))

    def body():
        value = k.op(arith.Mul, k.load(k["a"], i, j), k.const(2.0, f32))
        k.store(k["out"], i, j, value)
        k.store(k["lanes"], i, j, k.special(thread.LaneId))
        k.store(k["ids"], i, j, k.op(arith.Add, k.tid("x"), k.op(arith.Mul, k.tid("y"),
                                                                   i32c(k, 1000))))
        return []

    k.if_(inside, body)
    module = k.finish()
    kernel = cpu.compile(module)
    assert "exchange" not in kernel.llvm_ir     # nothing to see in the IR: the launch swaps
    a = np.random.default_rng(3).standard_normal((70, 45)).astype(np.float32)

    def args():
        return [a, np.zeros_like(a), np.zeros((70, 45), np.int32), np.zeros((70, 45), np.int32)]

    got, want = args(), args()
    grid, block = (5, 3), (16, 16)
    kernel.launch(grid, block, got)
    interp.run(module, grid, block, want)
    for mine, theirs in zip(got[1:], want[1:]):
        np.testing.assert_array_equal(mine, theirs)
    assert kernel._fast.exchange_xy
