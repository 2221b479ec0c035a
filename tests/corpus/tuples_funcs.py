"""Tuples and device functions: nested calls, tuple returns and arguments, early returns."""
from __future__ import annotations

import math

import numpy as np

import zymo as zm

from .case import Case, cdiv, f32, f64, ints, wide

N = 500
BLOCK = 64
COEFFS = (0.5, -1.25, 2.0, 0.75, -0.125)  # highest power first
NCOEF = 5
BINOMIAL = (1.0, 4.0, 6.0, 4.0, 1.0)


# ---- nested device functions ---------------------------------------------------------------
@zm.func
def square(v):
    return v * v


@zm.func
def norm2(a, b):
    return square(a) + square(b)


@zm.func
def norm(a, b):
    return math.sqrt(norm2(a, b))


@zm.kernel
def nested_funcs(x, y, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = norm(x[i], y[i]) + square(x[i])


def _nested_args(rng):
    return [f32(rng, N), f32(rng, N), np.zeros(N, np.float32)]


def _nested_ref(args):
    x, y = wide(args[0]), wide(args[1])
    return {2: np.hypot(x, y) + x * x}


# ---- early returns from device functions (scalar and inside a loop over an array) ------------
@zm.func
def classify(v, lo, hi):
    if v < lo:
        return -1
    if v > hi:
        return 1
    return 0


@zm.func
def first_match(a, row, target):
    for j in range(a.shape[1]):
        if a[row, j] == target:
            return j
    return -1


@zm.kernel
def func_early_return(x, keys, cls, pos):
    i = zm.grid(1)
    if i < x.shape[0]:
        cls[i] = classify(x[i], -0.5, 0.5)
    if i < keys.shape[0]:
        pos[i] = first_match(keys, i, 3)


def _early_args(rng):
    keys = ints(rng, np.int32, 200, 12, low=0, high=10)
    return [f32(rng, N), keys, np.zeros(N, np.int32), np.zeros(200, np.int64)]


def _early_ref(args):
    x, keys = args[0], args[1]
    hit = keys == 3
    return {2: np.where(x < -0.5, -1, np.where(x > 0.5, 1, 0)).astype(np.int32),
            3: np.where(hit.any(axis=1), hit.argmax(axis=1), -1).astype(np.int64)}


# ---- tuple returns, tuple swaps: sort three values ---------------------------------------------
@zm.func
def sort3(a, b, c):
    if a > b:
        a, b = b, a
    if b > c:
        b, c = c, b
    if a > b:
        a, b = b, a
    return a, b, c


@zm.func
def divmod_floor(a, b):
    return a // b, a % b


@zm.kernel
def tuple_returns(x, n, d, sorted_out, q, r):
    i = zm.grid(1)
    if i < x.shape[0]:
        lo, mid, hi = sort3(x[i, 0], x[i, 1], x[i, 2])
        sorted_out[i, 0] = lo
        sorted_out[i, 1] = mid
        sorted_out[i, 2] = hi
        qr = divmod_floor(n[i], d[i])
        q[i] = qr[0]
        r[i] = qr[1]


def _tret_args(rng):
    d = ints(rng, np.int32, N, low=-9, high=10)
    d[d == 0] = 4
    return [f32(rng, N, 3), ints(rng, np.int32, N, low=-1000, high=1000), d,
            np.zeros((N, 3), np.float32), np.zeros(N, np.int32), np.zeros(N, np.int32)]


def _tret_ref(args):
    x, n, d = args[:3]
    return {3: np.sort(x, axis=1), 4: n // d, 5: n % d}


# ---- module-level tuple constants indexed by a loop variable; tuple built in the kernel ---------
@zm.kernel
def tuple_constants(x, horner, smooth, powers):
    i = zm.grid(1)
    if i < horner.shape[0]:
        v = x[i]
        acc = 0.0
        for k in range(NCOEF):
            acc = acc * v + COEFFS[k]
        horner[i] = acc
        s = 0.0
        for k in range(5):
            s += BINOMIAL[k] * x[i + k]
        smooth[i] = s / 16.0
        t = (v, v * v, v * v * v)
        powers[i] = t[0] + 2.0 * t[1] - t[2]


def _tconst_args(rng):
    return [f32(rng, N + 4), np.zeros(N, np.float32), np.zeros(N, np.float32),
            np.zeros(N, np.float32)]


def _tconst_ref(args):
    x = wide(args[0])
    v = x[:N]
    horner = np.polyval(np.array(COEFFS), v)
    smooth = sum(BINOMIAL[k] * x[k:k + N] for k in range(5)) / 16
    return {1: horner, 2: smooth, 3: v + 2 * v * v - v ** 3}


# ---- a tuple carried through a loop: Fibonacci mod 2**64 -------------------------------------
@zm.kernel
def fib_u64(ns, out):
    i = zm.grid(1)
    if i < ns.shape[0]:
        a = zm.u64(0)
        b = zm.u64(1)
        for _ in range(ns[i]):
            a, b = b, a + b
        out[i] = a


def _fib_args(rng):
    ns = ints(rng, np.int32, 200, low=0, high=300)
    ns[:3] = [0, 1, 93]
    return [ns, np.zeros(200, np.uint64)]


def _fib_ref(args):
    out = []
    for n in args[0].tolist():
        a, b = 0, 1
        for _ in range(n):
            a, b = b, (a + b) % 2**64
        out.append(a)
    return {1: np.array(out, np.uint64)}


# ---- tuples as device-function arguments: complex arithmetic ------------------------------------
@zm.func
def cmul(z, w):
    return z[0] * w[0] - z[1] * w[1], z[0] * w[1] + z[1] * w[0]


@zm.func
def cadd(z, w):
    return z[0] + w[0], z[1] + w[1]


@zm.kernel
def complex_poly(re, im, out):
    i = zm.grid(1)
    if i < re.shape[0]:
        z = (re[i], im[i])
        c = (0.25, -0.5)
        w = z
        for _ in range(4):
            w = cadd(cmul(w, w), c)
        out[i, 0] = w[0]
        out[i, 1] = w[1]


def _cpoly_args(rng):
    return [f64(rng, N, low=-0.5, high=0.5), f64(rng, N, low=-0.5, high=0.5),
            np.zeros((N, 2))]


def _cpoly_ref(args):
    w = args[0] + 1j * args[1]
    for _ in range(4):
        w = w * w + (0.25 - 0.5j)
    return {2: np.stack([w.real, w.imag], axis=1)}


# ---- a mixed (int, float) tuple: arg max per row ----------------------------------------------
@zm.func
def row_argmax(a, r):
    best = a[r, 0]
    arg = 0
    for j in range(1, a.shape[1]):
        if a[r, j] > best:
            best = a[r, j]
            arg = j
    return arg, best


@zm.kernel
def argmax_rows(a, idx, val):
    r = zm.grid(1)
    if r < a.shape[0]:
        k, v = row_argmax(a, r)
        idx[r] = k
        val[r] = v


def _argmax_args(rng):
    return [f32(rng, 150, 17), np.zeros(150, np.int64), np.zeros(150, np.float32)]


def _argmax_ref(args):
    a = args[0]
    return {1: a.argmax(axis=1).astype(np.int64), 2: a.max(axis=1)}


CASES = [
    Case("nested_funcs", nested_funcs, cdiv(N, BLOCK), BLOCK, _nested_args, _nested_ref,
         features=("func", "nested_func"), differentiable=True),
    Case("func_early_return", func_early_return, cdiv(N, BLOCK), BLOCK, _early_args, _early_ref,
         features=("func", "func_early_return", "func_array_arg")),
    Case("tuple_returns", tuple_returns, cdiv(N, BLOCK), BLOCK, _tret_args, _tret_ref,
         features=("func", "tuple", "tuple_return", "tuple_swap", "floordiv", "mod")),
    Case("tuple_constants", tuple_constants, cdiv(N, BLOCK), BLOCK, _tconst_args, _tconst_ref,
         features=("tuple", "module_tuple", "tuple_loop_index", "tuple_const_index"),
         differentiable=True),
    Case("fib_u64", fib_u64, cdiv(200, BLOCK), BLOCK, _fib_args, _fib_ref,
         features=("tuple", "tuple_swap", "u64", "wraparound")),
    Case("complex_poly_f64", complex_poly, cdiv(N, BLOCK), BLOCK, _cpoly_args, _cpoly_ref,
         rtol=1e-12, atol=1e-13, features=("tuple", "tuple_arg", "func", "f64"),
         differentiable=True),
    Case("argmax_rows", argmax_rows, cdiv(150, BLOCK), BLOCK, _argmax_args, _argmax_ref,
         features=("func", "tuple_return", "func_array_arg")),
]
