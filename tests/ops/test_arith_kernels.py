"""Arithmetic ops in kernels, each checked on the CPU backend and on the interpreter against
NumPy: integer floor division and modulo of negatives, bit manipulation, uint64 wrap-around,
unsigned and small-int casts and comparisons, the float32 and float64 math library, weak Python
ints that do not fit the strong type they meet, int16 saturation."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import zymo as zm

from reference_check import BACKENDS, cdiv, check, run

RNG = np.random.default_rng(1234)


# ---- integer floor division / modulo of negatives ---------------------------------------------
@zm.kernel
def int_divmod(a, b, q, r):
    i = zm.grid(1)
    if i < a.shape[0]:
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int16, np.int8])
def test_int_divmod(dtype):
    n = 200
    a = RNG.integers(-100, 100, n).astype(dtype)
    b = RNG.integers(-9, 10, n).astype(dtype)
    b[b == 0] = 3
    check(int_divmod, cdiv(n, 64), 64, [a, b, np.zeros(n, dtype), np.zeros(n, dtype)],
          {2: a // b, 3: a % b})


@zm.kernel
def int_div_const(a, q, r, q2, r2):
    i = zm.grid(1)
    if i < a.shape[0]:
        q[i] = a[i] // 7
        r[i] = a[i] % 7
        q2[i] = a[i] // -4
        r2[i] = a[i] % -4


def test_int_div_const():
    n = 129
    a = np.arange(-64, 65, dtype=np.int32)
    z = lambda: np.zeros(n, np.int32)  # noqa: E731
    check(int_div_const, 3, 64, [a, z(), z(), z(), z()],
          {1: a // 7, 2: a % 7, 3: a // -4, 4: a % -4})


@zm.kernel
def float_floordiv_mod(a, b, q, r):
    i = zm.grid(1)
    if i < a.shape[0]:
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]


def test_float_floordiv_mod():
    n = 100
    a = RNG.uniform(-10, 10, n)
    b = RNG.uniform(-3, 3, n)
    b[np.abs(b) < 0.1] = 0.5
    check(float_floordiv_mod, 2, 64, [a, b, np.zeros(n), np.zeros(n)],
          {2: a // b, 3: a % b}, rtol=1e-12, atol=1e-12)


# ---- bit manipulation: popcount, bit reverse, xorshift hash -----------------------------------
@zm.kernel
def bit_tricks(x, pop, rev, hsh):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        c = 0
        w = v
        while w != 0:
            w &= w - 1
            c += 1
        pop[i] = c
        r = zm.u32(0)
        for b in range(32):
            r = (r << 1) | ((v >> b) & 1)
        rev[i] = r
        h = v
        h ^= h << 13
        h ^= h >> 17
        h ^= h << 5
        hsh[i] = h * zm.u32(2654435761)


def _bitrev32(v):
    return int(f"{int(v):032b}"[::-1], 2)


def test_bit_tricks():
    n = 100
    x = RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x[0] = 0
    x[1] = 0xFFFFFFFF
    pop = np.array([bin(int(v)).count("1") for v in x], np.uint32)
    rev = np.array([_bitrev32(v) for v in x], np.uint32)
    h = []
    for v in x:
        v = int(v)
        v ^= (v << 13) & 0xFFFFFFFF
        v ^= v >> 17
        v ^= (v << 5) & 0xFFFFFFFF
        h.append((v * 2654435761) & 0xFFFFFFFF)
    h = np.array(h, np.uint32)
    z = lambda: np.zeros(n, np.uint32)  # noqa: E731
    check(bit_tricks, 2, 64, [x, z(), z(), z()], {1: pop, 2: rev, 3: h})


# ---- PCG / LCG random hashing with uint64 wrap-around -----------------------------------------
@zm.kernel
def lcg_uniform(seed, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        s = zm.u64(seed) + zm.u64(i) * zm.u64(0x9E3779B97F4A7C15)
        for _ in range(3):
            s = s * zm.u64(6364136223846793005) + zm.u64(1442695040888963407)
        out[i] = zm.f64(s >> 11) * (1.0 / 9007199254740992.0)


def test_lcg_uniform():
    n = 70
    M = (1 << 64) - 1
    want = []
    for i in range(n):
        s = (12345 + i * 0x9E3779B97F4A7C15) & M
        for _ in range(3):
            s = (s * 6364136223846793005 + 1442695040888963407) & M
        want.append((s >> 11) * (1.0 / 9007199254740992.0))
    check(lcg_uniform, 2, 64, [12345, np.zeros(n)], {1: np.array(want)})


# ---- unsigned / small-int casts and comparisons -----------------------------------------------
@zm.kernel
def copy_cast(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = x[i]


def test_unsigned_to_float_casts():
    u64 = np.array([0, 1, 2**63 - 1, 2**63, 2**63 + 2**11, 2**64 - 1, 2**53 + 1], np.uint64)
    u32 = np.array([0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**24 + 1], np.uint32)
    for src in (u64, u32):
        for dt in (np.float32, np.float64):
            check(copy_cast, 1, 8, [src, np.zeros(src.size, dt)], {1: src.astype(dt)})


@zm.kernel
def u8_brightness(img, delta, out):
    y, x = zm.grid(2)
    if y < img.shape[0] and x < img.shape[1]:
        v = zm.i32(img[y, x]) + delta
        out[y, x] = min(max(v, 0), 255)


def test_u8_brightness():
    img = RNG.integers(0, 256, (9, 13)).astype(np.uint8)
    for delta in (60, -60):
        want = np.clip(img.astype(np.int32) + delta, 0, 255).astype(np.uint8)
        check(u8_brightness, (2, 2), (8, 8), [img, delta, np.zeros_like(img)], {2: want})


@zm.kernel
def lit_compare_u8(a, out):
    i = zm.grid(1)
    if i < a.shape[0]:
        out[i] = a[i] < 256


def test_lit_compare_out_of_range():
    a = np.array([0, 100, 255], np.uint8)
    check(lit_compare_u8, 1, 8, [a, np.zeros(3, bool)], {1: a < 256})


@zm.kernel
def mixed_sign_compare(a, b, out):
    i = zm.grid(1)
    if i < a.shape[0]:
        out[i] = a[i] < b[i]


def test_u64_i64_compare():
    a = np.array([2**63, 5, 0], np.uint64)
    b = np.array([-1, 3, 0], np.int64)
    check(mixed_sign_compare, 1, 8, [a, b, np.zeros(3, bool)], {2: a < b})


def test_u32_i32_compare():
    a = np.array([2**31, 5, 0, 2**32 - 1], np.uint32)
    b = np.array([-1, 3, 0, 7], np.int32)
    check(mixed_sign_compare, 1, 8, [a, b, np.zeros(4, bool)], {2: a < b})


# ---- Black-Scholes with erf, exp, log, sqrt in float32 ----------------------------------------
@zm.func
def cnd(d):
    return 0.5 * (1.0 + math.erf(d / math.sqrt(2.0)))


@zm.kernel
def black_scholes(S, X, T, r, v, call, put):
    i = zm.grid(1)
    if i < S.shape[0]:
        sqrtT = math.sqrt(T[i])
        d1 = (math.log(S[i] / X[i]) + (r + 0.5 * v * v) * T[i]) / (v * sqrtT)
        d2 = d1 - v * sqrtT
        expRT = math.exp(-r * T[i])
        call[i] = S[i] * cnd(d1) - X[i] * expRT * cnd(d2)
        put[i] = X[i] * expRT * cnd(-d2) - S[i] * cnd(-d1)


def test_black_scholes():
    from math import erf
    n = 200
    S = RNG.uniform(5, 30, n).astype(np.float32)
    X = RNG.uniform(1, 100, n).astype(np.float32)
    T = RNG.uniform(0.25, 10, n).astype(np.float32)
    r, v = 0.02, 0.30
    ncdf = np.vectorize(lambda d: 0.5 * (1 + erf(d / math.sqrt(2))))
    S64, X64, T64 = (a.astype(np.float64) for a in (S, X, T))
    d1 = (np.log(S64 / X64) + (r + 0.5 * v * v) * T64) / (v * np.sqrt(T64))
    d2 = d1 - v * np.sqrt(T64)
    e = np.exp(-r * T64)
    call = S64 * ncdf(d1) - X64 * e * ncdf(d2)
    put = X64 * e * ncdf(-d2) - S64 * ncdf(-d1)
    z = lambda: np.zeros(n, np.float32)  # noqa: E731
    check(black_scholes, cdiv(n, 128), 128, [S, X, T, r, v, z(), z()], {5: call, 6: put},
          rtol=1e-3, atol=2e-4)


# ---- math library in float64 (special values included) ----------------------------------------
@zm.kernel
def math_zoo(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        out[i, 0] = math.fmod(v, 0.7)
        out[i, 1] = math.copysign(1.5, v)
        out[i, 2] = math.hypot(v, 2.0)
        out[i, 3] = math.cbrt(v)
        out[i, 4] = math.floor(v) + math.ceil(v)
        out[i, 5] = math.atan2(v, -1.0)
        out[i, 6] = math.log1p(abs(v)) + math.expm1(v)
        out[i, 7] = math.tanh(v) + math.asinh(v) + math.sinh(v) + math.cosh(v)
        out[i, 8] = math.pow(abs(v), 1.5) + abs(v) ** 0.5 + v ** 2 + v ** 3
        out[i, 9] = math.isnan(v) + 2 * math.isinf(v)
        out[i, 10] = zm.fma(v, 3.0, 1.0) + np.sqrt(abs(v))
        out[i, 11] = math.fabs(v) + min(v, 0.5, -v) + max(v, 1, 2)


def _math_zoo_ref(x):
    out = np.zeros((len(x), 12))
    with np.errstate(all="ignore"):
        out[:, 0] = np.fmod(x, 0.7)
        out[:, 1] = np.copysign(1.5, x)
        out[:, 2] = np.hypot(x, 2.0)
        out[:, 3] = np.cbrt(x)
        out[:, 4] = np.floor(x) + np.ceil(x)
        out[:, 5] = np.arctan2(x, -1.0)
        out[:, 6] = np.log1p(np.abs(x)) + np.expm1(x)
        out[:, 7] = np.tanh(x) + np.arcsinh(x) + np.sinh(x) + np.cosh(x)
        out[:, 8] = np.abs(x) ** 1.5 + np.abs(x) ** 0.5 + x ** 2 + x ** 3
        out[:, 9] = np.isnan(x) + 2 * np.isinf(x)
        out[:, 10] = x * 3.0 + 1.0 + np.sqrt(np.abs(x))
        out[:, 11] = np.abs(x) + np.minimum(np.minimum(x, 0.5), -x) + np.maximum(x, 2)
    return out


def test_math_zoo():
    x = np.array([-2.5, -0.3, 0.0, 0.4, 1.7, 3.9, np.inf, -np.inf])
    check(math_zoo, 1, 8, [x, np.zeros((8, 12))], {1: _math_zoo_ref(x)}, rtol=1e-13, atol=1e-15)


# ---- weak Python ints that do not fit the strong type they meet -------------------------------
@zm.kernel
def times_big_literal(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * 1099511627776


@zm.kernel
def times_scalar(a, x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * a


def _exact_or_error(kernel, args, want, errors, match=None):
    """Each backend gives exactly `want` or raises one of `errors`; an error must match `match`
    where one is named, and where none is, at least one backend must run."""
    ran = []
    for backend in BACKENDS:
        try:
            got = run(kernel, 1, 8, args, backend)
        except errors as error:
            assert match is None or re.search(match, str(error)), f"{backend}: {error}"
            continue
        np.testing.assert_array_equal(got[-1], want, err_msg=backend)
        ran.append(backend)
    assert ran or match is not None, f"every backend raised {errors} and no error was named"


def test_big_literal_times_i32():
    x = np.arange(3, dtype=np.int32)
    _exact_or_error(times_big_literal, [x, np.zeros(3, np.int64)], x.astype(np.int64) * 2**40,
                    zm.CompileError, match="the integer 1099511627776 does not fit i32")


def test_big_python_int_argument():
    """A Python int beyond int32 is typed int64 (not weak): 2**40 * an i32 is exact."""
    x = np.arange(3, dtype=np.int32)
    _exact_or_error(times_scalar, [2**40, x, np.zeros(3, np.int64)], x.astype(np.int64) * 2**40,
                    (zm.LaunchError, zm.CompileError))


@pytest.mark.parametrize("backend", ("interp", "cpu"))
def test_python_int_beyond_int64_is_a_launch_error(backend):
    x = np.arange(3, dtype=np.int32)
    with pytest.raises(zm.LaunchError, match=r"integer argument \d+ is beyond int64"):
        times_scalar.on(backend)[1, 8](2**70, x, np.zeros(3, np.int64))


def test_scalar_argument_respecialization():
    x = np.arange(6, dtype=np.int32)
    check(times_scalar, 1, 8, [3, x, np.zeros(6)], {2: x * 3.0})
    check(times_scalar, 1, 8, [0.5, x, np.zeros(6)], {2: x * 0.5})
    x32 = x.astype(np.float32)
    check(times_scalar, 1, 8, [np.float64(0.1), x32, np.zeros(6)],
          {2: x32.astype(np.float64) * 0.1})


# ---- int16 audio: gain, mix and saturate; strided stereo channels -----------------------------
@zm.kernel
def mix_saturate(stereo, gain_l, gain_r, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        v = zm.i32(stereo[i, 0]) * gain_l + zm.i32(stereo[i, 1]) * gain_r
        v >>= 8
        if v > 32767:
            v = 32767
        elif v < -32768:
            v = -32768
        out[i] = v


def test_mix_saturate():
    n = 101
    st = RNG.integers(-32768, 32768, (n, 2)).astype(np.int16)
    v = (st[:, 0].astype(np.int32) * 300 + st[:, 1].astype(np.int32) * 200) >> 8
    want = np.clip(v, -32768, 32767).astype(np.int16)
    check(mix_saturate, 2, 64, [st, 300, 200, np.zeros(n, np.int16)], {3: want})
    big = np.zeros((n, 4), np.int16)
    big[:, ::2] = st  # channels two columns apart: a strided 2-D view
    check(mix_saturate, 2, 64, [big[:, ::2], 300, 200, np.zeros(n, np.int16)], {3: want})
