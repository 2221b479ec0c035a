"""What the Rodinia workloads (bench/evolve/rodinia_*.py) share: GEVO's error measures, written
as `Workload.check` functions over the argument lists after a launch, and seeded held-out
inputs.

GEVO compares a variant's output files with the original's token by token (its
`fuzzycompare`): the relative error |x - g| / |g| of each number, the largest one counts, and
the default threshold (the one its Rodinia runs used) is 0.01. Here the tokens are the
elements of the output arrays, and a NaN or an infinity is an infinite error, as there.
"""
from __future__ import annotations

import functools

import numpy as np

GEVO_RELATIVE = 0.01   # GEVO's default --err_rate, the one its Rodinia runs used
HOLDOUT_SEED = 2026


def _as64(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _difference(expected, got):
    """(expected in float64, |got - expected|), or None where no error can be measured: the
    shapes differ, or a difference is NaN or infinite (an infinite error, as in GEVO)."""
    e, g = _as64(expected), _as64(got)
    if e.shape != g.shape:
        return None
    diff = np.abs(g - e)
    return (e, diff) if np.all(np.isfinite(diff)) else None


def elementwise_relative(expected: np.ndarray, got: np.ndarray) -> float:
    """GEVO's per-token relative error: the largest |got - expected| / |expected|; where the
    expected value is 0 the absolute difference counts (a division by 0 is no measure)."""
    measured = _difference(expected, got)
    if measured is None:
        return float("inf")
    e, diff = measured
    scale = np.abs(e)
    err = np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), diff)
    return float(err.max(initial=0.0))


def relative_error(*positions):
    """check(expected, got): GEVO's per-element relative error over the arguments at
    `positions` (integer arrays must match exactly)."""
    return functools.partial(_relative_error, positions)


def _relative_error(positions, expected, got) -> float:
    error = 0.0
    for p in positions:
        if np.asarray(expected[p]).dtype.kind in "fc":
            error = max(error, elementwise_relative(expected[p], got[p]))
        elif _exact((p,), expected, got):
            return float("inf")
    return error


def exact(*positions):
    """check(expected, got): 0 when the arrays at `positions` are equal, else infinite (GEVO's
    `fuzzy: false`, a byte-for-byte compare of the output file)."""
    return functools.partial(_exact, positions)


def _exact(positions, expected, got) -> float:
    for p in positions:
        e, g = np.asarray(expected[p]), np.asarray(got[p])
        if e.shape != g.shape or not np.array_equal(e, g):
            return float("inf")
    return 0.0


def step_error(before, expected, got) -> float:
    """The largest |got - expected| relative to the largest change the original's step made
    (|expected - before|), for a kernel that advances a state by one step: GEVO's 1% was of
    temperatures (or pixels) after thousands of steps, where an error made per step adds up;
    1% of one step's output (of ~320 K) is passed by a variant that drops the power term,
    1% of the step's largest change is not."""
    measured = _difference(expected, got)
    if measured is None:
        return float("inf")
    e, diff = measured
    change = float(np.abs(e - _as64(before)).max(initial=0.0))
    return float(diff.max(initial=0.0)) / max(change, 1e-30)


def seeded_holdout(inputs, **size):
    """A held-out input of another size, from its own seed (the same every call)."""
    return functools.partial(_seeded, functools.partial(inputs, **size))


def _seeded(inputs, rng=None):
    return inputs(np.random.default_rng(HOLDOUT_SEED))


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
