"""Forward mode: `zm.jvp` of kernels (one direction and multivariate duals), device-level
`zm.jvp` / `zm.jacfwd` inside kernels, errors, and the dot-product test against `zm.grad`."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm
from ad import kernels as K

BACKENDS = ("interp", "cpu")


@zm.kernel
def sin_axpy(a, x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = a * math.sin(x[i]) + y[i]


@pytest.mark.parametrize("backend", BACKENDS)
def test_scalar_and_array_tangents_closed_form(backend):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(100), rng.standard_normal(100)
    tx, ty = rng.standard_normal(100), rng.standard_normal(100)
    y0, ty0 = y.copy(), ty.copy()
    zm.jvp(sin_axpy).on(backend)[1, 128](zm.Duplicated(2.0, 0.5), zm.Duplicated(x, tx),
                                          zm.Duplicated(y, ty))
    np.testing.assert_allclose(y, 2 * np.sin(x) + y0, rtol=1e-13)
    np.testing.assert_allclose(ty, 0.5 * np.sin(x) + 2 * np.cos(x) * tx + ty0, rtol=1e-13)


@pytest.mark.parametrize("backend", BACKENDS)
def test_width_three_equals_three_single_directions(backend):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(64)
    tangents = rng.standard_normal((3, 64))
    out = np.zeros(64)
    outs = np.zeros((3, 64))    # one array with a leading axis of W
    zm.jvp(K.exp_cos, width=3).on(backend)[1, 64](zm.BatchDuplicated(x, tangents.copy()),
                                                   zm.BatchDuplicated(out, outs))
    for k in range(3):
        one = np.zeros(64)
        zm.jvp(K.exp_cos).on(backend)[1, 64](zm.Duplicated(x, tangents[k].copy()),
                                             zm.Duplicated(np.zeros(64), one))
        np.testing.assert_array_equal(outs[k], one)
    assert np.abs(outs).max() > 0


def test_multivariate_duals_share_the_partials():
    """W directions cost one evaluation of the partials: the IR has one cos per sin."""
    x = np.zeros(8)
    text = zm.jvp(sin_axpy, width=5).specialize(
        zm.BatchDuplicated(1.0, (1.0,) * 5), zm.BatchDuplicated(x, (x,) * 5),
        zm.BatchDuplicated(x, (x,) * 5)).ir()
    assert text.count("math.cos") == 1 and text.count("math.sin") == 1
    assert text.count("memory.store") == 6


def test_launch_errors():
    x = np.zeros(8)
    with pytest.raises(zm.LaunchError, match="reverse mode"):
        zm.jvp(sin_axpy)[1, 8](zm.Active(1.0), zm.Duplicated(x, x.copy()), x.copy())
    with pytest.raises(zm.LaunchError, match="width 3"):
        zm.jvp(sin_axpy, width=3)[1, 8](1.0, zm.BatchDuplicated(x, (x, x)), x.copy())
    with pytest.raises(zm.LaunchError, match="same shape"):
        zm.jvp(sin_axpy)[1, 8](1.0, zm.Duplicated(x, np.zeros(9)), x.copy())
    with pytest.raises(TypeError, match="inside kernels"):
        zm.jvp(axpy_pair, (1.0,), (1.0,))


@zm.kernel
def lost(x, tmp, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        tmp[i] = x[i] * 2.0
        y[i] = tmp[i]


@zm.kernel
def atomic_max_of_active(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        zm.atomic.max(y, 0, x[i])


def test_compile_errors_name_the_line():
    x = np.zeros(8)
    with pytest.raises(zm.CompileError, match="`tmp` has no tangent .* read back"):
        zm.jvp(lost)[1, 8](zm.Duplicated(x, x.copy()), np.zeros(8), zm.Duplicated(x, x.copy()))
    with pytest.raises(zm.CompileError, match="atomic max would need the winning thread"):
        zm.jvp(atomic_max_of_active)[1, 8](zm.Duplicated(x, x.copy()),
                                           zm.Duplicated(np.zeros(1), np.zeros(1)))


# ---- device level -------------------------------------------------------------------------
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


@zm.kernel
def device_derivatives(xs, ys, qs, out, jac):
    i = zm.grid(1)
    if i < xs.shape[0]:
        (a, b), (ta, tb) = zm.jvp(axpy_pair, (xs[i], ys[i]), (1.0, 0.0))
        J = zm.jacfwd(axpy_pair, argnums=(0, 1))(xs[i], ys[i])
        out[i, 0] = ta
        out[i, 1] = tb
        out[i, 2] = J[0][0]
        out[i, 3] = J[0][1]
        out[i, 4] = J[1][0]
        out[i, 5] = J[1][1]
        q = (qs[i, 0], qs[i, 1], qs[i, 2], qs[i, 3], qs[i, 4], qs[i, 5], qs[i, 6],
             qs[i, 7], qs[i, 8], qs[i, 9], qs[i, 10], qs[i, 11], qs[i, 12], qs[i, 13])
        M = zm.jacfwd(many, 0, width=5)(q)     # three chunks: 5 + 5 + 4 directions
        r = 0
        for row in M:                           # loops over tuples are unrolled
            c = 0
            for entry in row:
                jac[i, r, c] = entry
                c += 1
            r += 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_device_level_jvp_and_jacfwd(backend):
    rng = np.random.default_rng(4)
    n = 20
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    q = rng.standard_normal((n, 14)) * 0.5
    out, jac = np.zeros((n, 6)), np.zeros((n, 3, 14))
    device_derivatives.on(backend)[1, 32](x, y, q, out, jac)
    expected = np.stack([np.sin(y), 2 * x, np.sin(y), x * np.cos(y), 2 * x, np.ones(n)], 1)
    np.testing.assert_allclose(out, expected, rtol=1e-14, atol=1e-15)
    # central differences of the device function run as Python on the host
    h = 1e-6
    for i in range(0, n, 7):
        for c in range(14):
            up, down = q[i].copy(), q[i].copy()
            up[c] += h
            down[c] -= h
            fd = (np.array(many(tuple(up))) - np.array(many(tuple(down)))) / (2 * h)
            np.testing.assert_allclose(jac[i, :, c], fd, rtol=1e-7, atol=1e-8)


def test_default_width_follows_forwarddiff():
    assert [zm.default_width(n) for n in (1, 5, 12, 13, 24, 25, 100)] == [1, 5, 12, 7, 12, 9, 12]


def test_seeded_jacobian_starts_sparse():
    """Identity seeds are constants: the first layer multiplies by nothing."""
    spec = device_derivatives.specialize(np.zeros(2), np.zeros(2), np.zeros((2, 14)),
                                         np.zeros((2, 6)), np.zeros((2, 3, 14)))
    assert "call_derivative" not in spec.ir() and "func.call" not in spec.ir()


# ---- the two modes agree ------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_dot_product_test_against_reverse_mode(backend):
    rng = np.random.default_rng(5)
    W, b = rng.standard_normal((5, 7)) * 0.3, rng.standard_normal(5)
    x = rng.standard_normal((70, 7))

    def dup(a):
        return zm.Duplicated(a, np.zeros_like(a))

    report = zm.check_grad(K.dense, 2, 64, dup(W), dup(b), dup(x), dup(np.zeros((70, 5))),
                           backend=backend)
    rows = [row for row in report.rows if row.kind == "dot-product"]
    assert len(rows) == 1 and rows[0].ok and abs(rows[0].reverse) > 1e-3, str(report)


@pytest.mark.parametrize("arch", ("sm_80", "sm_90"))
def test_tangent_ptx_is_accepted_by_ptxas(arch):
    from zymo.backend.nvptx import ptxas
    x = np.zeros(64)
    specs = [
        zm.jvp(sin_axpy, width=5).specialize(zm.BatchDuplicated(1.0, (1.0,) * 5),
                                             zm.BatchDuplicated(x, (x,) * 5),
                                             zm.BatchDuplicated(x, (x,) * 5)),
        zm.jvp(K.block_reduce).specialize(zm.Duplicated(x, x), zm.Duplicated(x, x)),
        zm.jvp(K.warp_sum, width=2).specialize(zm.BatchDuplicated(x, (x, x)),
                                               zm.BatchDuplicated(x, (x, x))),
        device_derivatives.specialize(x, x, np.zeros((2, 14)), np.zeros((2, 6)),
                                      np.zeros((2, 3, 14))),
    ]
    for spec in specs:
        report = ptxas.assemble(spec.ptx(arch), arch)
        assert report.spill_stores == 0, report.log
