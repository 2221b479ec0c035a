"""Elementwise kernels: launch geometry, weak literals, integer semantics, bit ops and casts."""
from __future__ import annotations

import math

import numpy as np

import zymo as zm

from .case import Case, cdiv, f32, f64, ints, wide

N = 1000
BLOCK = 128


# ---- saxpy -------------------------------------------------------------------------------
@zm.kernel
def saxpy(a, x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]


def _saxpy_args(rng):
    return [2.5, f32(rng, N), f32(rng, N)]


def _saxpy_ref(args):
    a, x, y = args
    return {2: a * wide(x) + wide(y)}


# ---- grid-stride loop, float64 -------------------------------------------------------------
@zm.kernel
def vadd_grid_stride(x, y, out):
    start = zm.grid(1)
    stride = zm.gridsize(1)
    for i in range(start, x.shape[0], stride):
        out[i] = x[i] + y[i]


def _vadd_args(rng):
    n = 5003  # many more items than the 4 x 64 threads
    return [f64(rng, n), f64(rng, n), np.zeros(n)]


def _vadd_ref(args):
    x, y, _ = args
    return {2: x + y}


# ---- thread geometry -----------------------------------------------------------------------
@zm.kernel
def thread_ids(out):
    i = zm.grid(1)
    if i < out.shape[1]:
        out[0, i] = zm.threadIdx.x
        out[1, i] = zm.blockIdx.x
        out[2, i] = zm.blockDim.x
        out[3, i] = zm.gridDim.x
        out[4, i] = zm.blockIdx.x * zm.blockDim.x + zm.threadIdx.x
        out[5, i] = zm.gridsize(1)


def _ids_args(rng):
    return [np.full((6, 300), -1, dtype=np.int32)]


def _ids_ref(args):
    (out,) = args
    n = out.shape[1]
    i = np.arange(n)
    block, grid = 96, 4
    expected = np.stack([i % block, i // block, np.full(n, block), np.full(n, grid), i,
                         np.full(n, block * grid)]).astype(np.int32)
    return {0: expected}


# ---- if / elif / else, chained comparisons ---------------------------------------------------
@zm.kernel
def piecewise(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        if v < -1.0:
            r = -1.0
        elif -1.0 <= v < 0.0:
            r = v * v * v
        elif 0.0 <= v <= 1.0:
            r = v * v
        else:
            r = 2.0 * v - 1.0
        out[i] = r


def _piecewise_args(rng):
    x = f32(rng, N, low=-3.0, high=3.0)
    x[:6] = [-1.0, 0.0, 1.0, -3.0, 2.5, 0.5]
    return [x, np.zeros(N, np.float32)]


def _piecewise_ref(args):
    x = wide(args[0])
    r = np.select([x < -1.0, x < 0.0, x <= 1.0], [-np.ones_like(x), x ** 3, x ** 2], 2 * x - 1)
    return {1: r}


# ---- conditional expressions, scalar arguments ----------------------------------------------
@zm.kernel
def clamp_sign(x, lo, hi, clamped, sign):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        clamped[i] = lo if v < lo else (hi if v > hi else v)  # noqa: FURB136
        sign[i] = 1 if v > 0.0 else (-1 if v < 0.0 else 0)


def _clamp_args(rng):
    x = f32(rng, N, low=-2.0, high=2.0)
    x[:3] = 0.0
    return [x, -0.5, 0.75, np.zeros(N, np.float32), np.zeros(N, np.int32)]


def _clamp_ref(args):
    x, lo, hi = args[0], args[1], args[2]
    return {3: np.clip(wide(x), lo, hi), 4: np.sign(x).astype(np.int32)}


# ---- weak literals keep the array's type ----------------------------------------------------
@zm.kernel
def weak_literals(x, k, s, out_f, out_i, out_mix):
    i = zm.grid(1)
    if i < x.shape[0]:
        out_f[i] = x[i] * 2.0 + 1
        out_i[i] = k[i] * 3 - 7
        out_mix[i] = s * x[i] - float(i) * 0.5


def _weak_args(rng):
    return [f32(rng, N, low=-100.0, high=100.0), ints(rng, np.int64, N, low=-2**62, high=2**62),
            1.5, np.zeros(N, np.float32), np.zeros(N, np.int64), np.zeros(N, np.float32)]


def _weak_ref(args):
    x, k, s = args[0], args[1], args[2]
    with np.errstate(over="ignore"):
        out_i = k * np.int64(3) - np.int64(7)  # wraps at 64 bits
    i = np.arange(x.shape[0], dtype=np.float64)
    return {3: wide(x) * 2 + 1, 4: out_i, 5: s * wide(x) - i * 0.5}


# ---- integer // and % with negative operands (Python floor semantics) ---------------------
@zm.kernel
def int_divmod(a, b, q, r, q7, r5):
    i = zm.grid(1)
    if i < a.shape[0]:
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]
        q7[i] = a[i] // -7
        r5[i] = a[i] % 5


