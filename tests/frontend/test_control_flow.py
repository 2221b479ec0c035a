"""Control flow in kernels, each checked on the CPU backend and on the interpreter against a
NumPy/Python reference: reverse loops over negative-step views, break / continue / early return
in nested loops, guards by conditional expressions and short-circuit, while loops, range() with
unsigned bounds and a negative step, and a loop-carried index that changes type."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm

from reference_check import BACKENDS, check

RNG = np.random.default_rng(1234)


# ---- negative-step views and reverse loops ----------------------------------------------------
@zm.kernel
def reverse_copy(src, dst):
    i = zm.grid(1)
    if i < src.shape[0]:
        dst[i] = src[i]


@zm.kernel
def suffix_sum_serial(x, out):
    if zm.grid(1) == 0:
        acc = 0
        for i in range(x.shape[0] - 1, -1, -1):
            acc += x[i]
            out[i] = acc


def test_negative_strides():
    a = np.arange(50, dtype=np.int64)
    check(reverse_copy, 1, 64, [a[::-1], np.zeros(50, np.int64)], {1: a[::-1]})
    check(reverse_copy, 1, 64, [a[::-3], np.zeros(17, np.int64)], {1: a[::-3]})
    for backend in BACKENDS:
        dst = np.zeros(50, np.int64)
        (reverse_copy if backend == "cpu" else reverse_copy.on("interp"))[1, 64](a, dst[::-1])
        np.testing.assert_array_equal(dst, a[::-1], err_msg=backend)


@pytest.mark.parametrize("n", [0, 1, 9])
def test_suffix_sum(n):
    x = RNG.integers(-10, 10, n).astype(np.int32)
    check(suffix_sum_serial, 1, 32, [x, np.zeros(n, np.int32)],
          {1: np.cumsum(x[::-1])[::-1].astype(np.int32)})


# ---- break / continue / early return inside nested loops (collatz, prime sieve-ish) -----------
@zm.func
def collatz_steps(n, limit):
    steps = 0
    while n != 1:
        if steps >= limit:
            return -1
        if n % 2 == 0:
            n //= 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


@zm.func
def is_prime(n):
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True


@zm.kernel
def int_loops(x, steps, prime, firstdiv):
    i = zm.grid(1)
    if i >= x.shape[0]:
        return
    v = x[i]
    steps[i] = collatz_steps(v, 50)
    prime[i] = is_prime(v)
    fd = 0
    for d in range(2, v):
        if d % 2 == 0 and d > 2:
            continue
        if v % d == 0:
            fd = d
            break
    firstdiv[i] = fd


def _collatz(n, limit):
    s = 0
    while n != 1:
        if s >= limit:
            return -1
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        s += 1
    return s


def _firstdiv(v):
    for d in range(2, v):
        if d % 2 == 0 and d > 2:
            continue
        if v % d == 0:
            return d
    return 0


def test_int_loops():
    x = np.arange(1, 101, dtype=np.int64)
    steps = np.array([_collatz(int(v), 50) for v in x], np.int64)
    prime = np.array([all(v % d for d in range(2, int(v ** 0.5) + 1)) and v >= 2 for v in x])
    fd = np.array([_firstdiv(int(v)) for v in x], np.int64)
    check(int_loops, 2, 64, [x, np.zeros(100, np.int64), np.zeros(100, np.bool_),
                             np.zeros(100, np.int64)], {1: steps, 2: prime, 3: fd})


# ---- guards: conditional expressions and short-circuit protect out-of-range reads -------------
@zm.kernel(boundscheck=True)
def guarded_reads(x, out):
    i = zm.grid(1)
    v = x[i] if i < x.shape[0] else -1.0
    w = 0.0
    if i < x.shape[0] and x[i] > 0:
        w = 1.0
    if i >= x.shape[0] or x[i] < 0:
        w += 2.0
    if i < out.shape[0]:
        out[i] = v + w


def test_guarded_reads():
    x = np.array([1.0, -1.0, 0.0])
    check(guarded_reads, 1, 8, [x, np.zeros(8)],
          {1: np.array([2.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])})


@zm.kernel
def or_and_values(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] or 7.0
        out[i + x.shape[0]] = x[i] and 5.0


def test_or_and_values():
    x = np.array([0.0, 2.0, -1.0])
    check(or_and_values, 1, 8, [x, np.zeros(6)],
          {1: np.array([7.0, 2.0, -1.0, 0.0, 5.0, 5.0])})


# ---- while + continue + break, nested break ---------------------------------------------------
@zm.kernel
def loop_control(x, out, out2):
    i = zm.grid(1)
    if i < x.shape[0]:
        k = 0
        s = 0
        while k < x[i]:
            k += 1
            if k % 3 == 0:
                continue
            if k > 20:
                break
            s += k
        out[i] = s
        cnt = 0
        for a in range(x[i]):
            for b in range(x[i]):
                if b > a:
                    break
                if (a + b) % 2 == 1:
                    continue
                cnt += 1
            if cnt > 15:
                break
        out2[i] = cnt


def _loop_control_ref(n):
    k = s = 0
    while k < n:
        k += 1
        if k % 3 == 0:
            continue
        if k > 20:
            break
        s += k
    cnt = 0
    for a in range(n):
        for b in range(n):
            if b > a:
                break
            if (a + b) % 2 == 1:
                continue
            cnt += 1
        if cnt > 15:
            break
    return s, cnt


def test_loop_control():
    x = np.array([0, 1, 3, 5, 6, 10, 21, 30], np.int32)
    ref = np.array([_loop_control_ref(int(v)) for v in x], np.int32)
    check(loop_control, 1, 8, [x, np.zeros(8, np.int32), np.zeros(8, np.int32)],
          {1: ref[:, 0], 2: ref[:, 1]})


# ---- range() with unsigned bounds and a negative step -----------------------------------------
@zm.kernel
def count_down_to_zero(n, out):
    c = 0
    s = 0
    for i in range(n, 0, -1):
        c += 1
        s += i
    out[0] = c
    out[1] = s


@zm.kernel
def count_down_pairs(a, b, out):
    t = zm.grid(1)
    if t < a.shape[0]:
        c = 0
        for i in range(a[t], b[t], -2):
            c += 1
        out[t] = c


def test_count_down_signed():
    check(count_down_to_zero, 1, 1, [np.int32(5), np.zeros(2, np.int64)], {1: np.array([5, 15])})
    a = np.array([10, 0, 5, 100, -3], np.int64)
    b = np.array([0, 10, 5, -100, -10], np.int64)
    want = np.array([len(range(x, y, -2)) for x, y in zip(a, b)], np.int64)
    check(count_down_pairs, 1, 8, [a, b, np.zeros(5, np.int64)], {2: want})


def test_count_down_unsigned_scalar():
    check(count_down_to_zero, 1, 1, [np.uint32(5), np.zeros(2, np.int64)],
          {1: np.array([5, 15])})


def test_count_down_unsigned_arrays():
    a = np.array([10, 0, 5, 200, 3], np.uint8)
    b = np.array([0, 10, 5, 1, 0], np.uint8)
    want = np.array([len(range(int(x), int(y), -2)) for x, y in zip(a, b)], np.int64)
    check(count_down_pairs, 1, 8, [a, b, np.zeros(5, np.int64)], {2: want})


# ---- pointer jumping / list ranking (loop-carried index changes type i32 -> i64) --------------
@zm.kernel
def chase_to_root(nxt, out):
    i = zm.grid(1)
    if i < nxt.shape[0]:
        j = i
        d = 0
        while nxt[j] != -1:
            j = nxt[j]
            d += 1
        out[i] = j * 1000 + d


def test_chase_to_root():
    nxt = np.array([1, 2, -1, 2, 0, -1, 4, 6], np.int64)
    want = []
    for i in range(len(nxt)):
        j, d = i, 0
        while nxt[j] != -1:
            j, d = nxt[j], d + 1
        want.append(j * 1000 + d)
    check(chase_to_root, 1, 8, [nxt, np.zeros(8, np.int64)], {1: np.array(want)})
