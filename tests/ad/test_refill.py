"""Reverse mode through thread-local arrays that loops overwrite: scratch arrays each iteration
fills whole before reading (`zymo/ad/refill.py`), reads after writes inside one branch, and
arrays allocated under the early-return guard. Checked against float64 finite differences and
the dot-product test; a scratch array an iteration fills only in part stays a compile error."""
import numpy as np
import pytest

import zymo as zm


@zm.kernel
def filled_once(x, n, out):
    i = zm.grid(1)
    if i >= out.shape[0]:
        return
    a = zm.local.array(3, zm.f64)
    for l in range(3):
        a[l] = x[i, l] * x[i, l]
    s = 0.0
    for j in range(n[i]):                 # trip count read from memory
        s += a[j % 3] * a[(j + 1) % 3]
    out[i] = s


@zm.kernel
def scratch_per_iteration(x, w, counts, picks, out):
    """Per row r of the thread: fill a scratch array from x (sin, sqrt), then sum w times the
    scratch entries that `picks` names; rows and picks are counted by arrays."""
    i = zm.grid(1)
    if i >= out.shape[0]:
        return
    scratch = zm.local.array(4, zm.f64)
    total = 0.0
    for r in range(counts[i]):
        for l in range(4):
            scratch[l] = zm.math.sin(x[i, r] * (l + 1)) + zm.math.sqrt(1.0 + w[r, l] ** 2)
        for p in range(counts[i] + 1):
            total += w[r, p % 4] * scratch[picks[i, r, p]] * x[i, r]
    out[i] = total


@zm.kernel
def scratch_constant_stores(x, y, counts, picks, out):
    """Scratch arrays filled by stores at constant indices: a float one from the
    differentiated x, a complex one from the constant y (as RSBench's phase factors), read at
    indices taken from memory."""
    i = zm.grid(1)
    if i >= out.shape[0]:
        return
    g = zm.local.array(2, zm.f64)
    f = zm.local.array(2, zm.c128)
    acc = 0.0
    for r in range(counts[i]):
        phi = y[i, r]
        f[0] = complex(zm.math.cos(phi), -zm.math.sin(phi))
        f[1] = complex(phi * phi, zm.math.atan(phi))
        g[0] = zm.math.exp(x[i, r])
        g[1] = x[i, r] * x[i, 0]
        for p in range(3):
            z = f[picks[i, r, p]] * complex(x[i, 0], x[i, r])
            acc += z.real * g[picks[i, r, 2 - p]]
    out[i] = acc


@zm.kernel
def partly_filled(x, counts, picks, out):
    i = zm.grid(1)
    if i >= out.shape[0]:
        return
    a = zm.local.array(3, zm.f64)
    for l in range(3):
        a[l] = 0.0
    s = 0.0
    for r in range(counts[i]):
        a[0] = x[i, r] * x[i, r]          # a[1], a[2] keep what earlier iterations left
        a[1] = a[1] + x[i, r]
        s += a[picks[i, r]] * x[i, r]
    out[i] = s


def _check(kernel, *args, threads=8, backend="cpu"):
    report = zm.check_grad(kernel, 1, threads, *args, backend=backend)
    assert report.ok, str(report)
    assert any(row.kind == "dot-product" for row in report.rows)
    return report


def test_array_filled_before_a_loop_under_the_guard():
    rng = np.random.default_rng(0)
    x = rng.random((8, 3))
    n = np.arange(8).astype(np.int32)
    report = _check(filled_once, zm.Duplicated(x, np.zeros_like(x)), n,
                    zm.Duplicated(np.zeros(8), np.zeros(8)))
    assert abs(report.rows[0].reverse) > 0


@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_scratch_array_filled_by_a_loop_each_iteration(backend):
    rng = np.random.default_rng(1)
    x, w = rng.random((8, 5)), rng.random((5, 4))
    counts = rng.integers(0, 6, 8).astype(np.int32)
    picks = rng.integers(0, 4, (8, 5, 6)).astype(np.int32)
    _check(scratch_per_iteration, zm.Duplicated(x, np.zeros_like(x)),
           zm.Duplicated(w, np.zeros_like(w)), counts, picks,
           zm.Duplicated(np.zeros(8), np.zeros(8)), backend=backend)


def test_scratch_gradient_matches_numpy():
    """The gradient w.r.t. x of the scratch kernel, against a NumPy transcription's central
    differences element by element (not only along random directions)."""
    rng = np.random.default_rng(2)
    x, w = rng.random((4, 3)), rng.random((3, 4))
    counts = np.array([3, 1, 0, 2], np.int32)
    picks = rng.integers(0, 4, (4, 3, 4)).astype(np.int32)

    def f(x):
        out = np.zeros(4)
        for i in range(4):
            for r in range(counts[i]):
                s = [np.sin(x[i, r] * (l + 1)) + np.sqrt(1 + w[r, l] ** 2) for l in range(4)]
                for p in range(counts[i] + 1):
                    out[i] += w[r, p % 4] * s[picks[i, r, p]] * x[i, r]
        return out.sum()

    dx = np.zeros_like(x)
    zm.grad(scratch_per_iteration)[1, 4](zm.Duplicated(x.copy(), dx), w, counts, picks,
                                         zm.Duplicated(np.zeros(4), np.ones(4)))
    h, fd = 1e-6, np.zeros_like(x)
    for index in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[index] = h
        fd[index] = (f(x + e) - f(x - e)) / (2 * h)
    np.testing.assert_allclose(dx, fd, rtol=1e-6, atol=1e-8)


def test_scratch_filled_by_constant_stores():
    rng = np.random.default_rng(3)
    x, y = rng.random((8, 4)), rng.random((8, 4))
    counts = rng.integers(0, 5, 8).astype(np.int32)
    picks = rng.integers(0, 2, (8, 4, 3)).astype(np.int32)
    _check(scratch_constant_stores, zm.Duplicated(x, np.zeros_like(x)), y, counts, picks,
           zm.Duplicated(np.zeros(8), np.zeros(8)))


def test_partly_filled_scratch_is_a_compile_error():
    rng = np.random.default_rng(4)
    x = rng.random((8, 4))
    counts = np.full(8, 4, np.int32)
    picks = rng.integers(0, 3, (8, 4)).astype(np.int32)
    with pytest.raises(zm.CompileError, match=r"test_refill.py:\d+:\d+: error: .*`a`"):
        zm.grad(partly_filled)[1, 8](zm.Duplicated(x, np.zeros_like(x)), counts, picks,
                                     zm.Duplicated(np.zeros(8), np.ones(8)))
