"""Control flow: early return, loops with negative steps, break / continue, while, short circuit."""
from __future__ import annotations

import math

import numpy as np

import zymo as zm

from .case import Case, cdiv, f32, f64, ints, wide

BLOCK = 64
ROWS = 300
COLS = 23


# ---- early return from the kernel ------------------------------------------------------------
@zm.kernel
def early_return(x, out):
    i = zm.grid(1)
    if i >= x.shape[0]:
        return
    v = x[i]
    if v < 0.0:
        out[i] = 0.0
        return
    out[i] = math.sqrt(v)


def _early_args(rng):
    n = 1000
    return [f32(rng, n), np.full(n, -5.0, np.float32)]


def _early_ref(args):
    x = wide(args[0])
    return {1: np.sqrt(np.maximum(x, 0.0))}


# ---- reverse loop (negative step): suffix sums of each row ----------------------------------
@zm.kernel
def suffix_sum_rows(x, out):
    r = zm.grid(1)
    if r < x.shape[0]:
        acc = 0.0
        for j in range(x.shape[1] - 1, -1, -1):
            acc += x[r, j]
            out[r, j] = acc


def _rows_args(rng):
    return [f32(rng, ROWS, COLS), np.zeros((ROWS, COLS), np.float32)]


def _suffix_ref(args):
    x = wide(args[0])
    return {1: np.cumsum(x[:, ::-1], axis=1)[:, ::-1]}


# ---- range(a, b, step) with positive and negative steps other than 1 -----------------------
@zm.kernel
def strided_sums(x, fwd, bwd):
    r = zm.grid(1)
    if r < x.shape[0]:
        off = r % 3
        s = 0.0
        for j in range(off, x.shape[1], 3):
            s += x[r, j]
        fwd[r] = s
        t = 0.0
        for j in range(x.shape[1] - 1, off, -2):
            t += x[r, j]
        bwd[r] = t


def _strided_args(rng):
    return [f32(rng, ROWS, COLS), np.zeros(ROWS, np.float32), np.zeros(ROWS, np.float32)]


def _strided_ref(args):
    x = wide(args[0])
    fwd = np.array([x[r, r % 3::3].sum() for r in range(ROWS)])
    bwd = np.array([x[r, COLS - 1:r % 3:-2].sum() for r in range(ROWS)])
    return {1: fwd, 2: bwd}


# ---- break: first element above a threshold --------------------------------------------------
@zm.kernel
def first_above(x, thresh, idx):
    r = zm.grid(1)
    if r < x.shape[0]:
        found = -1
        for j in range(x.shape[1]):
            if x[r, j] > thresh:
                found = j
                break
        idx[r] = found


def _first_args(rng):
    x = f32(rng, ROWS, COLS)
    x[5] = -1.0  # a row with no match
    return [x, 0.9, np.zeros(ROWS, np.int64)]


def _first_ref(args):
    x, thresh = args[0], args[1]
    hit = x > thresh
    return {2: np.where(hit.any(axis=1), hit.argmax(axis=1), -1).astype(np.int64)}


# ---- continue: sum of the non-negative entries, count of the skipped ones -------------------
@zm.kernel
def skip_negatives(x, total, skipped):
    r = zm.grid(1)
    if r < x.shape[0]:
        s = 0.0
        n = 0
        for j in range(x.shape[1]):
            v = x[r, j]
            if v < 0.0:
                n += 1
                continue
            s += v
        total[r] = s
        skipped[r] = n


def _skip_args(rng):
    return [f32(rng, ROWS, COLS), np.zeros(ROWS, np.float32), np.zeros(ROWS, np.int32)]


def _skip_ref(args):
    x = wide(args[0])
    return {1: np.where(x >= 0, x, 0).sum(axis=1), 2: (x < 0).sum(axis=1).astype(np.int32)}


# ---- while: Collatz steps --------------------------------------------------------------------
@zm.kernel
def collatz_steps(start, steps):
    i = zm.grid(1)
    if i < start.shape[0]:
        n = start[i]
        count = 0
        while n != 1 and count < 1000:
            if n % 2 == 0:
                n = n // 2
            else:
                n = 3 * n + 1
            count += 1
        steps[i] = count


def _collatz_args(rng):
    start = ints(rng, np.int64, 700, low=1, high=20_000)
    start[:3] = [1, 2, 27]
    return [start, np.zeros(700, np.int32)]


def _collatz_ref(args):
    out = []
    for n in args[0].tolist():
        c = 0
        while n != 1 and c < 1000:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            c += 1
        out.append(c)
    return {1: np.array(out, np.int32)}


# ---- while with break: trial-division primality ---------------------------------------------
@zm.kernel
def is_prime(vals, out):
    i = zm.grid(1)
    if i < vals.shape[0]:
        n = vals[i]
        prime = n >= 2
        d = 2
        while d * d <= n:
            if n % d == 0:
                prime = False
                break
            d += 1
        out[i] = prime