def _divmod_args(dtype, zeros):
    def make(rng):
        a = ints(rng, dtype, N, low=-10_000, high=10_000)
        b = ints(rng, dtype, N, low=-50, high=50)
        if not zeros:
            b[b == 0] = 3
        else:
            b[::7] = 0
        a[:8] = [7, -7, 7, -7, 0, -1, 1, -14]
        b[:8] = [2, 2, -2, -2, 5, 3, -3, 7]
        return [a, b, np.zeros(N, dtype), np.zeros(N, dtype), np.zeros(N, dtype),
                np.zeros(N, dtype)]
    return make


def _divmod_ref(args):
    a, b = args[0], args[1]
    with np.errstate(divide="ignore"):
        q = np.floor_divide(a, b)  # NumPy also gives 0 for a zero divisor
        r = np.remainder(a, b)
    q[b == 0] = 0
    r[b == 0] = 0
    return {2: q, 3: r, 4: a // a.dtype.type(-7), 5: a % a.dtype.type(5)}


# ---- true division of integers gives a float ------------------------------------------------
@zm.kernel
def int_truediv(a, b, out):
    i = zm.grid(1)
    if i < a.shape[0]:
        out[i] = a[i] / b[i]


def _truediv_args(rng):
    a = ints(rng, np.int32, N, low=-1000, high=1000)
    b = ints(rng, np.int32, N, low=1, high=50) * np.where(rng.random(N) < 0.5, -1, 1)
    return [a, b.astype(np.int32), np.zeros(N, np.float32)]


def _truediv_ref(args):
    a, b = args[0], args[1]
    return {2: wide(a) / wide(b)}


# ---- integer min / max / abs ----------------------------------------------------------------
@zm.kernel
def int_minmax_abs(a, b, c, lo, hi, mag):
    i = zm.grid(1)
    if i < a.shape[0]:
        lo[i] = min(a[i], b[i], c[i])
        hi[i] = max(a[i], b[i], c[i])
        mag[i] = abs(a[i] - b[i])


def _minmax_args(rng):
    return [ints(rng, np.int32, N, low=-10**6, high=10**6) for _ in range(3)] + \
        [np.zeros(N, np.int32) for _ in range(3)]


def _minmax_ref(args):
    a, b, c = args[:3]
    return {3: np.minimum(np.minimum(a, b), c), 4: np.maximum(np.maximum(a, b), c),
            5: np.abs(a - b)}


# ---- bit operations, unsigned and signed ----------------------------------------------------
@zm.kernel
def bitops_u32(a, b, out):
    i = zm.grid(1)
    if i < a.shape[0]:
        x = a[i]
        y = b[i]
        s = y & 31
        out[0, i] = x & y
        out[1, i] = x | y
        out[2, i] = x ^ y
        out[3, i] = ~x
        out[4, i] = x << s
        out[5, i] = x >> s
        out[6, i] = (x << 7) | (x >> 25)
        out[7, i] = (x >> 3) & 0xFF


def _bitops_u32_args(rng):
    return [ints(rng, np.uint32, N), ints(rng, np.uint32, N), np.zeros((8, N), np.uint32)]


def _bitops_u32_ref(args):
    x, y = args[0], args[1]
    s = y & np.uint32(31)
    out = [x & y, x | y, x ^ y, ~x, x << s, x >> s, (x << np.uint32(7)) | (x >> np.uint32(25)),
           (x >> np.uint32(3)) & np.uint32(0xFF)]
    return {2: np.stack(out).astype(np.uint32)}


@zm.kernel
def bitops_i32(a, out):
    i = zm.grid(1)
    if i < a.shape[0]:
        x = a[i]
        out[0, i] = ~x
        out[1, i] = x >> 3
        out[2, i] = x << 4
        out[3, i] = (x >> 5) & 1
        out[4, i] = -x
        out[5, i] = x ^ -1
        out[6, i] = x & -x


def _bitops_i32_args(rng):
    a = ints(rng, np.int32, N)
    a[:4] = [-1, -2**31, 2**31 - 1, 0]
    return [a, np.zeros((7, N), np.int32)]


def _bitops_i32_ref(args):
    x = args[0]
    with np.errstate(over="ignore"):
        out = [~x, x >> 3, x << 4, (x >> 5) & 1, -x, x ^ -1, x & -x]
    return {1: np.stack(out).astype(np.int32)}


# ---- casts between float and integer types --------------------------------------------------
@zm.kernel
def casts_float_int(f, g, a, to_i32, to_i64, to_f32, to_f64, g_to_f32, floor_i):
    i = zm.grid(1)
    if i < f.shape[0]:
        to_i32[i] = int(f[i])
        to_i64[i] = int(g[i])
        to_f32[i] = float(a[i])
        to_f64[i] = zm.f64(f[i])
        g_to_f32[i] = zm.f32(g[i])
        floor_i[i] = zm.i32(math.floor(f[i]))


def _casts_fi_args(rng):
    f = f32(rng, N, low=-1e4, high=1e4)
    f[:6] = [-2.5, -0.5, 0.5, 2.999, -7.0, 1e-3]
    g = f64(rng, N, low=-1e12, high=1e12)
    a = ints(rng, np.int32, N, low=-2**24, high=2**24)
    return [f, g, a, np.zeros(N, np.int32), np.zeros(N, np.int64), np.zeros(N, np.float32),
            np.zeros(N, np.float64), np.zeros(N, np.float32), np.zeros(N, np.int32)]


def _casts_fi_ref(args):
    f, g, a = args[:3]
    return {3: np.trunc(f).astype(np.int32), 4: np.trunc(g).astype(np.int64),
            5: a.astype(np.float32), 6: wide(f), 7: g.astype(np.float32),
            8: np.floor(f).astype(np.int32)}


@zm.kernel
def casts_int_int(a, w, to_u8, to_i16, to_i8, to_u32, to_i64, w_to_i32, w_to_u64):
    i = zm.grid(1)
    if i < a.shape[0]:
        to_u8[i] = zm.u8(a[i])
        to_i16[i] = zm.i16(a[i])
        to_i8[i] = zm.i8(a[i])
        to_u32[i] = zm.u32(a[i])
        to_i64[i] = zm.i64(a[i])
        w_to_i32[i] = zm.i32(w[i])
        w_to_u64[i] = zm.u64(w[i])


def _casts_ii_args(rng):
    a = ints(rng, np.int32, N)
    a[:5] = [-1, 255, 256, -129, 2**31 - 1]
    w = ints(rng, np.int64, N)
    return [a, w, np.zeros(N, np.uint8), np.zeros(N, np.int16), np.zeros(N, np.int8),
            np.zeros(N, np.uint32), np.zeros(N, np.int64), np.zeros(N, np.int32),
            np.zeros(N, np.uint64)]


def _casts_ii_ref(args):
    a, w = args[0], args[1]
    return {2: a.astype(np.uint8), 3: a.astype(np.int16), 4: a.astype(np.int8),
            5: a.astype(np.uint32), 6: a.astype(np.int64), 7: w.astype(np.int32),
            8: w.astype(np.uint64)}


# ---- small integer arrays: u8, i16, i8 -----------------------------------------------------
@zm.kernel
def u8_brighten(img, out):
    i = zm.grid(1)
    if i < img.shape[0]:
        v = zm.i32(img[i]) * 3 // 2 + 10
        out[i] = zm.u8(min(v, 255))


def _u8_args(rng):
    return [ints(rng, np.uint8, N), np.zeros(N, np.uint8)]


def _u8_ref(args):
    img = args[0].astype(np.int32)
    return {1: np.minimum(img * 3 // 2 + 10, 255).astype(np.uint8)}


@zm.kernel
def small_int_ops(a16, b16, a8, b8, wrap16, sat16, mul8, neg8, shr8, sum_u8):
    i = zm.grid(1)
    if i < a16.shape[0]:
        wrap16[i] = a16[i] + b16[i]
        s = zm.i32(a16[i]) + zm.i32(b16[i])
        sat16[i] = zm.i16(max(-32768, min(32767, s)))
        mul8[i] = a8[i] * b8[i]
        neg8[i] = -a8[i]
        shr8[i] = a8[i] >> 2
        sum_u8[i] = zm.u8(a8[i]) + zm.u8(b8[i])


def _small_args(rng):
    a8 = ints(rng, np.int8, N)
    a8[0] = -128
    return [ints(rng, np.int16, N), ints(rng, np.int16, N), a8, ints(rng, np.int8, N),
            np.zeros(N, np.int16), np.zeros(N, np.int16), np.zeros(N, np.int8),
            np.zeros(N, np.int8), np.zeros(N, np.int8), np.zeros(N, np.uint8)]


def _small_ref(args):
    a16, b16, a8, b8 = args[:4]
    with np.errstate(over="ignore"):
        s = a16.astype(np.int32) + b16
        return {4: a16 + b16, 5: np.clip(s, -32768, 32767).astype(np.int16), 6: a8 * b8,
                7: -a8, 8: a8 >> 2, 9: a8.astype(np.uint8) + b8.astype(np.uint8)}


# ---- booleans: and / or / not, bool arrays ----------------------------------------------------
@zm.kernel
def bool_logic(x, y, both, either, neither, xor_out):
    i = zm.grid(1)
    if i < x.shape[0]:
        p = x[i] > 0.0
        q = y[i] > 0.0
        both[i] = p and q
        either[i] = p or q
        neither[i] = not (p or q)
        xor_out[i] = 1 if p != q else 0


def _bool_args(rng):
    return [f32(rng, N), f32(rng, N), np.zeros(N, bool), np.zeros(N, bool), np.zeros(N, bool),
            np.zeros(N, np.int32)]


def _bool_ref(args):
    p, q = args[0] > 0, args[1] > 0
    return {2: p & q, 3: p | q, 4: ~(p | q), 5: (p != q).astype(np.int32)}


CASES = [
    Case("saxpy", saxpy, cdiv(N, BLOCK), BLOCK, _saxpy_args, _saxpy_ref,
         features=("scalar_arg", "weak_literal"), differentiable=True),
    Case("vadd_grid_stride_f64", vadd_grid_stride, 4, 64, _vadd_args, _vadd_ref,
         rtol=1e-12, atol=1e-14, features=("gridsize", "range_step", "f64"), differentiable=True),
    Case("thread_ids", thread_ids, 4, 96, _ids_args, _ids_ref, features=("thread_ids", "gridsize")),
    Case("piecewise", piecewise, cdiv(N, BLOCK), BLOCK, _piecewise_args, _piecewise_ref,
         features=("elif", "chained_compare")),
    Case("clamp_sign", clamp_sign, cdiv(N, BLOCK), BLOCK, _clamp_args, _clamp_ref,
         features=("ifexp", "scalar_arg")),
    Case("weak_literals", weak_literals, cdiv(N, BLOCK), BLOCK, _weak_args, _weak_ref, atol=1e-4,
         features=("weak_literal", "i64", "wraparound", "cast")),
    Case("int_divmod_i32", int_divmod, cdiv(N, BLOCK), BLOCK, _divmod_args(np.int32, False),
         _divmod_ref, features=("floordiv", "mod", "negative")),
    Case("int_divmod_i64", int_divmod, cdiv(N, BLOCK), BLOCK, _divmod_args(np.int64, False),
         _divmod_ref, features=("floordiv", "mod", "negative", "i64")),
    Case("int_divmod_zero_divisor", int_divmod, cdiv(N, BLOCK), BLOCK,
         _divmod_args(np.int32, True), _divmod_ref, features=("floordiv", "mod", "div_by_zero")),
    Case("int_truediv", int_truediv, cdiv(N, BLOCK), BLOCK, _truediv_args, _truediv_ref,
         features=("truediv",)),
    Case("int_minmax_abs", int_minmax_abs, cdiv(N, BLOCK), BLOCK, _minmax_args, _minmax_ref,
         features=("min_max", "abs")),
    Case("bitops_u32", bitops_u32, cdiv(N, BLOCK), BLOCK, _bitops_u32_args, _bitops_u32_ref,
         features=("bitops", "shift", "u32")),
    Case("bitops_i32", bitops_i32, cdiv(N, BLOCK), BLOCK, _bitops_i32_args, _bitops_i32_ref,
         features=("bitops", "shift", "wraparound")),
    Case("casts_float_int", casts_float_int, cdiv(N, BLOCK), BLOCK, _casts_fi_args,
         _casts_fi_ref, features=("cast", "f64", "i64")),
    Case("casts_int_int", casts_int_int, cdiv(N, BLOCK), BLOCK, _casts_ii_args, _casts_ii_ref,
         features=("cast", "u8", "i8", "i16", "u64")),
    Case("u8_brighten", u8_brighten, cdiv(N, BLOCK), BLOCK, _u8_args, _u8_ref,
         features=("u8", "cast", "min_max")),
    Case("small_int_ops", small_int_ops, cdiv(N, BLOCK), BLOCK, _small_args, _small_ref,
         features=("i16", "i8", "u8", "wraparound")),
    Case("bool_logic", bool_logic, cdiv(N, BLOCK), BLOCK, _bool_args, _bool_ref,
         features=("bool", "and_or_not")),
]
