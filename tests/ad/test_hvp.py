"""Hessian-vector products of kernels: `zm.jvp(zm.grad(k))` (forward over reverse) and `zm.hvp`.

For each kernel F and a random seed w, H is the Hessian of <w, F(x)> in all differentiated
inputs together; H v from one launch must equal the central difference of the gradient along v
(float64, both from `zm.grad`), the closed form where there is one, and be symmetric:
<H u, v> = <u, H v>. Each kernel exercises what the reverse sweep emits for it: atomics into
shadows, shared shadows and barriers, the gathering adjoint of a stencil (and its consuming
kernel), per-thread and global tapes, replayed loops."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm
from ad import kernels as K
from ad.test_corpus_grad import DIFFERENTIABLE
from zymo.backend.nvptx import ptxas
from zymo.diagnostics import LaunchError

BACKENDS = ("interp", "cpu")


# ==== kernels =================================================================================
@zm.kernel
def exp_sin_tanh(x, z, y):
    """Elementwise, transcendental, two inputs: a 2x2 Hessian block per element."""
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = math.exp(x[i]) * math.sin(z[i]) + math.tanh(x[i] * z[i])


@zm.kernel
def log_cosh_loss(x, out):
    """A scalar loss summed with an atomic."""
    i = zm.grid(1)
    if i < x.shape[0]:
        zm.atomic.add(out, 0, math.log(math.cosh(x[i])) + x[i] * x[i] * x[i])


@zm.kernel
def shared_reduce(x, out):
    """A block's tree reduction in shared memory with barriers, then an atomic per block."""
    s = zm.shared.array(64, zm.f64)
    t = zm.threadIdx.x
    i = zm.grid(1)
    s[t] = math.sin(x[i]) * x[i] if i < x.shape[0] else 0.0
    zm.syncthreads()
    stride = 32
    while stride > 0:
        if t < stride:
            s[t] += s[t + stride]
        zm.syncthreads()
        stride //= 2
    if t == 0:
        zm.atomic.add(out, 0, s[0] * s[0])


@zm.kernel
def row_recurrence(a, x, y):
    """A loop with a carried value over a row whose length comes from the array (a global
    tape), and a read of a shared vector x by every thread (atomic adjoints)."""
    r = zm.grid(1)
    if r < a.shape[0]:
        acc = 0.0
        for k in range(a.shape[1]):
            acc = math.sin(acc) * a[r, k] + x[k] * acc + x[k]
        y[r] = acc


@zm.kernel
def scaled_exp(a, x, y):
    """An Active scalar: its adjoint sums over all threads."""
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = math.exp(a * x[i]) / (1.0 + a * a)


# ==== helpers =================================================================================
class Case:
    """A kernel and its arguments: ("in", array) differentiated inputs, ("out", shape)
    outputs seeded with w, ("active", float), ("const", value)."""

    def __init__(self, name, kernel, grid, block, make):
        self.name, self.kernel, self.grid, self.block, self.make = name, kernel, grid, block, make

    def __repr__(self):
        return self.name


def _there(array, backend):
    return zm.to_device(array) if backend == "cuda" else array


def _back(value):
    return value.copy_to_host() if hasattr(value, "copy_to_host") else value


def _activities(spec, seeds, backend="cpu"):
    args = []
    for k, (role, value) in enumerate(spec):
        if role == "in":
            args.append(zm.Duplicated(_there(np.array(value, np.float64), backend),
                                      _there(np.zeros_like(value), backend)))
        elif role == "out":
            args.append(zm.Duplicated(_there(np.zeros(value), backend),
                                      _there(seeds[k].copy(), backend)))
        elif role == "const" and isinstance(value, np.ndarray):
            args.append(_there(value, backend))
        elif role == "active":
            args.append(zm.Active(float(value)))
        else:
            args.append(value)
    return args


def gradient(case, spec, seeds, backend):
    """d<w, F>/d input, per differentiated argument (a dict)."""
    args = _activities(spec, seeds, backend)
    adjoints = iter(zm.grad(case.kernel).on(backend)[case.grid, case.block](*args))
    out = {}
    for k, (role, _) in enumerate(spec):
        if role == "in":
            out[k] = _back(args[k].shadow)
        elif role == "active":
            out[k] = np.float64(next(adjoints))
    return out


