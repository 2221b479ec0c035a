"""Reverse mode of device functions inside kernels: `zm.vjp(f, *primals)`, `zm.grad(f)`,
`zm.jacrev(f)`, checked against closed forms, central differences of the device function run
as Python, and forward mode (`zm.jacfwd`) on the same functions."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm

BACKENDS = ("interp", "cpu")


@zm.func
def axpy_pair(x, y):
    return (x * math.sin(y), x * x + y)


@zm.func
def many(q):
    """14 inputs -> 3 outputs, nonlinear in all of them."""
    s = 0.0
    p = 1.0
    for k in range(14):
        s += q[k] * q[k] * (k + 1)
        p *= 1.0 + 0.1 * math.tanh(q[k])
    return (s, p, math.exp(0.1 * s) * p)


@zm.func
def branchy(x, n):
    """A run-time loop, a branch on the data and an early return."""
    if x > 3.0:
        return x * 0.5
    acc = x
    k = 0
    while k < n:
        if acc > 0.0:
            acc = acc * math.cos(acc) + 0.25 * x
        else:
            acc = acc - x * x
        k += 1
    return acc


@zm.kernel
def reverse_inside(xs, ys, qs, ns, out, jac):
    i = zm.grid(1)
    if i < xs.shape[0]:
        (a, b), pull = zm.vjp(axpy_pair, xs[i], ys[i])
        dx, dy = pull((1.0, 2.0))
        out[i, 0] = dx
        out[i, 1] = dy
        out[i, 2] = a + b
        out[i, 3] = zm.grad(branchy)(xs[i], ns[i])
        J = zm.jacrev(axpy_pair, argnums=(0, 1))(xs[i], ys[i])
        out[i, 4] = J[0][0]
        out[i, 5] = J[0][1]
        out[i, 6] = J[1][0]
        out[i, 7] = J[1][1]
        q = (qs[i, 0], qs[i, 1], qs[i, 2], qs[i, 3], qs[i, 4], qs[i, 5], qs[i, 6],
             qs[i, 7], qs[i, 8], qs[i, 9], qs[i, 10], qs[i, 11], qs[i, 12], qs[i, 13])
        R = zm.jacrev(many)(q)
        F = zm.jacfwd(many, 0, width=7)(q)
        r = 0
        for row in R:
            c = 0
            for entry in row:
                jac[0, i, r, c] = entry
                c += 1
            r += 1
        r = 0
        for row in F:
            c = 0
            for entry in row:
                jac[1, i, r, c] = entry
                c += 1
            r += 1


def _run(backend, n=24, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2.0, 4.0, n)
    y = rng.standard_normal(n)
    q = rng.standard_normal((n, 14)) * 0.5
    counts = rng.integers(0, 6, n).astype(np.int32)
    out, jac = np.zeros((n, 8)), np.zeros((2, n, 3, 14))
    reverse_inside.on(backend)[1, 32](x, y, q, counts, out, jac)
    return x, y, q, counts, out, jac


def _central(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vjp_grad_and_jacrev_inside_kernels(backend):
    x, y, q, counts, out, jac = _run(backend)
    # pull((1, 2)) = 1 * d(x sin y) + 2 * d(x^2 + y)
    np.testing.assert_allclose(out[:, 0], np.sin(y) + 4 * x, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(out[:, 1], x * np.cos(y) + 2, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(out[:, 2], x * np.sin(y) + x * x + y, rtol=1e-14)
    jacobian = np.stack([np.sin(y), x * np.cos(y), 2 * x, np.ones_like(x)], 1)
    np.testing.assert_allclose(out[:, 4:8], jacobian, rtol=1e-14, atol=1e-15)
    for i in range(len(x)):
        fd = _central(lambda v: branchy(v, int(counts[i])), x[i])
        np.testing.assert_allclose(out[i, 3], fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_jacrev_equals_jacfwd_and_finite_differences(backend):
    x, y, q, counts, out, jac = _run(backend)
    np.testing.assert_allclose(jac[0], jac[1], rtol=1e-13, atol=1e-14)
    h = 1e-6
    for i in range(0, len(x), 5):
        for c in range(14):
            up, down = q[i].copy(), q[i].copy()
            up[c] += h
            down[c] -= h
            fd = (np.array(many(tuple(up))) - np.array(many(tuple(down)))) / (2 * h)
            np.testing.assert_allclose(jac[0, i, :, c], fd, rtol=1e-7, atol=1e-8)


@zm.func
def pair_sum(p, scale):
    return scale * (p[0] * p[1] + math.sqrt(p[0] * p[0] + 1.0))


@zm.kernel
def argnums_and_ints(ps, out):
    i = zm.grid(1)
    if i < ps.shape[0]:
        p = (ps[i, 0], ps[i, 1])
        g = zm.grad(pair_sum, argnums=(0, 1))(p, 3.0)
        out[i, 0] = g[0][0]
        out[i, 1] = g[0][1]
        out[i, 2] = g[1]
        dp, dscale = zm.vjp(pair_sum, p, 3.0)[1](0.5)
        out[i, 3] = dp[1]
        out[i, 4] = dscale


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_argnums_tuples_and_weak_constants(backend):
    p = np.random.default_rng(1).standard_normal((9, 2))
    out = np.zeros((9, 5))
    argnums_and_ints.on(backend)[1, 16](p, out)
    a, b = p[:, 0], p[:, 1]
    inner = a * b + np.sqrt(a * a + 1)
    np.testing.assert_allclose(out[:, 0], 3 * (b + a / np.sqrt(a * a + 1)), rtol=1e-14)
    np.testing.assert_allclose(out[:, 1], 3 * a, rtol=1e-14)
    np.testing.assert_allclose(out[:, 2], inner, rtol=1e-14)
    np.testing.assert_allclose(out[:, 3], 0.5 * 3 * a, rtol=1e-14)
    np.testing.assert_allclose(out[:, 4], 0.5 * inner, rtol=1e-14)


@zm.kernel
def vjp_then_store(xs, ys, out):
    i = zm.grid(1)
    if i < xs.shape[0]:
        x = xs[i]
        y = ys[i]
        (a, b), pull = zm.vjp(axpy_pair, x, y)
        dx, dy = pull((0.0, 2.0))
        J = zm.jacrev(axpy_pair)(x, y)
        out[i, 0] = dx + a + b
        out[i, 1] = dy + J[0] + J[1]


def test_forward_sweep_is_shared_and_zero_cotangents_are_symbolic():
    """`out, pull = zm.vjp(f, ...)`: once inlined, the pullback's forward sweep is the call's;
    a zero cotangent (and jacrev's basis) seeds nothing, so no 0 * x is left."""
    text = vjp_then_store.specialize(np.zeros(2), np.zeros(2), np.zeros((2, 2))).ir()
    assert "call_derivative" not in text and "func.call" not in text
    assert text.count("math.sin") == 1 and "math.cos" not in text   # d/dy never needed
    assert "value = 0.0" not in text
    x, y = np.random.default_rng(2).standard_normal((2, 5))
    out = np.zeros((5, 2))
    vjp_then_store.on("cpu")[1, 8](x, y, out)
    np.testing.assert_allclose(out[:, 0], 4 * x + x * np.sin(y) + x * x + y, rtol=1e-14)
    np.testing.assert_allclose(out[:, 1], 2 + np.sin(y) + 2 * x, rtol=1e-14)


@zm.func
def two_results(x):
    return (x, 2.0 * x)


@zm.kernel
def grad_of_pair(xs):
    i = zm.grid(1)
    xs[i] = zm.grad(two_results)(xs[i])


@zm.kernel
def wrong_cotangent(xs):
    i = zm.grid(1)
    out, pull = zm.vjp(two_results, xs[i])
    xs[i] = pull(1.0)[0]


def test_errors_name_the_line():
    x = np.zeros(4)
    with pytest.raises(zm.CompileError, match=r"zm.grad: two_results must return one float"):
        grad_of_pair.on("interp")[1, 4](x)
    with pytest.raises(zm.CompileError, match=r"the cotangent must be a tuple of 2"):
        wrong_cotangent.on("interp")[1, 4](x)
    with pytest.raises(TypeError, match="evaluated inside kernels"):
        zm.vjp(two_results, 1.0)
    with pytest.raises(TypeError, match="evaluated inside kernels"):
        zm.grad(two_results)(1.0)
    with pytest.raises(TypeError, match="takes no argnums"):
        zm.grad(grad_of_pair, argnums=1)
