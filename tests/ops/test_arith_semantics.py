"""Property tests of scalar arithmetic semantics: interpreter, CPU backend and NumPy must agree.

Integers wrap at their width; signed // and % floor like Python; a zero divisor gives 0; shifts
take counts in [0, bits); casts truncate (int -> int), round toward zero (float -> int, in range)
or round to nearest (int -> float); one f32 operation is correctly rounded everywhere.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import zymo as zm

BACKENDS = ("interp", "cpu")
BLOCK = 32
SETTINGS = settings(max_examples=30, deadline=None)
INT_TYPES = (np.int32, np.int64, np.uint32, np.uint8)
ALL_INT_TYPES = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64)


# ---- kernels -----------------------------------------------------------------------------------
@zm.kernel
def k_add(a, b, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


@zm.kernel
def k_sub(a, b, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] - b[i]


@zm.kernel
def k_mul(a, b, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] * b[i]


@zm.kernel
def k_truediv(a, b, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] / b[i]


@zm.kernel
def k_floordiv(a, b, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] // b[i]


@zm.kernel
def k_mod(a, b, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] % b[i]


@zm.kernel
def k_shl(a, b, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] << b[i]


@zm.kernel
def k_shr(a, b, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] >> b[i]


@zm.kernel
def k_bits(a, b, out):
    i = zm.grid(1)
    if i < out.shape[1]:
        out[0, i] = a[i] & b[i]
        out[1, i] = a[i] | b[i]
        out[2, i] = a[i] ^ b[i]
        out[3, i] = ~a[i]


@zm.kernel
def k_less(a, b, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] < b[i]


@zm.kernel
def k_weak(a, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] * 3 + 1


@zm.kernel
def k_to_i8(a, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = zm.i8(a[i])


@zm.kernel
def k_to_i16(a, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = zm.i16(a[i])


@zm.kernel
def k_to_i32(a, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = zm.i32(a[i])


@zm.kernel
def k_to_i64(a, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = zm.i64(a[i])


@zm.kernel
def k_to_u8(a, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = zm.u8(a[i])


@zm.kernel
def k_to_u32(a, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = zm.u32(a[i])


@zm.kernel
def k_to_u64(a, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = zm.u64(a[i])


@zm.kernel
def k_to_f32(a, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = zm.f32(a[i])


@zm.kernel
def k_to_f64(a, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = zm.f64(a[i])


@zm.kernel
def k_int(a, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = int(a[i])


@zm.kernel
def k_float(a, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = float(a[i])


CASTS = {np.int8: k_to_i8, np.int16: k_to_i16, np.int32: k_to_i32, np.int64: k_to_i64,
         np.uint8: k_to_u8, np.uint32: k_to_u32, np.uint64: k_to_u64, np.float32: k_to_f32,
         np.float64: k_to_f64}


# ---- helpers -------------------------------------------------------------------------------------
def run(kernel, inputs: list[np.ndarray], out: np.ndarray) -> dict[str, np.ndarray]:
    """The output array of one launch per backend (each on fresh copies of the inputs)."""
    n = out.shape[-1]
    results = {}
    for backend in BACKENDS:
        args = [a.copy() for a in inputs] + [out.copy()]
        kernel.on(backend)[-(-n // BLOCK), BLOCK](*args)
        for a, b in zip(args, inputs):
            np.testing.assert_array_equal(a, b, err_msg=f"{backend} changed an input")
        results[backend] = args[-1]
    return results


def check(results: dict[str, np.ndarray], expected: np.ndarray, inputs=()) -> None:
    for backend, got in results.items():
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected,
                                      err_msg=f"{backend}; inputs {[a.tolist() for a in inputs]}")


@st.composite
def int_pair(draw, dtype, b_elements=None):
    n = draw(st.integers(1, 70))
    a = draw(hnp.arrays(dtype, n))
    b = draw(hnp.arrays(dtype, n, elements=b_elements))
    return a, b


def _numpy(fn, *arrays):
    with np.errstate(all="ignore"):
        return fn(*arrays)


def _floor_div_inputs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop MIN // -1 (an overflow whose result the spec leaves open)."""
    if np.dtype(a.dtype).kind == "i":
        b = b.copy()
        b[(a == np.iinfo(a.dtype).min) & (b == -1)] = 1
    return a, b


# ---- integer arithmetic wraps at the type's width ----------------------------------------------
@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("kernel, fn", [(k_add, np.add), (k_sub, np.subtract),
                                        (k_mul, np.multiply)], ids=["add", "sub", "mul"])
@SETTINGS
@given(data=st.data())
def test_int_wraparound(dtype, kernel, fn, data):
    a, b = data.draw(int_pair(dtype))
    check(run(kernel, [a, b], np.zeros_like(a)), _numpy(fn, a, b), [a, b])


# ---- // and % floor like Python; a zero divisor gives 0 -----------------------------------------
@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("kernel, fn", [(k_floordiv, np.floor_divide), (k_mod, np.remainder)],
                         ids=["floordiv", "mod"])
@SETTINGS
@given(data=st.data())
def test_int_floor_division(dtype, kernel, fn, data):
    a, b = _floor_div_inputs(*data.draw(int_pair(dtype)))
    b[::5] = 0  # some zero divisors in every example
    expected = _numpy(fn, a, b)
    expected[b == 0] = 0
    check(run(kernel, [a, b], np.zeros_like(a)), expected, [a, b])


@pytest.mark.parametrize("dtype", (np.int32, np.int64), ids=lambda t: np.dtype(t).name)
@SETTINGS
@given(data=st.data())
def test_int_truediv_gives_float(dtype, data):
    a, b = data.draw(int_pair(dtype, b_elements=st.integers(1, 1000)))
    out_type = np.float32 if dtype == np.int32 else np.float64
    out = np.zeros(a.shape, out_type)
    expected = (a.astype(out_type) / b.astype(out_type)).astype(out_type)
    check(run(k_truediv, [a, b], out), expected, [a, b])