def hessian_times(case, spec, seeds, direction, backend):
    args = _activities(spec, seeds, backend)
    v = [direction.get(k) for k in range(len(spec))]
    got = zm.hvp(case.kernel, case.grid, case.block, *args, v=v, backend=backend)
    return {k: np.asarray(_back(got[k])) for k in direction}


def shifted(spec, direction, h):
    return [(role, value + h * direction[k]) if k in direction else (role, value)
            for k, (role, value) in enumerate(spec)]


def finite_difference(case, spec, seeds, direction, backend, h=1e-5):
    up = gradient(case, shifted(spec, direction, h), seeds, backend)
    down = gradient(case, shifted(spec, direction, -h), seeds, backend)
    return {k: (up[k] - down[k]) / (2 * h) for k in direction}


def random_point(case, seed=0):
    rng = np.random.default_rng(seed)
    spec = case.make(rng)
    seeds = {k: rng.standard_normal(value) for k, (role, value) in enumerate(spec)
             if role == "out"}
    return spec, seeds, rng


def random_direction(spec, rng):
    return {k: (rng.standard_normal(np.shape(value)) if np.ndim(value) else
                float(rng.standard_normal()))
            for k, (role, value) in enumerate(spec) if role in ("in", "active")}


def dot(a: dict, b: dict) -> float:
    return sum(float(np.vdot(a[k], b[k])) for k in a)


CASES = [
    Case("exp_sin_tanh", exp_sin_tanh, 2, 64, lambda rng: [
        ("in", rng.standard_normal(100)), ("in", rng.standard_normal(100)), ("out", 100)]),
    Case("log_cosh_loss", log_cosh_loss, 2, 64, lambda rng: [
        ("in", rng.standard_normal(100)), ("out", 1)]),
    Case("shared_reduce", shared_reduce, 2, 64, lambda rng: [
        ("in", rng.standard_normal(100)), ("out", 1)]),
    Case("nonlinear_stencil", K.nonlinear_stencil, 2, 64, lambda rng: [
        ("in", rng.standard_normal(100)), ("out", 100)]),
    Case("static_power", K.static_power, 2, 64, lambda rng: [
        ("in", rng.standard_normal(100)), ("out", 100)]),
    Case("power_loop", K.power_loop, 2, 64, lambda rng: [
        ("in", rng.standard_normal(100)), ("const", rng.integers(0, 5, 100).astype(np.int32)),
        ("out", 100)]),
    Case("row_recurrence", row_recurrence, 1, 32, lambda rng: [
        ("in", 0.5 * rng.standard_normal((20, 7))), ("in", 0.5 * rng.standard_normal(7)),
        ("out", 20)]),
    Case("dense", K.dense, 1, 16, lambda rng: [
        ("in", 0.5 * rng.standard_normal((4, 5))), ("in", 0.5 * rng.standard_normal(4)),
        ("in", rng.standard_normal((10, 5))), ("out", (10, 4))]),
    Case("scaled_exp", scaled_exp, 2, 64, lambda rng: [
        ("active", 0.7), ("in", rng.standard_normal(100)), ("out", 100)]),
]