def _prime_args(rng):
    vals = ints(rng, np.int32, 500, low=0, high=5000)
    vals[:6] = [0, 1, 2, 3, 4, 4999]
    return [vals, np.zeros(500, bool)]


def _prime_ref(args):
    def prime(n):
        return n >= 2 and all(n % d for d in range(2, int(n ** 0.5) + 1))
    return {1: np.array([prime(n) for n in args[0].tolist()])}


# ---- short circuit: the right operand must not run (it would read out of bounds) ------------
@zm.kernel
def short_circuit_guard(x, out):
    i = zm.grid(1)
    if i < x.shape[0] and x[i] > 0.0:
        out[i] = x[i]
    elif not (i >= out.shape[0] or x[i] > -0.5):
        out[i] = -x[i]


def _short_args(rng):
    n = 999  # 1024 threads: the last 25 must not touch x
    return [f32(rng, n), np.zeros(n, np.float32)]


def _short_ref(args):
    x = wide(args[0])
    return {1: np.where(x > 0, x, np.where(x <= -0.5, -x, 0.0))}


# ---- Newton iteration for the square root: while on a float condition ------------------------
@zm.kernel
def newton_sqrt(a, out, iters):
    i = zm.grid(1)
    if i < a.shape[0]:
        v = a[i]
        x = v if v > 1.0 else 1.0  # noqa: FURB136
        k = 0
        delta = 1.0
        while delta > 1e-12 * x and k < 100:
            nx = 0.5 * (x + v / x)
            delta = abs(nx - x)
            x = nx
            k += 1
        out[i] = x
        iters[i] = k


def _newton_args(rng):
    return [f64(rng, 400, low=0.01, high=1e6), np.zeros(400), np.zeros(400, np.int32)]


def _newton_ref(args):
    a = args[0]
    iters = []
    for v in a.tolist():
        x = max(v, 1.0)
        k, delta = 0, 1.0
        while delta > 1e-12 * x and k < 100:
            nx = 0.5 * (x + v / x)
            delta = abs(nx - x)
            x = nx
            k += 1
        iters.append(k)
    return {1: np.sqrt(a), 2: np.array(iters, np.int32)}


# ---- nested loops with a data-dependent inner bound and an early exit of both loops ---------
@zm.kernel
def pair_count(x, limit, out):
    r = zm.grid(1)
    if r < x.shape[0]:
        count = 0
        done = False
        for j in range(x.shape[1]):
            for k in range(j + 1, x.shape[1]):
                if x[r, j] + x[r, k] > 1.0:
                    count += 1
                    if count >= limit:
                        done = True
                        break
            if done:
                break
        out[r] = count


def _pair_args(rng):
    return [f32(rng, ROWS, COLS, low=0.0, high=1.0), 40, np.zeros(ROWS, np.int32)]


def _pair_ref(args):
    x, limit = args[0], args[1]
    out = []
    for row in wide(x):
        s = row[:, None] + row[None, :]
        c = int(np.triu(s > 1.0, k=1).sum())
        out.append(min(c, limit))
    return {2: np.array(out, np.int32)}


CASES = [
    Case("early_return", early_return, cdiv(1000, BLOCK), BLOCK, _early_args, _early_ref,
         features=("early_return",)),
    Case("suffix_sum_rows", suffix_sum_rows, cdiv(ROWS, BLOCK), BLOCK, _rows_args, _suffix_ref,
         features=("negative_step", "2d_array"), differentiable=True),
    Case("strided_sums", strided_sums, cdiv(ROWS, BLOCK), BLOCK, _strided_args, _strided_ref,
         features=("range_step", "negative_step", "mod"), differentiable=True),
    Case("first_above", first_above, cdiv(ROWS, BLOCK), BLOCK, _first_args, _first_ref,
         features=("break", "scalar_arg")),
    Case("skip_negatives", skip_negatives, cdiv(ROWS, BLOCK), BLOCK, _skip_args, _skip_ref,
         features=("continue",)),
    Case("collatz_steps", collatz_steps, cdiv(700, BLOCK), BLOCK, _collatz_args, _collatz_ref,
         features=("while", "i64", "and_or_not")),
    Case("is_prime", is_prime, cdiv(500, BLOCK), BLOCK, _prime_args, _prime_ref,
         features=("while", "break", "bool")),
    Case("short_circuit_guard", short_circuit_guard, 16, BLOCK, _short_args, _short_ref,
         features=("short_circuit", "and_or_not", "elif")),
    Case("newton_sqrt_f64", newton_sqrt, cdiv(400, BLOCK), BLOCK, _newton_args, _newton_ref,
         rtol=1e-12, atol=0.0, features=("while", "f64", "abs")),
    Case("pair_count", pair_count, cdiv(ROWS, BLOCK), BLOCK, _pair_args, _pair_ref,
         features=("nested_loops", "break", "bool")),
]
