"""On a GPU: NumPy reductions of whole arrays inside kernels (each thread reduces its row) give
NumPy's values, types and NaN rules, captured arrays through literal_unroll included, and
their derivatives match finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm

from frontend.test_reductions import FUNCTIONS, expected, reducer

pytestmark = pytest.mark.gpu
NAN, INF = float("nan"), float("inf")


def expected_rows(name, rows):
    return np.stack([expected(FUNCTIONS[name], row) for row in rows])


@pytest.mark.parametrize("dtype", ["f8", "f4", "i4", "u1", "?"])
def test_every_reduction_against_numpy(dtype):
    rng = np.random.default_rng(0)
    a = (rng.random((40, 3, 5)) * 6 - 2).astype(dtype)
    for name in FUNCTIONS:
        want = expected_rows(name, a)
        out = np.zeros(len(a), want.dtype)
        reducer(name).on("cuda")[2, 32](out, a)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(out, want, rtol=2e-6 if dtype == "f4" else 1e-13,
                                       err_msg=name)
        else:
            np.testing.assert_array_equal(out, want, err_msg=name)


def test_nan_rules():
    rows = np.array([[1.0, -0.0, 2.0, -1.5], [NAN, 1.0, INF, 2.0], [NAN, NAN, NAN, NAN],
                     [-INF, 3.0, NAN, 0.0]])
    for name in FUNCTIONS:
        want = expected_rows(name, rows)
        out = np.zeros(len(rows), want.dtype)
        reducer(name).on("cuda")[1, 32](out, rows)
        np.testing.assert_array_equal(out, want, err_msg=name)


CASES = (np.int16([[3, -1], [4, 9]]), np.array([False, True]), np.array(2.5),
         np.float32([1.0, NAN]))


@zm.kernel
def captured(out):
    k = 0
    for c in zm.literal_unroll(CASES):
        out[k, 0] = np.sum(c)
        out[k, 1] = c.max()
        out[k, 2] = np.mean(c)
        k += 1


def test_captured_arrays_through_literal_unroll():
    out = np.zeros((4, 3))
    captured.on("cuda")[1, 1](out)
    np.testing.assert_array_equal(out, [[np.sum(c), np.max(c), np.mean(c)] for c in CASES])


@zm.kernel
def row_stats(out, x):
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = x[i, :].sum() + np.mean(x[i]) * x[i].var() + np.std(x[i]) + x[i].max()


def test_gradient():
    x = np.random.default_rng(1).random((8, 5)) + 0.5
    report = zm.check_grad(row_stats, 1, 8, zm.Duplicated(np.zeros(8), np.random.random(8)),
                           zm.Duplicated(x, np.zeros_like(x)), backend="cuda")
    assert report.ok, str(report)