# ---- shifts (counts in [0, bits)) and bit operations ------------------------------------------
@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("kernel, fn", [(k_shl, np.left_shift), (k_shr, np.right_shift)],
                         ids=["shl", "shr"])
@SETTINGS
@given(data=st.data())
def test_shifts(dtype, kernel, fn, data):
    bits = np.dtype(dtype).itemsize * 8
    a, b = data.draw(int_pair(dtype, b_elements=st.integers(0, bits - 1)))
    check(run(kernel, [a, b], np.zeros_like(a)), _numpy(fn, a, b), [a, b])


@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda t: np.dtype(t).name)
@SETTINGS
@given(data=st.data())
def test_bit_ops_and_compare(dtype, data):
    a, b = data.draw(int_pair(dtype))
    expected = np.stack([a & b, a | b, a ^ b, ~a])
    check(run(k_bits, [a, b], np.zeros((4, a.size), dtype)), expected, [a, b])
    check(run(k_less, [a, b], np.zeros(a.size, bool)), a < b, [a, b])


@pytest.mark.parametrize("dtype", (np.int8, np.uint8, np.int32, np.uint32, np.int64),
                         ids=lambda t: np.dtype(t).name)
@SETTINGS
@given(data=st.data())
def test_weak_literals_keep_the_type(dtype, data):
    a = data.draw(hnp.arrays(dtype, st.integers(1, 70)))
    expected = _numpy(lambda x: x * dtype(3) + dtype(1), a)
    check(run(k_weak, [a], np.zeros_like(a)), expected, [a])


# ---- casts ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("src", ALL_INT_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("dst", ALL_INT_TYPES, ids=lambda t: np.dtype(t).name)
@SETTINGS
@given(data=st.data())
def test_int_to_int_casts(src, dst, data):
    a = data.draw(hnp.arrays(src, st.integers(1, 70)))
    check(run(CASTS[dst], [a], np.zeros(a.size, dst)), a.astype(dst), [a])


FLOAT_TO_INT = [  # (float type, int type, a range the int type holds)
    (np.float32, np.int32, 2147483520.0), (np.float32, np.int64, float(np.float32(9.2e18))),
    (np.float32, np.int16, 32767.0), (np.float32, np.uint8, 255.0),
    (np.float64, np.int32, 2147483647.0), (np.float64, np.int64, 9.2e18),
    (np.float64, np.uint32, 4294967295.0),
]


@pytest.mark.parametrize("src, dst, limit", FLOAT_TO_INT,
                         ids=[f"{np.dtype(s).name}-{np.dtype(d).name}" for s, d, _ in FLOAT_TO_INT])
@SETTINGS
@given(data=st.data())
def test_float_to_int_truncates(src, dst, limit, data):
    low = 0.0 if np.dtype(dst).kind == "u" else -limit
    width = 32 if src == np.float32 else 64
    elements = st.floats(low, limit, width=width)
    a = data.draw(hnp.arrays(src, st.integers(1, 70), elements=elements))
    check(run(CASTS[dst], [a], np.zeros(a.size, dst)), np.trunc(a).astype(dst), [a])


@pytest.mark.parametrize("src", (np.float32, np.float64), ids=lambda t: np.dtype(t).name)
@SETTINGS
@given(data=st.data())
def test_int_builtin_of_float(src, data):
    dst = np.int32 if src == np.float32 else np.int64
    width = 32 if src == np.float32 else 64
    elements = st.floats(-2.0e9, 2.0e9, width=width)
    a = data.draw(hnp.arrays(src, st.integers(1, 70), elements=elements))
    check(run(k_int, [a], np.zeros(a.size, dst)), np.trunc(a).astype(dst), [a])


@pytest.mark.parametrize("src", ALL_INT_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("dst", (np.float32, np.float64), ids=lambda t: np.dtype(t).name)
@SETTINGS
@given(data=st.data())
def test_int_to_float_rounds_to_nearest(src, dst, data):
    a = data.draw(hnp.arrays(src, st.integers(1, 70)))
    check(run(CASTS[dst], [a], np.zeros(a.size, dst)), a.astype(dst), [a])


@SETTINGS
@given(a=hnp.arrays(np.int32, st.integers(1, 70)))
def test_float_builtin_of_i32_is_f32(a):
    check(run(k_float, [a], np.zeros(a.size, np.float32)), a.astype(np.float32), [a])


# ---- float32 arithmetic is IEEE single precision ------------------------------------------------
F32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@pytest.mark.parametrize("kernel, fn", [(k_add, np.add), (k_sub, np.subtract),
                                        (k_mul, np.multiply), (k_truediv, np.divide)],
                         ids=["add", "sub", "mul", "div"])
@SETTINGS
@given(data=st.data())
def test_f32_arithmetic(kernel, fn, data):
    n = data.draw(st.integers(1, 70))
    a = data.draw(hnp.arrays(np.float32, n, elements=F32))
    b = data.draw(hnp.arrays(np.float32, n, elements=F32))
    check(run(kernel, [a, b], np.zeros(n, np.float32)), _numpy(fn, a, b), [a, b])


@SETTINGS
@given(data=st.data())
def test_f32_compare(data):
    n = data.draw(st.integers(1, 70))
    elements = st.floats(width=32, allow_nan=True, allow_infinity=True)
    a = data.draw(hnp.arrays(np.float32, n, elements=elements))
    b = data.draw(hnp.arrays(np.float32, n, elements=elements))
    check(run(k_less, [a, b], np.zeros(n, bool)), a < b, [a, b])
