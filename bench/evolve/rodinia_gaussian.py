"""Rodinia's Gaussian elimination as an evolution workload: `Fan2`, the row update of the two
kernels GEVO timed (`Fan1` computes the n multipliers of a step, `Fan2` the n^2 updates).

At step t, Fan1 sets m[i, t] = a[i, t] / a[t, t] for the rows i > t; Fan2 then takes m[i, t]
times row t from every row below it, a[i, j] -= m[i, t] a[t, j] for j >= t (the column t too,
which becomes 0), and the thread of column t does the same to the right-hand side,
b[i] -= m[i, t] b[t]. Rodinia launches Fan2 over 4 x 4 thread blocks, x along the rows below
t, y along the columns from t. The inputs here are a system and Fan1's multipliers (NumPy) at
step 0, the largest update.

Rodinia's generator (`-s n`): a = 10 exp(-0.01 |i - j|) (Toeplitz), b = 1; each evaluation
adds a fresh uniform [0, 1) to both, so inputs differ. GEVO's test: the 1024 x 1024 matrix
file; fitness here n = 1024 at t = 0, held out n = 1500 at t = 7. Error: GEVO's per-element
relative 1% on the program's output, the solution x: the check finishes the elimination of
the variant's state in float64 the way Rodinia's later steps and back substitution read it
(`solution`) and compares with the original's.
"""
from __future__ import annotations

import functools

import numpy as np

import zymo as zm

from .rodinia_common import GEVO_RELATIVE, cdiv, elementwise_relative, seeded_holdout
from .workloads import Workload

BLOCK = (4, 4)
M, A, B_, N, T = range(5)


@zm.kernel
def fan2(m, a, b, size, t):
    x = zm.blockIdx.x * zm.blockDim.x + zm.threadIdx.x
    y = zm.blockIdx.y * zm.blockDim.y + zm.threadIdx.y
    if x >= size - 1 - t:
        return
    if y >= size - t:
        return
    row = x + 1 + t
    a[size * row + y + t] -= m[size * row + t] * a[size * t + y + t]
    if y == 0:
        b[row] -= m[size * row + y + t] * b[t]


def generate(rng, n: int):
    k = np.arange(n)
    a = 10.0 * np.exp(-0.01 * np.abs(k[:, None] - k[None, :])) + rng.random((n, n))
    return a, 1.0 + rng.random(n)


def eliminate(a: np.ndarray, b: np.ndarray, t: int) -> None:
    """Fan1 then Fan2 of step t, in place (float64)."""
    mult = a[t + 1:, t] / a[t, t]
    a[t + 1:, t:] -= mult[:, None] * a[t, t:]
    b[t + 1:] -= mult * b[t]


def inputs(rng, n: int = 1024, t: int = 0) -> list:
    a, b = generate(rng, n)
    for s in range(t):
        eliminate(a, b, s)
    m = np.zeros((n, n))
    m[t + 1:, t] = a[t + 1:, t] / a[t, t]     # Fan1
    f = np.float32
    return [m.astype(f).reshape(-1), a.astype(f).reshape(-1), b.astype(f), np.int32(n),
            np.int32(t)]


def launch(args):
    n, t = int(args[N]), int(args[T])
    return (cdiv(n - 1 - t, BLOCK[0]), cdiv(n - t, BLOCK[1])), BLOCK


def solution(args) -> np.ndarray:
    """What Rodinia's program prints from the state after step t: the later steps and its back
    substitution read only the rows below t from column t + 1 on and the upper triangle above,
    so the rows below t are solved as a system (the later steps, in float64) and rows t..0
    back-substituted. A variant that leaves the rows below t unreduced gets another answer."""
    n, t = int(args[N]), int(args[T])
    a = np.asarray(args[A], np.float64).reshape(n, n)
    b = np.asarray(args[B_], np.float64)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return np.full(n, np.nan)
    x = np.zeros(n)
    try:
        x[t + 1:] = np.linalg.solve(a[t + 1:, t + 1:], b[t + 1:])
    except np.linalg.LinAlgError:
        return np.full(n, np.nan)
    for i in range(t, -1, -1):
        x[i] = (b[i] - a[i, i + 1:] @ x[i + 1:]) / a[i, i]
    return x


def check(expected, got) -> float:
    return elementwise_relative(solution(expected), solution(got))


WORKLOADS = {
    "rodinia_gaussian": Workload(
        fan2, launch, inputs, seeded_holdout(inputs, n=1500, t=7), check, GEVO_RELATIVE,
        functools.partial(inputs, n=23, t=2),
        describe="Rodinia gaussian, Fan2 at step 0 of 1024x1024 (held out: 1500x1500 at step "
                 "7); error: per-element relative 1% on the solution"),
}