# ==== against finite differences of the gradient, and symmetric ==============================
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_hvp_matches_finite_differences_of_the_gradient(case, backend):
    spec, seeds, rng = random_point(case)
    direction = random_direction(spec, rng)
    exact = hessian_times(case, spec, seeds, direction, backend)
    fd = finite_difference(case, spec, seeds, direction, backend)
    for k in direction:
        scale = max(1.0, float(np.max(np.abs(fd[k]))))
        np.testing.assert_allclose(exact[k], fd[k], rtol=1e-6, atol=1e-7 * scale,
                                   err_msg=f"{case.name}: argument {k}")
        assert np.any(exact[k] != 0) or np.all(fd[k] == 0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_hvp_is_symmetric(case, backend):
    spec, seeds, rng = random_point(case, seed=1)
    u, v = random_direction(spec, rng), random_direction(spec, rng)
    hu = hessian_times(case, spec, seeds, u, backend)
    hv = hessian_times(case, spec, seeds, v, backend)
    assert dot(hu, v) == pytest.approx(dot(u, hv), rel=1e-11, abs=1e-11)


# ==== closed forms ===========================================================================
@pytest.mark.parametrize("backend", BACKENDS)
def test_elementwise_hessian_in_closed_form(backend):
    rng = np.random.default_rng(5)
    x, z, w = rng.standard_normal(100), rng.standard_normal(100), rng.standard_normal(100)
    vx, vz = rng.standard_normal(100), rng.standard_normal(100)
    dx, dz = np.zeros(100), np.zeros(100)
    hx, hz, _ = zm.hvp(exp_sin_tanh, 2, 64, zm.Duplicated(x, dx), zm.Duplicated(z, dz),
                       zm.Duplicated(np.zeros(100), w.copy()), v=(vx, vz, None),
                       backend=backend)
    t = np.tanh(x * z)
    sech2 = 1.0 - t * t
    fxx = np.exp(x) * np.sin(z) - 2.0 * t * sech2 * z * z
    fzz = -np.exp(x) * np.sin(z) - 2.0 * t * sech2 * x * x
    fxz = np.exp(x) * np.cos(z) + sech2 - 2.0 * t * sech2 * x * z
    np.testing.assert_allclose(hx, w * (fxx * vx + fxz * vz), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(hz, w * (fxz * vx + fzz * vz), rtol=1e-12, atol=1e-14)
    # the gradient lands in the shadows, as zm.grad leaves it
    np.testing.assert_allclose(dx, w * (np.exp(x) * np.sin(z) + sech2 * z), rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_shared_reduction_hessian_in_closed_form(backend):
    """L = sum over blocks of (sum_i x_i sin x_i)^2: H = 2 g g^T + 2 S diag(g'), per block."""
    rng = np.random.default_rng(6)
    x, v = rng.standard_normal(100), rng.standard_normal(100)
    (hx, _) = zm.hvp(shared_reduce, 2, 64, zm.Duplicated(x, np.zeros(100)),
                     zm.Duplicated(np.zeros(1), np.ones(1)), v=(v, None), backend=backend)
    g = np.sin(x) + x * np.cos(x)
    gp = 2.0 * np.cos(x) - x * np.sin(x)
    expected = np.empty(100)
    for block in (slice(0, 64), slice(64, 100)):
        s = float(np.sum(x[block] * np.sin(x[block])))
        expected[block] = 2.0 * g[block] * np.dot(g[block], v[block]) \
            + 2.0 * s * gp[block] * v[block]
    np.testing.assert_allclose(hx, expected, rtol=1e-12, atol=1e-13)


def test_active_scalar_returns_the_adjoint_and_its_tangent():
    """y = exp(a x) / (1 + a^2): the launch returns (dL/da, its tangent) for zm.Active a."""
    rng = np.random.default_rng(7)
    x, w, vx = rng.standard_normal(50), rng.standard_normal(50), rng.standard_normal(50)
    a, va = 0.3, 0.8
    dx, hx = np.zeros(50), np.zeros(50)
    (pair,) = zm.jvp(zm.grad(scaled_exp)).on("cpu")[1, 64](
        zm.Duplicated(zm.Active(a), va),
        zm.Duplicated(zm.Duplicated(x, dx), zm.Duplicated(vx, hx)),
        zm.Duplicated(zm.Duplicated(np.zeros(50), w.copy()),
                      zm.Duplicated(np.zeros(50), np.zeros(50))))
    d = 1.0 + a * a
    e = np.exp(a * x)
    f_a = e * x / d - 2 * a * e / d ** 2
    f_aa = e * x * x / d - 4 * a * e * x / d ** 2 - 2 * e / d ** 2 + 8 * a * a * e / d ** 3
    f_ax = e * (1 + a * x) / d - 2 * a * a * e / d ** 2
    f_xx = a * a * e / d
    assert pair[0] == pytest.approx(float(np.sum(w * f_a)), rel=1e-12)
    assert pair[1] == pytest.approx(float(np.sum(w * (f_aa * va + f_ax * vx))), rel=1e-12)
    np.testing.assert_allclose(hx, w * (f_ax * va + f_xx * vx), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_python_float_direction_along_an_f32_scalar(backend):
    """An f32 Active scalar's direction given as a Python float is an f32 direction (as in
    zm.jvp): the same H v as a NumPy f32 direction, close to the f64 one."""
    rng = np.random.default_rng(3)
    x, w, vx = rng.standard_normal(50), rng.standard_normal(50), rng.standard_normal(50)
    results = []
    for dtype, va in ((np.float32, 0.8), (np.float32, np.float32(0.8)), (np.float64, 0.8)):
        hx = np.zeros(50, dtype)
        (pair,) = zm.jvp(zm.grad(scaled_exp)).on(backend)[1, 64](
            zm.Duplicated(zm.Active(dtype(0.3)), va),
            zm.Duplicated(zm.Duplicated(x.astype(dtype), np.zeros(50, dtype)),
                          zm.Duplicated(vx.astype(dtype), hx)),
            zm.Duplicated(zm.Duplicated(np.zeros(50, dtype), w.astype(dtype)),
                          zm.Duplicated(np.zeros(50, dtype), np.zeros(50, dtype))))
        results.append((float(pair[1]), hx.astype(np.float64)))
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert results[0][0] == pytest.approx(results[2][0], rel=1e-4)
    np.testing.assert_allclose(results[0][1], results[2][1], rtol=1e-4, atol=1e-5)


# ==== several directions at once ==============================================================
@pytest.mark.parametrize("backend", BACKENDS)
def test_width_n_gives_the_whole_hessian(backend):
    """Directions along the identity basis of (x, z): the columns of the 2n x 2n Hessian,
    symmetric, block diagonal per element as in closed form."""
    n = 6
    rng = np.random.default_rng(10)
    x, z, w = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(n)
    basis = np.eye(2 * n)
    hx, hz, _ = zm.hvp(exp_sin_tanh, 1, 8, zm.Duplicated(x, np.zeros(n)),
                       zm.Duplicated(z, np.zeros(n)), zm.Duplicated(np.zeros(n), w.copy()),
                       v=(basis[:, :n], basis[:, n:], None), width=2 * n, backend=backend)
    hessian = np.concatenate([hx, hz], axis=1)   # row k: H e_k
    np.testing.assert_allclose(hessian, hessian.T, rtol=1e-13, atol=1e-14)
    t = np.tanh(x * z)
    sech2 = 1.0 - t * t
    expected = np.zeros((2 * n, 2 * n))
    idx = np.arange(n)
    expected[idx, idx] = w * (np.exp(x) * np.sin(z) - 2.0 * t * sech2 * z * z)
    expected[n + idx, n + idx] = w * (-np.exp(x) * np.sin(z) - 2.0 * t * sech2 * x * x)
    expected[idx, n + idx] = expected[n + idx, idx] = \
        w * (np.exp(x) * np.cos(z) + sech2 - 2.0 * t * sech2 * x * z)
    np.testing.assert_allclose(hessian, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ("shared_reduce", "nonlinear_stencil", "row_recurrence",
                                  "scaled_exp"))
def test_width_w_equals_w_launches_of_width_1(name):
    case = next(c for c in CASES if c.name == name)
    spec, seeds, rng = random_point(case, seed=11)
    directions = [random_direction(spec, rng) for _ in range(3)]
    args = _activities(spec, seeds)
    stacked = [np.array([d[k] for d in directions]) if k in directions[0] else None
               for k in range(len(spec))]
    together = zm.hvp(case.kernel, case.grid, case.block, *args, v=stacked, width=3,
                      backend="cpu")
    for j, direction in enumerate(directions):
        alone = hessian_times(case, spec, seeds, direction, "cpu")
        for k in direction:
            np.testing.assert_array_equal(np.asarray(together[k])[j], alone[k])


# ==== the nested activities ==================================================================
def test_output_tangent_is_the_jvp_and_the_seed_is_consumed():
    rng = np.random.default_rng(8)
    x, v, w = rng.standard_normal(40), rng.standard_normal(40), rng.standard_normal(40)
    y, ty, seed, tseed = np.zeros(40), np.zeros(40), w.copy(), np.zeros(40)
    hx = np.zeros(40)
    zm.jvp(zm.grad(K.exp_cos)).on("cpu")[1, 64](
        zm.Duplicated(zm.Duplicated(x, np.zeros(40)), zm.Duplicated(v, hx)),
        zm.Duplicated(zm.Duplicated(y, seed), zm.Duplicated(ty, tseed)))
    np.testing.assert_allclose(y, np.exp(x) * np.cos(x), rtol=1e-14)
    np.testing.assert_allclose(ty, np.exp(x) * (np.cos(x) - np.sin(x)) * v, rtol=1e-13)
    assert not seed.any() and not tseed.any()
    np.testing.assert_allclose(hx, w * -2.0 * np.exp(x) * np.sin(x) * v, rtol=1e-12,
                               atol=1e-14)


def test_reverse_only_and_forward_only_arguments():
    """zm.Const(zm.Duplicated(x, dx)): no direction along x; zm.Duplicated(z, vz): z is Const
    in reverse, so hx is the mixed derivative d(dL/dx)/dz . vz."""
    rng = np.random.default_rng(9)
    x, z, w = rng.standard_normal(30), rng.standard_normal(30), rng.standard_normal(30)
    vz, hx = rng.standard_normal(30), np.zeros(30)
    dx = np.zeros(30)
    fk = zm.jvp(zm.grad(exp_sin_tanh)).on("interp")
    fk[1, 32](zm.Duplicated(zm.Duplicated(x, dx), zm.Duplicated(np.zeros(30), hx)),
              zm.Duplicated(z, vz),
              zm.Duplicated(zm.Duplicated(np.zeros(30), w.copy()),
                            zm.Duplicated(np.zeros(30), np.zeros(30))))
    t = np.tanh(x * z)
    fxz = np.exp(x) * np.cos(z) + (1 - t * t) - 2.0 * t * (1 - t * t) * x * z
    np.testing.assert_allclose(hx, w * fxz * vz, rtol=1e-12, atol=1e-14)
    dx2 = np.zeros(30)
    fk[1, 32](zm.Const(zm.Duplicated(x, dx2)), zm.Duplicated(z, vz),
              zm.Duplicated(np.zeros(30), np.zeros(30)))
    np.testing.assert_allclose(dx2, dx * 0, atol=0)   # seed zero: no gradient


def test_global_tape_gets_a_tangent_tape():
    case = next(c for c in CASES if c.name == "row_recurrence")
    spec, seeds, _ = random_point(case)
    fk = zm.jvp(zm.grad(case.kernel)).on("cpu")
    a, x = spec[0][1], spec[1][1]
    fk[case.grid, case.block](
        zm.Duplicated(zm.Duplicated(a, np.zeros_like(a)), zm.Duplicated(a * 0, a * 0)),
        zm.Duplicated(zm.Duplicated(x, np.zeros_like(x)), zm.Duplicated(x * 0, x * 0)),
        zm.Duplicated(zm.Duplicated(np.zeros(20), seeds[2].copy()),
                      zm.Duplicated(np.zeros(20), np.zeros(20))))
    assert fk.last.primal.tapes, "row_recurrence was meant to need a global tape"


def test_misused_nesting_is_a_launch_error():
    x = np.ones(8)
    fk = zm.jvp(zm.grad(K.square)).on("cpu")
    with pytest.raises(LaunchError, match="zm.Duplicated\\(vx, hx\\)"):
        fk[1, 8](zm.Duplicated(zm.Duplicated(x, np.zeros(8)), np.zeros(8)),
                 zm.Duplicated(np.zeros(8), np.ones(8)))
    with pytest.raises(LaunchError, match="same shape"):
        fk[1, 8](zm.Duplicated(zm.Duplicated(x, np.zeros(8)),
                               zm.Duplicated(np.zeros(4), np.zeros(8))),
                 zm.Duplicated(np.zeros(8), np.ones(8)))
    shadow = np.zeros(8)
    with pytest.raises(LaunchError, match="shares memory"):
        fk[1, 8](zm.Duplicated(zm.Duplicated(x, shadow), zm.Duplicated(np.zeros(8), shadow)),
                 zm.Duplicated(np.zeros(8), np.ones(8)))
    with pytest.raises(LaunchError, match="Const"):
        zm.hvp(K.square, 1, 8, x, zm.Duplicated(np.zeros(8), np.ones(8)), v=(x, None),
               backend="cpu")
    with pytest.raises(LaunchError, match="leading axis of 2"):
        zm.jvp(zm.grad(K.square), width=2).on("cpu")[1, 8](
            zm.Duplicated(zm.Duplicated(x, np.zeros(8)), zm.Duplicated(x * 0, x * 0)),
            zm.Duplicated(np.zeros(8), np.ones(8)))
    with pytest.raises(ValueError, match="positive int"):
        zm.jvp(zm.grad(K.square), width=0)


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("kernel, arrays", [(shared_reduce, 2), (K.nonlinear_stencil, 2),
                                            (row_recurrence, 3), (K.dense, 4)],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_hvp_kernel_lowers_to_ptx_that_ptxas_assembles(kernel, arrays):
    """Shared shadows and barriers, a gathering gradient's consuming kernel, a global tape and
    its tangent, loops over shared weights: each HVP kernel assembles for sm_90."""
    one, two = zm.Array(zm.f64, 1), zm.Array(zm.f64, 2)
    types = {shared_reduce: (one, one), K.nonlinear_stencil: (one, one),
             row_recurrence: (two, one, one), K.dense: (two, one, two, two)}[kernel]
    assert len(types) == arrays
    spec = zm.jvp(zm.grad(kernel)).specialize(
        *(zm.Duplicated(zm.Duplicated(t, t), zm.Duplicated(t, t)) for t in types))
    ptx = spec.ptx("sm_90")
    ptxas.assemble(ptx, "sm_90")
    if kernel is shared_reduce:
        assert ".shared" in ptx and "bar.sync" in ptx
    if spec.consume is not None:
        ptxas.assemble(spec.consume.ptx("sm_90"), "sm_90")
    assert kernel is not K.nonlinear_stencil or spec.consume is not None


def test_block_private_shadows_give_way_where_tangents_would_overflow_shared_memory():
    """The dense layer's gradient keeps block-private copies of dW and db in shared memory;
    their tangents would double it past CUDA's 48 KiB of static shared memory, so forward over
    reverse takes the gradient without them (every shadow update atomic)."""
    from zymo.runtime import hvp
    one, two = zm.Array(zm.f64, 1), zm.Array(zm.f64, 2)
    types = (two, one, two, two)
    grad = zm.grad(K.dense).specialize(*(zm.Duplicated(t, t) for t in types))
    assert grad.shared_carveout is not None   # the private copies are its shared memory
    assert 2 * hvp._static_shared_bytes(grad.optimized) > hvp.STATIC_SHARED_BYTES
    spec = zm.jvp(zm.grad(K.dense)).specialize(
        *(zm.Duplicated(zm.Duplicated(t, t), zm.Duplicated(t, t)) for t in types))
    assert not spec.primal.plain_updates and hvp.fits(spec)
    small = zm.jvp(zm.grad(shared_reduce)).specialize(
        *(zm.Duplicated(zm.Duplicated(one, one), zm.Duplicated(one, one)) for _ in range(2)))
    assert small.primal.plain_updates   # nothing to give way


# ==== the differentiable corpus ===============================================================
# kernels that compute in float32 inside (shared tiles) whatever their arguments' precision:
# the differences of their gradient need a larger step, and agree to float32's accuracy
FLOAT32_INSIDE = {"matmul_tiled_64x48x32": (1e-2, 1e-4), "matmul_tiled_37x29x41": (1e-2, 1e-4),
                  "nbody_accel": (1e-3, 3e-3)}


def _widened(value):
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value.astype(np.float64)
    return float(value) if isinstance(value, (float, np.floating)) else value


def _corpus_spec(args):
    return [("in", a) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else
            ("active", a) if isinstance(a, float) else ("const", a) for a in args]


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda case: case.name)
def test_corpus_hvp_matches_finite_differences(case):
    """Every float array is an input and an output (its shadow a random seed), every float
    scalar Active: <u, H v> against the central difference of <u, gradient> along v."""
    import zlib
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    spec = _corpus_spec([_widened(a) for a in case.make_args(rng)])
    seeds = {k: rng.standard_normal(np.shape(value)) for k, (role, value) in enumerate(spec)
             if role == "in"}
    u, v = random_direction(spec, rng), random_direction(spec, rng)
    runner = Case(case.name, case.kernel, case.grid, case.block, None)
    h, rtol = FLOAT32_INSIDE.get(case.name, (1e-5, 1e-7))
    exact = dot(u, hessian_times(runner, spec, seeds, v, "interp"))
    up = gradient(runner, shifted(spec, v, h), seeds, "interp")
    down = gradient(runner, shifted(spec, v, -h), seeds, "interp")
    fd = dot(u, {k: (up[k] - down[k]) / (2 * h) for k in u})
    assert exact == pytest.approx(fd, rel=rtol, abs=1e-9)
