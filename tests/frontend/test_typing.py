"""Typing rules of the kernel language: weak Python scalars (as in JAX), promotion of strong
types, and the types of intrinsics, checked on the IR and on results."""
import numpy as np
import pytest

import zymo as zm
from zymo.ir import types as T


def result_types(kernel, *args, op_name):
    """Types of the results of the `op_name` ops inside the kernel's outermost `if` (the body
    proper, past the index computation), or of all of them when there is no `if`."""
    module = kernel.specialize(*args).module
    ifs = [op for op in module.kernel.body.block.ops if op.name == "control.if"]
    ops = ifs[-1].walk() if ifs else module.walk()
    return [r.type for op in ops if op.name == op_name for r in op.results]


@zm.kernel
def scale_literal(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * 2.5


@zm.kernel
def scale_arg(a, x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = a * x[i]


@pytest.mark.parametrize("dtype,expected", [(np.float32, T.f32), (np.float64, T.f64),
                                            (np.int32, T.f32), (np.int64, T.f64)])
def test_float_literal_takes_the_other_operands_type(dtype, expected):
    x = np.arange(4, dtype=dtype)
    out = np.zeros(4, np.float64)
    assert result_types(scale_literal, x, out, op_name="arith.mul") == [expected]


def test_python_float_argument_is_weak_and_exact():
    x = np.arange(8, dtype=np.float64)
    out = np.zeros(8, np.float64)
    scale_arg.on("interp")[1, 8](0.1, x, out)
    np.testing.assert_array_equal(out, 0.1 * x)  # no detour through f32
    x32 = x.astype(np.float32)
    assert result_types(scale_arg, 0.1, x32, out, op_name="arith.mul") == [T.f32]


def test_numpy_scalar_argument_is_strong():
    x = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float64)
    assert result_types(scale_arg, np.float64(2.0), x, out, op_name="arith.mul") == [T.f64]


@zm.kernel
def literal_alone(out):
    out[0] = 1.5 * 2.0 + 1
    x = 3
    out[1] = x / 2


def test_literal_arithmetic_is_folded_at_compile_time():
    out = np.zeros(2, np.float32)
    literal_alone.on("interp")[1, 1](out)
    assert out.tolist() == [4.0, 1.5]


@zm.kernel
def mixed_ints(a, b, out):
    i = zm.grid(1)
    if i < a.shape[0]:
        out[i] = a[i] + b[i]


@pytest.mark.parametrize("ta,tb,expected", [
    (np.int32, np.int64, T.i64), (np.int8, np.int16, T.i16), (np.uint32, np.int32, T.i64),
    (np.uint8, np.int32, T.i32), (np.float32, np.int64, T.f32), (np.float32, np.float64, T.f64),
])
def test_strong_promotion(ta, tb, expected):
    a, b = np.ones(2, ta), np.ones(2, tb)
    out = np.zeros(2, np.float64)
    assert result_types(mixed_ints, a, b, out, op_name="arith.add") == [expected]


@zm.kernel
def thread_index_types(out):
    out[0] = zm.threadIdx.x
    out[1] = zm.grid(1)


def test_thread_indices_are_i32():
    types = result_types(thread_index_types, np.zeros(2, np.int64), op_name="thread.tid")
    assert set(types) == {T.i32}


@zm.kernel
def accumulate(x, out):
    s = 0
    for k in range(x.shape[0]):
        s += x[k]
    out[0] = s


def test_loop_carried_literal_widens_to_the_bodys_type():
    x = np.full(10, 0.5, np.float32)
    out = np.zeros(1, np.float32)
    accumulate.on("interp")[1, 1](x, out)
    assert out[0] == 5.0
    module = accumulate.specialize(x, out).module
    loops = [op for op in module.walk() if op.name == "control.for"]
    assert [r.type for r in loops[0].results] == [T.f32]


@zm.kernel
def int_division(a, b, out, rem):
    i = zm.grid(1)
    if i < a.shape[0]:
        out[i] = a[i] // b[i]
        rem[i] = a[i] % b[i]


def test_floor_division_and_modulo_follow_python():
    a = np.array([7, -7, 7, -7, 5], np.int32)
    b = np.array([2, 2, -2, -2, 0], np.int32)
    out, rem = np.zeros(5, np.int32), np.zeros(5, np.int32)
    for backend in ("interp", "cpu"):
        int_division.on(backend)[1, 5](a, b, out, rem)
        assert out.tolist() == [3, -4, -4, 3, 0]
        assert rem.tolist() == [1, 1, -1, -1, 0]


@zm.kernel
def cast_kernel(x, out_i, out_f):
    i = zm.grid(1)
    if i < x.shape[0]:
        out_i[i] = int(x[i])
        out_f[i] = float(zm.i32(x[i]))


def test_casts():
    x = np.array([1.7, -1.7, 2.5, np.nan, 3e9], np.float32)
    out_i, out_f = np.zeros(5, np.int32), np.zeros(5, np.float32)
    assert result_types(cast_kernel, x, out_i, out_f, op_name="arith.cast")[:2] == [T.i32, T.i32]
    for backend in ("interp", "cpu"):
        cast_kernel.on(backend)[1, 5](x, out_i, out_f)
        assert out_i.tolist() == [1, -1, 2, 0, 2**31 - 1]
