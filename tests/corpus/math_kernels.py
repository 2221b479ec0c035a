"""Math: every math.* function in f32 and f64, zm.math.*, fma, min/max, pow, NaN and inf tests."""
from __future__ import annotations

import math

import numpy as np

import zymo as zm

from .case import Case, cdiv, f32, wide

N = 600
BLOCK = 64
INV_SQRT2 = 0.7071067811865476
TWO_PI = 2.0 * math.pi


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


# ---- unary math.* -------------------------------------------------------------------------
@zm.kernel
def unary_math(x, pos, unit, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        p = pos[i]
        u = unit[i]
        out[0, i] = math.sqrt(p)
        out[1, i] = math.exp(v)
        out[2, i] = math.log(p)
        out[3, i] = math.log1p(p)
        out[4, i] = math.expm1(v)
        out[5, i] = math.sin(v)
        out[6, i] = math.cos(v)
        out[7, i] = math.tan(u)
        out[8, i] = math.asin(u)
        out[9, i] = math.acos(u)
        out[10, i] = math.atan(v)
        out[11, i] = math.sinh(v)
        out[12, i] = math.cosh(v)
        out[13, i] = math.tanh(v)
        out[14, i] = math.fabs(v)
        out[15, i] = math.floor(v)
        out[16, i] = math.ceil(v)
        out[17, i] = math.erf(v)
        out[18, i] = abs(v)


def _unary_args(dtype):
    def make(rng):
        x = rng.uniform(-3.0, 3.0, N).astype(dtype)
        x[:4] = [-2.5, -1.0, 0.0, 2.0]
        return [x, rng.uniform(0.1, 10.0, N).astype(dtype),
                rng.uniform(-0.95, 0.95, N).astype(dtype), np.zeros((19, N), dtype)]
    return make


def _unary_ref(args):
    v, p, u = (wide(a) for a in args[:3])
    out = [np.sqrt(p), np.exp(v), np.log(p), np.log1p(p), np.expm1(v), np.sin(v), np.cos(v),
           np.tan(u), np.arcsin(u), np.arccos(u), np.arctan(v), np.sinh(v), np.cosh(v),
           np.tanh(v), np.abs(v), np.floor(v), np.ceil(v), _erf(v), np.abs(v)]
    return {3: np.stack(out)}


# ---- binary math, pow / **, fma, min / max with several arguments --------------------------
@zm.kernel
def binary_math(a, b, p, out):
    i = zm.grid(1)
    if i < a.shape[0]:
        x = a[i]
        y = b[i]
        q = p[i]
        out[0, i] = math.atan2(x, y)
        out[1, i] = math.pow(q, x)
        out[2, i] = q ** 1.5
        out[3, i] = x ** 2
        out[4, i] = math.fmod(x, y)
        out[5, i] = math.copysign(q, y)
        out[6, i] = math.hypot(x, y)
        out[7, i] = min(x, y, q)
        out[8, i] = max(x, y, 0.5)
        out[9, i] = zm.fma(x, y, q)
        out[10, i] = q ** -0.5
        out[11, i] = x ** 3 - 2.0 * x


def _binary_args(dtype):
    def make(rng):
        a = rng.uniform(-3.0, 3.0, N).astype(dtype)
        b = rng.uniform(-3.0, 3.0, N).astype(dtype)
        b[np.abs(b) < 0.05] = 0.5
        return [a, b, rng.uniform(0.1, 10.0, N).astype(dtype), np.zeros((12, N), dtype)]
    return make


def _binary_ref(args):
    x, y, q = (wide(a) for a in args[:3])
    out = [np.arctan2(x, y), q ** x, q ** 1.5, x ** 2, np.fmod(x, y), np.copysign(q, y),
           np.hypot(x, y), np.minimum(np.minimum(x, y), q), np.maximum(np.maximum(x, y), 0.5),
           x * y + q, q ** -0.5, x ** 3 - 2 * x]
    return {3: np.stack(out)}


# ---- NaN and infinity: isnan / isinf, comparisons with NaN ----------------------------------
@zm.kernel
def nan_inf(x, nan_flag, inf_flag, self_eq, clean):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        nan_flag[i] = math.isnan(v)
        inf_flag[i] = 1 if zm.math.isinf(v) else 0
        self_eq[i] = v == v  # noqa: PLR0124 (false for NaN)
        clean[i] = 0.0 if math.isnan(v) or math.isinf(v) else v


def _nan_args(rng):
    x = f32(rng, 100)
    x[::7] = np.nan
    x[3::11] = np.inf
    x[5::13] = -np.inf
    return [x, np.zeros(100, bool), np.zeros(100, np.int32), np.zeros(100, bool),
            np.zeros(100, np.float32)]


def _nan_ref(args):
    x = args[0]
    return {1: np.isnan(x), 2: np.isinf(x).astype(np.int32), 3: ~np.isnan(x),
            4: np.where(np.isfinite(x), x, 0).astype(np.float32)}


# ---- activations through zm.math.* (smooth) ----------------------------------------------------
@zm.kernel
def activations(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        sig = 1.0 / (1.0 + zm.math.exp(-v))
        out[0, i] = sig
        out[1, i] = zm.math.log1p(zm.math.exp(v))
        out[2, i] = 0.5 * v * (1.0 + zm.math.erf(v * INV_SQRT2))
        out[3, i] = zm.math.tanh(v)
        out[4, i] = v * sig
        out[5, i] = zm.math.sqrt(v * v + 1.0) - 1.0


def _act_args(dtype):
    def make(rng):
        return [rng.uniform(-4.0, 4.0, N).astype(dtype), np.zeros((6, N), dtype)]
    return make


def _act_ref(args):
    v = wide(args[0])
    sig = 1 / (1 + np.exp(-v))
    return {1: np.stack([sig, np.log1p(np.exp(v)), 0.5 * v * (1 + _erf(v / np.sqrt(2))),
                         np.tanh(v), v * sig, np.sqrt(v * v + 1) - 1])}


# ---- Black-Scholes option pricing ---------------------------------------------------------
@zm.func
def cnd(d):
    return 0.5 * (1.0 + math.erf(d * INV_SQRT2))


@zm.kernel
def black_scholes(price, strike, years, call, put, rate, vol):
    i = zm.grid(1)
    if i < price.shape[0]:
        s = price[i]
        k = strike[i]
        t = years[i]
        sqrt_t = math.sqrt(t)
        d1 = (math.log(s / k) + (rate + 0.5 * vol * vol) * t) / (vol * sqrt_t)
        d2 = d1 - vol * sqrt_t
        discount = math.exp(-rate * t)
        call[i] = s * cnd(d1) - k * discount * cnd(d2)
        put[i] = k * discount * cnd(-d2) - s * cnd(-d1)


def _bs_args(rng):
    n = 500
    return [f32(rng, n, low=5.0, high=30.0), f32(rng, n, low=1.0, high=100.0),
            f32(rng, n, low=0.25, high=10.0), np.zeros(n, np.float32), np.zeros(n, np.float32),
            0.02, 0.30]


def _bs_ref(args):
    s, k, t = (wide(a) for a in args[:3])
    r, v = args[5], args[6]
    d1 = (np.log(s / k) + (r + 0.5 * v * v) * t) / (v * np.sqrt(t))
    d2 = d1 - v * np.sqrt(t)

    def cdf(d):
        return 0.5 * (1 + _erf(d / np.sqrt(2)))
    disc = np.exp(-r * t)
    return {3: s * cdf(d1) - k * disc * cdf(d2), 4: k * disc * cdf(-d2) - s * cdf(-d1)}


# ---- polar to Cartesian with a module-level float constant -----------------------------------
@zm.kernel
def polar(r, frac, xy):
    i = zm.grid(1)
    if i < r.shape[0]:
        theta = frac[i] * TWO_PI
        xy[i, 0] = r[i] * math.cos(theta)
        xy[i, 1] = r[i] * math.sin(theta)


def _polar_args(rng):
    return [f32(rng, N, low=0.0, high=5.0), f32(rng, N, low=0.0, high=1.0),
            np.zeros((N, 2), np.float32)]


def _polar_ref(args):
    r = wide(args[0])
    th = (args[1] * np.float32(TWO_PI)).astype(np.float64)
    return {2: np.stack([r * np.cos(th), r * np.sin(th)], axis=1)}


CASES = [
    Case("unary_math_f32", unary_math, cdiv(N, BLOCK), BLOCK, _unary_args(np.float32),
         _unary_ref, rtol=2e-5, atol=2e-6, features=("math", "abs")),
    Case("unary_math_f64", unary_math, cdiv(N, BLOCK), BLOCK, _unary_args(np.float64),
         _unary_ref, rtol=1e-12, atol=1e-14, features=("math", "abs", "f64")),
    Case("binary_math_f32", binary_math, cdiv(N, BLOCK), BLOCK, _binary_args(np.float32),
         _binary_ref, rtol=2e-5, atol=2e-6, features=("math", "pow", "fma", "min_max")),
    Case("binary_math_f64", binary_math, cdiv(N, BLOCK), BLOCK, _binary_args(np.float64),
         _binary_ref, rtol=1e-12, atol=1e-14, features=("math", "pow", "fma", "min_max", "f64")),
    Case("nan_inf", nan_inf, cdiv(100, BLOCK), BLOCK, _nan_args, _nan_ref,
         features=("math", "isnan", "isinf", "bool", "zm_math")),
    Case("activations_f32", activations, cdiv(N, BLOCK), BLOCK, _act_args(np.float32), _act_ref,
         rtol=2e-5, atol=2e-6, features=("zm_math", "module_constant"), differentiable=True),
    Case("activations_f64", activations, cdiv(N, BLOCK), BLOCK, _act_args(np.float64), _act_ref,
         rtol=1e-12, atol=1e-14, features=("zm_math", "module_constant", "f64"),
         differentiable=True),
    Case("black_scholes", black_scholes, cdiv(500, 128), 128, _bs_args, _bs_ref, rtol=1e-4,
         atol=1e-4, features=("math", "func", "scalar_arg"), differentiable=True),
    Case("polar_to_cartesian", polar, cdiv(N, BLOCK), BLOCK, _polar_args, _polar_ref,
         rtol=1e-5, atol=1e-5, features=("math", "module_constant"), differentiable=True),
]
