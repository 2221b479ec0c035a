"""Held-out-style forward-mode checks: kernels and device functions written the way a CFD or
physics user would, their `zm.jvp` tangents (one direction, and W = 1, 3, 5 directions with
tangents as tuples of arrays or as one array with a leading axis W) compared with central
finite differences of the primal kernel in float64, and device-level `zm.jvp` / `zm.jacfwd` /
`zm.jacrev` / `zm.vjp` compared with each other and with complex steps of the same Python source.

The `test_bug_*` tests reproduce bugs found while writing this file, kept as regression tests."""
from __future__ import annotations

import math
import types

import numpy as np
import pytest

import zymo as zm
from zymo.lang.decorators import DeviceFunction

BACKENDS = ("interp", "cpu")
GAMMA = 1.4


# ==== helpers =================================================================================
def _copy(v):
    return v.copy() if isinstance(v, np.ndarray) else v


def _shift(a, d, h):
    if isinstance(a, np.ndarray):
        return (a + h * d).astype(a.dtype)
    return type(a)(a + h * d)


def _launch(kernel, grid, block, args, backend):
    values = [_copy(a) for a in args]
    kernel.on(backend)[grid, block](*values)
    return values


def fd_jvp(kernel, grid, block, args, direction, backend, h=1e-6):
    """Central differences of every array in `direction` (all of them inputs and outputs)."""
    plus = [_shift(a, direction[k], h) if k in direction else _copy(a) for k, a in enumerate(args)]
    minus = [_shift(a, direction[k], -h) if k in direction else _copy(a)
             for k, a in enumerate(args)]
    up = _launch(kernel, grid, block, plus, backend)
    down = _launch(kernel, grid, block, minus, backend)
    return {k: (up[k] - down[k]) / (2 * h) for k in direction if isinstance(args[k], np.ndarray)}


def ad_jvp(kernel, grid, block, args, directions, backend, form):
    """zm.jvp of `kernel` along `directions` (W dicts argument -> direction). form: "dup"
    (zm.Duplicated, W = 1), "tuple" (BatchDuplicated with a tuple of W arrays / W numbers) or
    "stacked" (BatchDuplicated with one array of leading axis W)."""
    width = len(directions)
    call, tangents = [], {}
    for k, a in enumerate(args):
        if k not in directions[0]:
            call.append(_copy(a))
            continue
        if isinstance(a, np.ndarray):
            if form == "stacked":
                stacked = np.stack([d[k] for d in directions]).astype(a.dtype)
                tangents[k] = stacked
                call.append(zm.BatchDuplicated(a.copy(), stacked))
            else:
                ts = tuple(np.array(d[k], dtype=a.dtype) for d in directions)
                tangents[k] = ts
                call.append(zm.Duplicated(a.copy(), ts[0]) if form == "dup"
                            else zm.BatchDuplicated(a.copy(), ts))
        else:
            ts = tuple(float(d[k]) for d in directions)
            call.append(zm.Duplicated(a, ts[0]) if form == "dup" else zm.BatchDuplicated(a, ts))
    derivative = zm.jvp(kernel) if form == "dup" else zm.jvp(kernel, width=width)
    derivative.on(backend)[grid, block](*call)
    return [{k: np.array(tangents[k][j]) for k in tangents} for j in range(width)]


def random_directions(args, diff, width, seed=0):
    rng = np.random.default_rng(seed)
    return [{k: (rng.standard_normal(np.shape(args[k])) if isinstance(args[k], np.ndarray)
                 else float(rng.standard_normal())) for k in diff} for _ in range(width)]


FORMS = ((1, "dup"), (1, "tuple"), (3, "tuple"), (5, "stacked"))


def check_kernel(kernel, grid, block, args, diff, backend, forms=FORMS, seed=0, rtol=1e-6,
                 atol=1e-8, h=1e-6, args_fd=None):
    """zm.jvp against central differences, for every (width, form); returns the last tangents."""
    last = None
    for width, form in forms:
        directions = random_directions(args, diff, width, seed)
        tangents = ad_jvp(kernel, grid, block, args, directions, backend, form)
        for j, d in enumerate(directions):
            fd = fd_jvp(kernel, grid, block, args_fd or args, d, backend, h)
            assert fd, "nothing checked"
            for k, expected in fd.items():
                np.testing.assert_allclose(tangents[j][k], expected, rtol=rtol, atol=atol,
                                           err_msg=f"{backend} width {width} {form}: "
                                                   f"direction {j}, argument {k}")
        last = tangents
    return last


# complex steps of the very same @zm.func source, re-bound to complex-safe math
class _ComplexMath:
    pi = math.pi
    sqrt = staticmethod(np.sqrt)
    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    tanh = staticmethod(np.tanh)

    @staticmethod
    def fabs(x):
        return -x if np.real(x) < 0 else x


def _cmax(*values):
    best = values[0]
    for v in values[1:]:
        if np.real(v) > np.real(best):
            best = v
    return best


def _cmin(*values):
    best = values[0]
    for v in values[1:]:
        if np.real(v) < np.real(best):
            best = v
    return best


def complex_version(f):
    py = f.py_func
    env = dict(py.__globals__)
    env.update(math=_ComplexMath, abs=_ComplexMath.fabs, max=_cmax, min=_cmin)
    for name, value in py.__globals__.items():
        if isinstance(value, DeviceFunction):
            env[name] = types.FunctionType(value.py_func.__code__, env, name)
    return types.FunctionType(py.__code__, env, py.__name__, py.__defaults__)


def complex_step_jacobian(f, parts, extra=(), h=1e-30):
    """d f / d (concatenated tuples `parts`), rows: flattened outputs."""
    flat = np.concatenate([np.asarray(p, float) for p in parts])
    sizes = [len(p) for p in parts]
    columns = []
    for c in range(len(flat)):
        z = flat.astype(complex)
        z[c] += h * 1j
        args, o = [], 0
        for s in sizes:
            args.append(tuple(z[o:o + s]))
            o += s
        columns.append(np.imag(np.array(f(*args, *extra))) / h)
    return np.stack(columns, 1)


# ==== kernel level ============================================================================
@zm.kernel
def math_mix(a, x, z, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        u = x[i]
        v = z[i]
        r = math.exp(u) * math.log(v) + math.sqrt(v) * math.pow(v, u) + math.sin(u) * math.cos(v)
        r += math.tanh(a * u) + math.atan2(u, v) + math.hypot(u, v) + abs(u) + min(u, v)
        r += max(u, a * v)
        y[i] = r


@pytest.mark.parametrize("backend", BACKENDS)
def test_math_functions_all_widths_and_forms(backend):
    rng = np.random.default_rng(0)
    n = 37
    x, z = rng.uniform(-1.5, 1.5, n), rng.uniform(0.3, 2.0, n)
    check_kernel(math_mix, 2, 32, [0.7, x, z, np.zeros(n)], (0, 1, 2), backend,
                 forms=FORMS + ((5, "tuple"), (1, "stacked"), (3, "stacked")))
    report = zm.check_jvp(math_mix, 2, 32, zm.Active(0.7), zm.Duplicated(x, np.zeros(n)),
                          zm.Duplicated(z, np.zeros(n)), zm.Duplicated(np.zeros(n), np.zeros(n)),
                          width=3, backend=backend)
    assert report.ok, str(report)


@zm.kernel
def branches(x, y, thr):
    i = zm.grid(1)
    if i >= x.shape[0]:
        return
    u = x[i]
    r = 0.0
    if u > thr:
        y[i] = u * u * math.exp(-u)
        return
    elif u < -thr:
        r = math.log1p(u * u)
    else:
        r = math.sin(u) if u > 0.0 else math.cos(u) * u
    y[i] = r * 2.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_dependent_branches_and_early_return(backend):
    rng = np.random.default_rng(1)
    x = rng.uniform(-3, 3, 40)
    x[np.abs(np.abs(x) - 1.2) < 1e-3] += 0.01
    x[np.abs(x) < 1e-3] += 0.01
    check_kernel(branches, 2, 32, [x, np.zeros(40), 1.2], (0, 1), backend)


@zm.kernel
def loops(x, n, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        u = x[i]
        acc = 0.0
        for k in range(4):
            acc = acc * u + (k + 1.0)
        p = u
        for k in range(n):
            p = 0.5 * p + math.sin(p) * acc * 0.1
        s = 0.0
        for j in range(y.shape[1]):
            s += p * (j + 1)
            y[i, j] = s * s


@pytest.mark.parametrize("backend", BACKENDS)
def test_static_and_runtime_trip_counts(backend):
    rng = np.random.default_rng(2)
    check_kernel(loops, 2, 32, [rng.uniform(-0.5, 0.5, 40), 3, np.zeros((40, 4))], (0, 2),
                 backend)
    report = zm.check_jvp(loops, 2, 32, zm.Duplicated(rng.uniform(-.5, .5, 40), np.zeros(40)), 5,
                          zm.Duplicated(np.zeros((40, 3)), np.zeros((40, 3))), width=5,
                          backend=backend)
    assert report.ok, str(report)


@zm.kernel
def newton_cubic(x, a, y, iters):
    """Solve u^3 + a u = x by Newton with a convergence test and break."""
    i = zm.grid(1)
    if i < x.shape[0]:
        u = x[i] / a[i]
        it = 0
        while True:
            f = u * u * u + a[i] * u - x[i]
            du = f / (3.0 * u * u + a[i])
            u = u - du
            it += 1
            if abs(du) < 1e-13 or it >= 60:
                break
        y[i] = u
        iters[i] = it


@pytest.mark.parametrize("backend", BACKENDS)
def test_newton_while_true_break_matches_implicit_derivative(backend):
    rng = np.random.default_rng(3)
    n = 40
    x, a = rng.uniform(-3, 3, n), rng.uniform(0.5, 2, n)
    args = [x, a, np.zeros(n), np.zeros(n, np.int32)]
    check_kernel(newton_cubic, 2, 32, args, (0, 1, 2), backend)
    u, tu = np.zeros(n), np.zeros(n)
    zm.jvp(newton_cubic).on(backend)[2, 32](zm.Duplicated(x.copy(), np.ones(n)), a,
                                             zm.Duplicated(u, tu), np.zeros(n, np.int32))
    np.testing.assert_allclose(tu, 1 / (3 * u * u + a), rtol=1e-12)


@zm.kernel
def while_count(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        k = 0
        while v < 10.0:
            v = v * 1.5 + 0.3
            k += 1
        y[i] = v + k


@pytest.mark.parametrize("backend", BACKENDS)
def test_while_with_data_dependent_trip_count(backend):
    x = np.random.default_rng(4).uniform(0.5, 3, 40)
    check_kernel(while_count, 2, 32, [x, np.zeros(40)], (0, 1), backend)


@zm.kernel
def smooth_shared(x, y, out):
    """3-point nonlinear smoothing through a shared tile with halo, then a block tree sum."""
    s = zm.shared.array(34, zm.f64)
    r = zm.shared.array(32, zm.f64)
    t = zm.threadIdx.x
    i = zm.grid(1)
    n = x.shape[0]
    s[t + 1] = x[i] if i < n else 0.0
    if t == 0:
        s[0] = x[i - 1] if i > 0 else 0.0
    if t == 31:
        s[33] = x[i + 1] if i + 1 < n else 0.0
    zm.syncthreads()
    v = 0.0
    if i < n:
        v = s[t] * s[t + 2] + math.sin(s[t + 1])
        y[i] = v
    r[t] = v * v
    zm.syncthreads()
    stride = 16
    while stride > 0:
        if t < stride:
            r[t] += r[t + stride]
        zm.syncthreads()
        stride //= 2
    if t == 0:
        zm.atomic.add(out, 0, r[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_shared_halo_syncthreads_and_atomic_block_sum(backend):
    rng = np.random.default_rng(5)
    check_kernel(smooth_shared, 3, 32, [rng.standard_normal(70), np.zeros(70), np.zeros(1)],
                 (0, 1, 2), backend)


@zm.kernel
def edge_assembly(u, edges, w, res):
    """CFD edge loop: a flux per edge scattered with atomics to both nodes."""
    e = zm.grid(1)
    if e < edges.shape[0]:
        a = edges[e, 0]
        b = edges[e, 1]
        ua = u[a]
        ub = u[b]
        f = w[e] * (0.5 * (ua * ua + ub * ub) - 0.5 * abs(ua + ub) * (ub - ua))
        zm.atomic.add(res, a, f)
        zm.atomic.sub(res, b, f)


@pytest.mark.parametrize("backend", BACKENDS)
def test_edge_based_residual_with_atomics(backend):
    rng = np.random.default_rng(6)
    nn, ne = 30, 90
    edges = np.stack([rng.integers(0, nn, ne), rng.integers(0, nn, ne)], 1).astype(np.int32)
    edges = edges[edges[:, 0] != edges[:, 1]]
    args = [rng.standard_normal(nn), edges, rng.uniform(0.5, 1, len(edges)),
            rng.standard_normal(nn)]
    check_kernel(edge_assembly, 4, 32, args, (0, 2, 3), backend)
    report = zm.check_jvp(edge_assembly, 4, 32, zm.Duplicated(args[0], np.zeros(nn)), edges,
                          zm.Duplicated(args[2], np.zeros(len(edges))),
                          zm.Duplicated(args[3], np.zeros(nn)), width=5, backend=backend)
    assert report.ok, str(report)


@zm.kernel
def in_place(a, x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        x[i] = x[i] * x[i] + math.sin(x[i])
        for k in range(3):
            y[i] += a * x[i] * y[i]
        y[i] *= 0.5
        y[i] -= x[i]


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_updates_with_duplicated_scalar(backend):
    rng = np.random.default_rng(7)
    check_kernel(in_place, 2, 32, [0.3, rng.standard_normal(40), rng.standard_normal(40)],
                 (0, 1, 2), backend)


@zm.kernel
def nonlinear_laplace(u, kappa, out):
    i, j = zm.grid(2)
    ny, nx = u.shape[0], u.shape[1]
    if 0 < i < nx - 1 and 0 < j < ny - 1:
        c = u[j, i]
        lap = u[j, i - 1] + u[j, i + 1] + u[j - 1, i] + u[j + 1, i] - 4.0 * c
        out[j, i] = kappa * (1.0 + c * c) * lap - c * c * c


@pytest.mark.parametrize("backend", BACKENDS)
def test_2d_stencil_with_active_scalar(backend):
    rng = np.random.default_rng(8)
    u = rng.standard_normal((11, 13))
    check_kernel(nonlinear_laplace, (2, 3), (8, 4), [u, 0.7, np.zeros((11, 13))], (0, 1, 2),
                 backend)
    report = zm.check_jvp(nonlinear_laplace, (2, 3), (8, 4), zm.Duplicated(u, np.zeros_like(u)),
                          zm.Active(0.7), zm.Duplicated(np.zeros_like(u), np.zeros_like(u)),
                          width=3, backend=backend)
    assert report.ok, str(report)


@zm.kernel
def euler_pressure(q, p):
    """q[c, j, i]: 2-D Euler conservative state; writes p and overwrites q[3] in place."""
    i, j = zm.grid(2)
    if j < q.shape[1] and i < q.shape[2]:
        rho = q[0, j, i]
        mx = q[1, j, i]
        my = q[2, j, i]
        E = q[3, j, i]
        pr = (GAMMA - 1.0) * (E - 0.5 * (mx * mx + my * my) / rho)
        p[j, i] = pr
        q[3, j, i] = (E + pr) * mx / rho


@pytest.mark.parametrize("backend", BACKENDS)
def test_3d_array_euler_state(backend):
    rng = np.random.default_rng(9)
    q = np.stack([rng.uniform(0.8, 1.2, (5, 6)), rng.standard_normal((5, 6)) * 0.3,
                  rng.standard_normal((5, 6)) * 0.3, rng.uniform(2, 3, (5, 6))])
    check_kernel(euler_pressure, (1, 2), (8, 4), [q, np.zeros((5, 6))], (0, 1), backend)


@zm.kernel
def grid3(u, v):
    i, j, k = zm.grid(3)
    if i < u.shape[2] and j < u.shape[1] and k < u.shape[0]:
        v[k, j, i] = u[k, j, i] * math.exp(-u[k, j, i] * u[k, j, i]) + (k + 1.0) * u[k, j, i]


@pytest.mark.parametrize("backend", BACKENDS)
def test_3d_grid(backend):
    rng = np.random.default_rng(10)
    check_kernel(grid3, (1, 2, 2), (4, 4, 2), [rng.standard_normal((3, 5, 4)),
                                               np.zeros((3, 5, 4))], (0, 1), backend)


@zm.kernel
def burgers_step(u, dt, nu, out):
    """One explicit step of viscous Burgers with an upwind flux (f32 or f64)."""
    i = zm.grid(1)
    n = u.shape[0]
    if i < n:
        left = u[(i - 1 + n) % n]
        c = u[i]
        right = u[(i + 1) % n]
        fr = (0.5 * max(c, 0.0) ** 2 + 0.5 * min(right, 0.0) ** 2 if c + right > 0.0
              else 0.25 * (c * c + right * right))
        fl = (0.5 * max(left, 0.0) ** 2 + 0.5 * min(c, 0.0) ** 2 if left + c > 0.0
              else 0.25 * (left * left + c * c))
        out[i] = (c - dt * (fr - fl) + nu * dt * (left - 2.0 * c + right)
                  + dt * math.sqrt(1.0 + c * c) * math.exp(-c))


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_kernel_against_float64_differences(backend):
    rng = np.random.default_rng(11)
    u = rng.uniform(-1, 1, 40)
    args32 = [u.astype(np.float32), np.float32(0.01), np.float32(0.1), np.zeros(40, np.float32)]
    args64 = [u, 0.01, 0.1, np.zeros(40)]
    tangents = check_kernel(burgers_step, 2, 32, args32, (0, 1, 2, 3), backend, rtol=1e-3,
                            atol=1e-4, args_fd=args64)
    assert tangents[0][3].dtype == np.float32
    report = zm.check_jvp(burgers_step, 2, 32, zm.Duplicated(args32[0], np.zeros(40, np.float32)),
                          zm.Active(np.float32(0.01)), np.float32(0.1),
                          zm.Duplicated(args32[3], np.zeros(40, np.float32)), width=3,
                          backend=backend)
    assert report.ok, str(report)


WEIGHTS = np.array([0.1, 0.2, 0.3, 0.4])


@zm.kernel
def local_and_const(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        w = zm.const.array_like(WEIGHTS)
        f = zm.local.array(4, zm.f64)
        for k in range(4):
            f[k] = x[i] * (k + 1) + math.cos(x[i] * k)
        s = 0.0
        for k in range(4):
            s += w[k] * f[k] * f[3 - k]
        coeffs = (0.5, -1.0, 2.0)
        for c in coeffs:
            s = s * c + x[i]
        y[i] = s


@pytest.mark.parametrize("backend", BACKENDS)
def test_local_array_const_array_and_tuple_loop(backend):
    check_kernel(local_and_const, 2, 32, [np.random.default_rng(12).standard_normal(40),
                                          np.zeros(40)], (0, 1), backend)


@zm.kernel
def warp_butterfly(x, y):
    i = zm.grid(1)
    v = math.sin(x[i]) * x[i]
    off = 16
    while off > 0:
        v += zm.shfl_xor_sync(0xFFFFFFFF, v, off)
        off //= 2
    y[i] = v * x[i]


@zm.kernel
def warp_ops(x, y):
    i = zm.grid(1)
    lane = zm.laneid
    v = math.exp(0.3 * x[i])
    up = zm.shfl_up_sync(0xFFFFFFFF, v, 1)
    down = zm.shfl_down_sync(0xFFFFFFFF, v * v, 2)
    lead = zm.shfl_sync(0xFFFFFFFF, v, 0)
    mask = zm.ballot_sync(0xFFFFFFFF, v > 1.0)
    count = 0
    for b in range(32):
        count += (mask >> b) & 1
    anyv = zm.any_sync(0xFFFFFFFF, v > 2.0)
    w = up if lane > 0 else v
    w = w + (down if lane < 30 else 0.0)
    y[i] = w * lead + count * v + (1.0 if anyv else 0.0) * v


@pytest.mark.parametrize("backend", BACKENDS)
def test_warp_shuffles_ballot_and_vote(backend):
    rng = np.random.default_rng(13)
    check_kernel(warp_butterfly, 2, 32, [rng.standard_normal(64), np.zeros(64)], (0, 1), backend)
    check_kernel(warp_ops, 2, 32, [rng.standard_normal(64), np.zeros(64)], (0, 1), backend)


@zm.kernel
def casts(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        u = x[i]
        k = int(u * 3.0)
        f = zm.f32(u) * zm.f32(2.0)
        y[i] = float(f) * u + k * u + float(i) * u * u


@pytest.mark.parametrize("backend", BACKENDS)
def test_casts_int_truncation_and_f32_roundtrip(backend):
    x = np.random.default_rng(14).uniform(-2, 2, 40)
    tangents = ad_jvp(casts, 2, 32, [x, np.zeros(40)], [{0: np.ones(40), 1: np.zeros(40)}],
                      backend, "dup")
    i = np.arange(40)
    expected = 2 * x.astype(np.float32).astype(np.float64) + 2 * x + np.trunc(3 * x) + 2 * i * x
    np.testing.assert_allclose(tangents[0][1], expected, rtol=1e-6, atol=1e-6)


@zm.kernel
def matmul_tiled(A, B, C):
    sA = zm.shared.array((8, 8), zm.f64)
    sB = zm.shared.array((8, 8), zm.f64)
    tx = zm.threadIdx.x
    ty = zm.threadIdx.y
    col = zm.blockIdx.x * 8 + tx
    row = zm.blockIdx.y * 8 + ty
    acc = 0.0
    for t in range((A.shape[1] + 7) // 8):
        k = t * 8 + tx
        sA[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else 0.0
        k2 = t * 8 + ty
        sB[ty, tx] = B[k2, col] if k2 < B.shape[0] and col < B.shape[1] else 0.0
        zm.syncthreads()
        for kk in range(8):
            acc += sA[ty, kk] * sB[kk, tx]
        zm.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = math.tanh(acc)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tiled_matmul_shared_tiles(backend):
    rng = np.random.default_rng(15)
    args = [rng.standard_normal((13, 11)) * 0.3, rng.standard_normal((11, 10)) * 0.3,
            np.zeros((13, 10))]
    check_kernel(matmul_tiled, (2, 2), (8, 8), args, (0, 1, 2), backend,
                 forms=((1, "dup"), (3, "stacked")))


@zm.func
def lorenz_rhs(x, y, z, sigma, rho, beta):
    return (sigma * (y - x), x * (rho - z) - y, x * y - beta * z)


@zm.kernel
def lorenz_rk4(s0, params, nsteps, out):
    i = zm.grid(1)
    if i < s0.shape[0]:
        x = s0[i, 0]
        y = s0[i, 1]
        z = s0[i, 2]
        sigma = params[0]
        rho = params[1]
        beta = params[2]
        dt = 0.01
        for step in range(nsteps):
            k1 = lorenz_rhs(x, y, z, sigma, rho, beta)
            k2 = lorenz_rhs(x + 0.5 * dt * k1[0], y + 0.5 * dt * k1[1], z + 0.5 * dt * k1[2],
                            sigma, rho, beta)
            k3 = lorenz_rhs(x + 0.5 * dt * k2[0], y + 0.5 * dt * k2[1], z + 0.5 * dt * k2[2],
                            sigma, rho, beta)
            k4 = lorenz_rhs(x + dt * k3[0], y + dt * k3[1], z + dt * k3[2], sigma, rho, beta)
            x += dt / 6.0 * (k1[0] + 2.0 * k2[0] + 2.0 * k3[0] + k4[0])
            y += dt / 6.0 * (k1[1] + 2.0 * k2[1] + 2.0 * k3[1] + k4[1])
            z += dt / 6.0 * (k1[2] + 2.0 * k2[2] + 2.0 * k3[2] + k4[2])
        out[i, 0] = x
        out[i, 1] = y
        out[i, 2] = z


@pytest.mark.parametrize("backend", BACKENDS)
def test_rk4_time_integration_with_tuple_returning_device_function(backend):
    rng = np.random.default_rng(16)
    args = [rng.standard_normal((5, 3)) + [1, 1, 20], np.array([10.0, 28.0, 8 / 3]), 40,
            np.zeros((5, 3))]
    check_kernel(lorenz_rk4, 1, 8, args, (0, 1, 3), backend, rtol=1e-5)


@zm.kernel
def continue_negative_step(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        acc = 0.0
        for k in range(6, -1, -2):
            if k == 2:
                continue
            acc = acc * x[i] + k
        state = (x[i], 1.0)
        for k in range(3):
            state = (state[0] * state[1] + 0.1, math.sin(state[0]))
        y[i] = acc + state[0] * state[1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_continue_negative_step_and_carried_tuple(backend):
    check_kernel(continue_negative_step, 1, 16, [np.random.default_rng(17).uniform(-1, 1, 10),
                                                 np.zeros(10)], (0, 1), backend)


@zm.kernel
def scalars_only(a, b, x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = math.exp(a * x[i]) / (1.0 + b * b * x[i] * x[i])


@pytest.mark.parametrize("backend", BACKENDS)
def test_only_scalar_arguments_carry_tangents(backend):
    x = np.random.default_rng(18).standard_normal(10)
    check_kernel(scalars_only, 1, 16, [0.3, 1.2, x, np.zeros(10)], (0, 1, 3), backend,
                 forms=FORMS + ((5, "tuple"),))
    y, ty = np.zeros(10), np.zeros((3, 10))
    zm.jvp(scalars_only, width=3).on(backend)[1, 16](
        zm.BatchDuplicated(0.3, np.array([1.0, 0.0, 0.0])), zm.BatchDuplicated(1.2, (0, 1, 0)),
        x, zm.BatchDuplicated(y, ty))
    d = 1 + 1.44 * x * x
    np.testing.assert_allclose(ty[0], x * np.exp(0.3 * x) / d, rtol=1e-13)
    np.testing.assert_allclose(ty[1], -np.exp(0.3 * x) * 2.4 * x * x / d ** 2, rtol=1e-13)
    np.testing.assert_array_equal(ty[2], 0.0)


@zm.kernel
def jacobi_shared(x, nit, y):
    """Iterative smoothing in shared memory; an active per-thread accumulator lives across the
    barriers of every iteration (the CPU backend splits the kernel there)."""
    s = zm.shared.array(34, zm.f64)
    t = zm.threadIdx.x
    i = zm.grid(1)
    n = x.shape[0]
    own = x[i] if i < n else 0.0
    keep = math.sin(own)
    s[t + 1] = own
    if t == 0:
        s[0] = 0.0
        s[33] = 0.0
    acc = 0.0
    for it in range(nit):
        zm.syncthreads()
        v = 0.25 * s[t] + 0.5 * s[t + 1] + 0.25 * s[t + 2] + 0.1 * math.tanh(s[t + 1])
        acc += v * keep
        zm.syncthreads()
        s[t + 1] = v
    zm.syncthreads()
    if i < n:
        y[i] = acc + s[t + 1] * keep


@zm.kernel
def scan_while_barrier(x, y):
    s = zm.shared.array(32, zm.f64)
    t = zm.threadIdx.x
    i = zm.grid(1)
    v = x[i] * x[i]
    w = math.exp(0.1 * x[i])
    stride = 1
    while stride < 32:
        s[t] = v
        zm.syncthreads()
        if t >= stride:
            v = v + s[t - stride] * w
        zm.syncthreads()
        stride *= 2
    y[i] = v


@pytest.mark.parametrize("backend", BACKENDS)
def test_active_registers_live_across_barriers_in_loops(backend):
    rng = np.random.default_rng(19)
    check_kernel(jacobi_shared, 2, 32, [rng.standard_normal(60), 5, np.zeros(60)], (0, 2),
                 backend)
    check_kernel(scan_while_barrier, 2, 32, [rng.standard_normal(64) * 0.5, np.zeros(64)],
                 (0, 1), backend)


@zm.kernel
def return_inside_loop(x, y, z):
    i = zm.grid(1)
    if i >= x.shape[0]:
        return
    v = x[i]
    for k in range(10):
        v = v * 1.3 + 0.1 * math.cos(v)
        if v > 4.0:
            y[i] = v * k
            z[i] = v * v
            return
        z[i] = v
    y[i] = -v


@zm.kernel
def nested_break_continue(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        acc = 0.0
        for a in range(4):
            b = 0
            inner = x[i] * (a + 1)
            while True:
                inner = inner * 0.7 + math.sin(inner) * 0.2
                b += 1
                if b >= 3 + a:
                    break
                if inner < -5.0:
                    break
                if b == 2:
                    continue
                acc += inner * 0.01
            acc += inner
            if acc > 3.0:
                break
        y[i] = acc


@pytest.mark.parametrize("backend", BACKENDS)
def test_return_in_loop_and_nested_break_continue(backend):
    rng = np.random.default_rng(20)
    check_kernel(return_inside_loop, 2, 32, [rng.uniform(-1, 2, 40), np.zeros(40),
                                             np.zeros(40)], (0, 1, 2), backend)
    check_kernel(nested_break_continue, 2, 32, [rng.uniform(-2, 2, 40), np.zeros(40)], (0, 1),
                 backend)


@zm.func
def store_pair(out, i, a, b):
    out[i, 0] = a * b
    out[i, 1] = math.exp(a) - b


@zm.kernel
def grid_stride(x, z, out, flags):
    start = zm.grid(1)
    stride = zm.gridsize(1)
    for i in range(start, x.shape[0], stride):
        a = x[i]
        b = z[i] * a
        store_pair(out, i, a, b)
        flags[i] = 1 if a > 0.0 else 0


@zm.kernel
def gather_local(x, perm, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        buf = zm.local.array(6, zm.f64)
        for k in range(6):
            buf[k] = x[i] * (k + 1.0) + math.sin(x[(i + k) % x.shape[0]])
        s = 0.0
        for k in range(6):
            s += buf[perm[i, k]] * buf[k]
        y[i] = s


@pytest.mark.parametrize("backend", BACKENDS)
def test_grid_stride_loop_device_function_out_param_and_local_gather(backend):
    rng = np.random.default_rng(21)
    n = 50
    check_kernel(grid_stride, 1, 16, [rng.standard_normal(n), rng.standard_normal(n),
                                      np.zeros((n, 2)), np.zeros(n, np.int32)], (0, 1, 2),
                 backend)
    perm = np.stack([rng.permutation(6) for _ in range(n)]).astype(np.int32)
    check_kernel(gather_local, 2, 32, [rng.standard_normal(n), perm, np.zeros(n)], (0, 2),
                 backend)


@zm.kernel
def sin_axpy(a, x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = a * math.sin(x[i]) + y[i]


@zm.kernel
def even_only(x, y):
    i = zm.grid(1)
    if i < x.shape[0] and i % 2 == 0:
        y[i] = x[i] * x[i]


@pytest.mark.parametrize("backend", BACKENDS)
def test_tangent_layouts_dtypes_and_partial_writes(backend):
    rng = np.random.default_rng(22)
    n = 10
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    # stacked tangents whose rows are strided views (Fortran order / a transposed array)
    tx = np.asfortranarray(rng.standard_normal((3, n)))
    ty = np.zeros((n, 3)).T
    ty[:] = rng.standard_normal((3, n))
    tx0, ty0 = tx.copy(), ty.copy()
    zm.jvp(sin_axpy, width=3).on(backend)[1, 16](zm.BatchDuplicated(0.5, (1.0, 0.0, 2.0)),
                                                 zm.BatchDuplicated(x.copy(), tx),
                                                 zm.BatchDuplicated(y.copy(), ty))
    expected = np.array([1.0, 0.0, 2.0])[:, None] * np.sin(x) + 0.5 * np.cos(x) * tx0 + ty0
    np.testing.assert_allclose(ty, expected, rtol=1e-14)
    # a strided primal with a contiguous tangent
    xs = np.zeros(2 * n)
    xs[::2] = x
    t = np.zeros(n)
    zm.jvp(sin_axpy).on(backend)[1, 16](zm.Duplicated(0.5, 0.0), zm.Duplicated(xs[::2], np.ones(n)),
                                        zm.Duplicated(y.copy(), t))
    np.testing.assert_allclose(t, 0.5 * np.cos(x), rtol=1e-14)
    # an f32 scalar with a Python float tangent
    t32 = np.zeros(n, np.float32)
    zm.jvp(sin_axpy).on(backend)[1, 16](zm.Duplicated(np.float32(0.5), 1.0), x.astype(np.float32),
                                        zm.Duplicated(np.zeros(n, np.float32), t32))
    np.testing.assert_allclose(t32, np.sin(x.astype(np.float32)), rtol=1e-6)
    # the same derivative object, relaunched with other dtypes and activities
    d = zm.jvp(sin_axpy).on(backend)
    t = np.zeros(n)
    d[1, 16](zm.Duplicated(2.0, 1.0), x, zm.Duplicated(y.copy(), t))
    np.testing.assert_allclose(t, np.sin(x), rtol=1e-14)
    # threads that store nothing leave the incoming tangent
    t = np.ones(n)
    zm.jvp(even_only).on(backend)[1, 16](zm.Duplicated(x, np.ones(n)), zm.Duplicated(y.copy(), t))
    np.testing.assert_allclose(t[::2], 2 * x[::2], rtol=1e-14)
    np.testing.assert_array_equal(t[1::2], 1.0)


@zm.kernel
def unary_rules(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        u = x[i]
        y[i, 0] = math.sqrt(u)
        y[i, 1] = math.exp(u)
        y[i, 2] = math.log(u)
        y[i, 3] = math.log2(u)
        y[i, 4] = math.log10(u)
        y[i, 5] = math.log1p(u)
        y[i, 6] = math.expm1(u)
        y[i, 7] = math.sin(u)
        y[i, 8] = math.cos(u)
        y[i, 9] = math.tan(u)
        y[i, 10] = math.asin(u * 0.25)
        y[i, 11] = math.acos(u * 0.25)
        y[i, 12] = math.atan(u)
        y[i, 13] = math.sinh(u)
        y[i, 14] = math.cosh(u)
        y[i, 15] = math.tanh(u)
        y[i, 16] = math.erf(u)
        y[i, 17] = math.exp2(u)
        y[i, 18] = abs(u)
        y[i, 19] = math.fabs(-u)
        y[i, 20] = math.atan2(u, -0.7)
        y[i, 21] = math.atan2(-0.3, u)
        y[i, 22] = math.hypot(u, 3.0)
        y[i, 23] = math.pow(u, 1.7)
        y[i, 24] = math.pow(1.7, u)
        y[i, 25] = u ** 3
        y[i, 26] = 1.0 / u
        y[i, 27] = math.copysign(u, -1.0)
        y[i, 28] = math.fmod(5.0, u)
        y[i, 29] = zm.fma(u, u, u)
        y[i, 30] = math.floor(u) * u + math.ceil(u)


def _unary_exact(u):
    return np.stack([0.5 / np.sqrt(u), np.exp(u), 1 / u, 1 / (u * np.log(2)),
                     1 / (u * np.log(10)), 1 / (1 + u), np.exp(u), np.cos(u), -np.sin(u),
                     1 / np.cos(u) ** 2, 0.25 / np.sqrt(1 - u * u / 16),
                     -0.25 / np.sqrt(1 - u * u / 16), 1 / (1 + u * u), np.cosh(u), np.sinh(u),
                     1 - np.tanh(u) ** 2, 2 / np.sqrt(np.pi) * np.exp(-u * u),
                     np.log(2) * 2 ** u, np.sign(u), np.sign(u), -0.7 / (u * u + 0.49),
                     0.3 / (u * u + 0.09), u / np.hypot(u, 3), 1.7 * u ** 0.7,
                     np.log(1.7) * 1.7 ** u, 3 * u * u, -1 / u ** 2, -np.sign(u),
                     -np.trunc(5 / u), 2 * u + 1, np.floor(u)], 1)


@pytest.mark.parametrize("dtype", (np.float64, np.float32))
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_math_rule_in_closed_form(backend, dtype):
    x = np.array([0.05, 0.3, 0.9, 1.3, 1.9, 2.6, 3.7])
    y, ty = np.zeros((7, 31), dtype), np.zeros((7, 31), dtype)
    zm.jvp(unary_rules).on(backend)[1, 8](zm.Duplicated(x.astype(dtype), np.ones(7, dtype)),
                                          zm.Duplicated(y, ty))
    exact = _unary_exact(x)
    np.testing.assert_allclose(ty, exact, rtol=1e-12 if dtype == np.float64 else 2e-6,
                               atol=0 if dtype == np.float64 else 1e-6)


@zm.kernel
def atomic_2d(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        zm.atomic.add(y, (i % 2, i % 3), math.exp(x[i]) * x[i])


@pytest.mark.parametrize("backend", BACKENDS)
def test_atomic_add_with_tuple_index(backend):
    check_kernel(atomic_2d, 1, 32, [np.random.default_rng(23).standard_normal(20),
                                    np.zeros((2, 3))], (0, 1), backend)


@zm.kernel
def atomic_exch_active(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        zm.atomic.exch(y, i, x[i] * x[i])


@zm.kernel
def atomic_min_active(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        zm.atomic.min(y, i, x[i] * x[i])


def test_unsupported_atomics_and_integer_tangents_are_clear_errors():
    x = np.ones(4)
    for k, what in ((atomic_exch_active, "atomic.exch"), (atomic_min_active, "atomic.min")):
        with pytest.raises(zm.CompileError, match=rf"test_jvp_kernels.py:\d+:\d+: error: "
                                                 rf"cannot differentiate `{what}`"):
            zm.jvp(k).on("interp")[1, 4](zm.Duplicated(x, x.copy()),
                                         zm.Duplicated(np.zeros(4), np.zeros(4)))
    with pytest.raises(zm.CompileError, match="carries no tangent"):
        zm.jvp(sin_axpy).on("interp")[1, 4](0.5, zm.Duplicated(np.arange(4, dtype=np.int32),
                                                               np.zeros(4, np.int32)),
                                            zm.Duplicated(np.zeros(4), np.zeros(4)))
    with pytest.raises(zm.LaunchError, match="same shape and dtype"):
        zm.jvp(sin_axpy).on("interp")[1, 4](0.5, zm.Duplicated(x, np.zeros(4, np.float32)),
                                            zm.Duplicated(np.zeros(4), np.zeros(4)))


@zm.func
def residual(u0, u1, x0, x1):
    return (u0 + 0.1 * u0 * u0 * u0 - x0 - 0.2 * u1,
            u1 + 0.1 * math.sin(u1) - x1 + 0.3 * u0 * u1)


@zm.kernel
def implicit_solve(x, u):
    """Newton on a 2x2 system with its Jacobian from zm.jacfwd; zm.jvp(kernel) differentiates
    through the solver (a second derivative inside a while loop)."""
    i = zm.grid(1)
    if i < x.shape[0]:
        x0 = x[i, 0]
        x1 = x[i, 1]
        u0 = x0
        u1 = x1
        it = 0
        while it < 30:
            r = residual(u0, u1, x0, x1)
            J = zm.jacfwd(residual, argnums=(0, 1))(u0, u1, x0, x1)
            det = J[0][0] * J[1][1] - J[0][1] * J[1][0]
            d0 = (J[1][1] * r[0] - J[0][1] * r[1]) / det
            d1 = (J[0][0] * r[1] - J[1][0] * r[0]) / det
            u0 -= d0
            u1 -= d1
            it += 1
            if abs(d0) + abs(d1) < 1e-14:
                break
        u[i, 0] = u0
        u[i, 1] = u1


@pytest.mark.parametrize("backend", BACKENDS)
def test_jvp_through_newton_solver_using_jacfwd(backend):
    rng = np.random.default_rng(24)
    n = 12
    x = rng.uniform(-1, 1, (n, 2))
    check_kernel(implicit_solve, 1, 16, [x, np.zeros((n, 2))], (0, 1), backend,
                 forms=((1, "dup"), (3, "tuple")))
    u, t0, tu = np.zeros((n, 2)), np.zeros((n, 2)), np.zeros((n, 2))
    t0[:, 0] = 1.0
    zm.jvp(implicit_solve).on(backend)[1, 16](zm.Duplicated(x.copy(), t0), zm.Duplicated(u, tu))
    for i in range(n):       # implicit function theorem: du/dx = (dg/du)^-1
        u0, u1 = u[i]
        gu = np.array([[1 + 0.3 * u0 * u0, -0.2], [0.3 * u1, 1 + 0.1 * np.cos(u1) + 0.3 * u0]])
        np.testing.assert_allclose(tu[i], np.linalg.inv(gu)[:, 0], rtol=1e-12, atol=1e-13)


# ==== device level: Euler fluxes against complex steps =========================================
@zm.func
def prim1(q):
    rho, m, E = q
    u = m / rho
    p = (GAMMA - 1.0) * (E - 0.5 * rho * u * u)
    return rho, u, p


@zm.func
def phys_flux1(q):
    rho, u, p = prim1(q)
    return (rho * u, rho * u * u + p, (q[2] + p) * u)


@zm.func
def rusanov1(qL, qR):
    rl, ul, pl = prim1(qL)
    rr, ur, pr = prim1(qR)
    cl = math.sqrt(GAMMA * pl / rl)
    cr = math.sqrt(GAMMA * pr / rr)
    smax = max(abs(ul) + cl, abs(ur) + cr)
    fl = phys_flux1(qL)
    fr = phys_flux1(qR)
    return (0.5 * (fl[0] + fr[0]) - 0.5 * smax * (qR[0] - qL[0]),
            0.5 * (fl[1] + fr[1]) - 0.5 * smax * (qR[1] - qL[1]),
            0.5 * (fl[2] + fr[2]) - 0.5 * smax * (qR[2] - qL[2]))


@zm.kernel
def rusanov_derivatives(qL, qR, F, JF, JR, T):
    i = zm.grid(1)
    if i < qL.shape[0]:
        a = (qL[i, 0], qL[i, 1], qL[i, 2])
        b = (qR[i, 0], qR[i, 1], qR[i, 2])
        J = zm.jacfwd(rusanov1, argnums=(0, 1), width=2)(a, b)     # chunks 2 + 2 + 2
        R = zm.jacrev(rusanov1, argnums=(0, 1))(a, b)
        f = rusanov1(a, b)
        for r in range(3):
            F[i, r] = f[r]
        r = 0
        for row in J:
            c = 0
            for part in row:
                for v in part:
                    JF[i, r, c] = v
                    c += 1
            r += 1
        r = 0
        for row in R:
            c = 0
            for part in row:
                for v in part:
                    JR[i, r, c] = v
                    c += 1
            r += 1
        out, t = zm.jvp(rusanov1, (a, b), ((1.0, 0.0, 0.0), (0.0, 0.0, T[i, 0])))
        for r in range(3):
            T[i, 1 + r] = t[r]
        zero = ((0.0,), (0.0,), (0.0,))
        out3, t3 = zm.jvp(rusanov1, (a, b), (((qL[i, 0],), (0.0,), (1.0,)), zero), width=1)
        T[i, 4] = t3[0][0]
        T[i, 5] = t3[1][0]
        T[i, 6] = t3[2][0]


def _states1(rng, n, umax=1.5):
    rho, u, p = rng.uniform(0.5, 1.5, n), rng.uniform(-umax, umax, n), rng.uniform(0.5, 2, n)
    return np.stack([rho, rho * u, p / (GAMMA - 1) + 0.5 * rho * u * u], 1)


def _states2(rng, n, umax=3.0):
    rho, u, v = rng.uniform(0.5, 1.5, n), rng.uniform(-umax, umax, n), rng.uniform(-umax, umax, n)
    p = rng.uniform(0.5, 2, n)
    return np.stack([rho, rho * u, rho * v, p / (GAMMA - 1) + 0.5 * rho * (u * u + v * v)], 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rusanov_flux_jacobians_against_complex_step(backend):
    rng = np.random.default_rng(30)
    n = 6
    qL, qR = _states1(rng, n), _states1(rng, n)
    F, JF, JR, T = np.zeros((n, 3)), np.zeros((n, 3, 6)), np.zeros((n, 3, 6)), np.zeros((n, 7))
    T[:, 0] = rng.standard_normal(n)
    rusanov_derivatives.on(backend)[1, 8](qL, qR, F, JF, JR, T)
    f = complex_version(rusanov1)
    for i in range(n):
        J = complex_step_jacobian(f, (qL[i], qR[i]))
        np.testing.assert_allclose(F[i], np.real(f(tuple(qL[i]), tuple(qR[i]))), rtol=1e-14)
        np.testing.assert_allclose(JF[i], J, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(JR[i], J, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(T[i, 1:4], J[:, 0] + T[i, 0] * J[:, 5], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(T[i, 4:7], qL[i, 0] * J[:, 0] + J[:, 2], rtol=1e-12,
                                   atol=1e-12)


@zm.func
def euler2d_flux(q, nx, ny):
    rho, mx, my, E = q
    u = mx / rho
    v = my / rho
    p = (GAMMA - 1.0) * (E - 0.5 * rho * (u * u + v * v))
    un = u * nx + v * ny
    return ((rho * un, mx * un + p * nx, my * un + p * ny, (E + p) * un), un,
            math.sqrt(GAMMA * p / rho))


@zm.func
def hll2d(qL, qR, nx, ny):
    fL, unL, cL = euler2d_flux(qL, nx, ny)
    fR, unR, cR = euler2d_flux(qR, nx, ny)
    sL = min(unL - cL, unR - cR)
    sR = max(unL + cL, unR + cR)
    if sL >= 0.0:
        return fL
    elif sR <= 0.0:
        return fR
    inv = 1.0 / (sR - sL)
    return ((sR * fL[0] - sL * fR[0] + sL * sR * (qR[0] - qL[0])) * inv,
            (sR * fL[1] - sL * fR[1] + sL * sR * (qR[1] - qL[1])) * inv,
            (sR * fL[2] - sL * fR[2] + sL * sR * (qR[2] - qL[2])) * inv,
            (sR * fL[3] - sL * fR[3] + sL * sR * (qR[3] - qL[3])) * inv)


@zm.kernel
def hll_jacobians(qL, qR, normals, J1, J2, J3):
    i = zm.grid(1)
    if i < qL.shape[0]:
        a = (qL[i, 0], qL[i, 1], qL[i, 2], qL[i, 3])
        b = (qR[i, 0], qR[i, 1], qR[i, 2], qR[i, 3])
        nx = normals[i, 0]
        ny = normals[i, 1]
        A = zm.jacfwd(hll2d, argnums=0, width=3)(a, b, nx, ny)     # chunks 3 + 1
        B = zm.jacfwd(hll2d, argnums=(0, 1))(a, b, nx, ny)         # default width 8
        C = zm.jacrev(hll2d, argnums=(0, 1))(a, b, nx, ny)
        r = 0
        for row in A:
            c = 0
            for v in row:
                J1[i, r, c] = v
                c += 1
            r += 1
        r = 0
        for row in B:
            c = 0
            for part in row:
                for v in part:
                    J2[i, r, c] = v
                    c += 1
            r += 1
        r = 0
        for row in C:
            c = 0
            for part in row:
                for v in part:
                    J3[i, r, c] = v
                    c += 1
            r += 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_hll_2d_flux_jacobians_against_complex_step(backend):
    rng = np.random.default_rng(31)
    n = 12
    qL, qR = _states2(rng, n), _states2(rng, n)
    th = rng.uniform(0, 2 * np.pi, n)
    normals = np.stack([np.cos(th), np.sin(th)], 1)
    J1, J2, J3 = np.zeros((n, 4, 4)), np.zeros((n, 4, 8)), np.zeros((n, 4, 8))
    hll_jacobians.on(backend)[1, 16](qL, qR, normals, J1, J2, J3)
    f = complex_version(hll2d)
    for i in range(n):
        J = complex_step_jacobian(f, (qL[i], qR[i]), extra=tuple(normals[i]))
        np.testing.assert_allclose(J2[i], J, rtol=1e-11, atol=1e-11)
        np.testing.assert_allclose(J3[i], J, rtol=1e-11, atol=1e-11)
        np.testing.assert_allclose(J1[i], J[:, :4], rtol=1e-11, atol=1e-11)


@zm.func
def van_leer_split(q, sign):
    """Van Leer flux-vector splitting, F+ (sign 1) or F- (sign -1), 1-D Euler."""
    rho = q[0]
    u = q[1] / rho
    p = (GAMMA - 1.0) * (q[2] - 0.5 * rho * u * u)
    c = math.sqrt(GAMMA * p / rho)
    M = u / c
    if M >= 1.0:
        if sign > 0.0:
            return (q[1], q[1] * u + p, (q[2] + p) * u)
        return (0.0, 0.0, 0.0)
    if M <= -1.0:
        if sign > 0.0:
            return (0.0, 0.0, 0.0)
        return (q[1], q[1] * u + p, (q[2] + p) * u)
    fm = sign * 0.25 * rho * c * (M + sign) ** 2
    a = ((GAMMA - 1.0) * u + sign * 2.0 * c) / GAMMA
    return (fm, fm * a, fm * a * a * 0.5 * GAMMA * GAMMA / (GAMMA * GAMMA - 1.0))


@zm.func
def van_leer(qL, qR):
    a = van_leer_split(qL, 1.0)
    b = van_leer_split(qR, -1.0)
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@zm.kernel
def van_leer_jacobians(qL, qR, J1, J2):
    i = zm.grid(1)
    if i < qL.shape[0]:
        a = (qL[i, 0], qL[i, 1], qL[i, 2])
        b = (qR[i, 0], qR[i, 1], qR[i, 2])
        A = zm.jacfwd(van_leer, argnums=(0, 1), width=4)(a, b)
        B = zm.jacrev(van_leer, argnums=(0, 1))(a, b)
        r = 0
        for row in A:
            c = 0
            for part in row:
                for v in part:
                    J1[i, r, c] = v
                    c += 1
            r += 1
        r = 0
        for row in B:
            c = 0
            for part in row:
                for v in part:
                    J2[i, r, c] = v
                    c += 1
            r += 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_van_leer_flux_jacobians_sub_and_supersonic(backend):
    rng = np.random.default_rng(32)
    n = 12
    qL, qR = _states1(rng, n, 3.0), _states1(rng, n, 3.0)
    J1, J2 = np.zeros((n, 3, 6)), np.zeros((n, 3, 6))
    van_leer_jacobians.on(backend)[1, 16](qL, qR, J1, J2)
    f = complex_version(van_leer)
    for i in range(n):
        J = complex_step_jacobian(f, (qL[i], qR[i]))
        np.testing.assert_allclose(J1[i], J, rtol=1e-11, atol=1e-11)
        np.testing.assert_allclose(J2[i], J, rtol=1e-11, atol=1e-11)


@zm.func
def load_state(q, i):
    return (q[i, 0], q[i, 1], q[i, 2])


@zm.kernel
def euler_residual(q, res):
    """Finite-volume residual of 1-D Euler on a periodic mesh: a Rusanov flux per face,
    scattered to its two cells with atomics."""
    f = zm.grid(1)
    n = q.shape[0]
    if f < n:
        left = f
        right = (f + 1) % n
        F = rusanov1(load_state(q, left), load_state(q, right))
        for c in range(3):
            zm.atomic.sub(res, (left, c), F[c])
            zm.atomic.add(res, (right, c), F[c])


@zm.kernel
def euler_jacobian_blocks(q, diag, upper, lower):
    """The block-tridiagonal Jacobian of `euler_residual`, zm.jacfwd per face, float64 atomics."""
    f = zm.grid(1)
    n = q.shape[0]
    if f < n:
        left = f
        right = (f + 1) % n
        J = zm.jacfwd(rusanov1, argnums=(0, 1))(load_state(q, left), load_state(q, right))
        r = 0
        for row in J:
            c = 0
            for v in row[0]:
                zm.atomic.sub(diag, (left, r, c), v)
                zm.atomic.add(lower, (right, r, c), v)
                c += 1
            c = 0
            for v in row[1]:
                zm.atomic.sub(upper, (left, r, c), v)
                zm.atomic.add(diag, (right, r, c), v)
                c += 1
            r += 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_jacobian_free_newton_krylov_product_equals_assembled_jacobian(backend):
    n = 16
    x = np.arange(n) / n
    rho = 1 + 0.2 * np.sin(2 * np.pi * x)
    u = 0.5 + 0.1 * np.cos(2 * np.pi * x)
    p = 1 + 0.1 * np.sin(4 * np.pi * x)
    q = np.stack([rho, rho * u, p / (GAMMA - 1) + 0.5 * rho * u * u], 1)
    check_kernel(euler_residual, 1, 32, [q, np.zeros((n, 3))], (0, 1), backend,
                 forms=((1, "dup"), (3, "tuple"), (5, "stacked")))
    v = np.random.default_rng(33).standard_normal((n, 3))
    jv = np.zeros((n, 3))
    zm.jvp(euler_residual).on(backend)[1, 32](zm.Duplicated(q.copy(), v.copy()),
                                              zm.Duplicated(np.zeros((n, 3)), jv))
    D, U, L = np.zeros((n, 3, 3)), np.zeros((n, 3, 3)), np.zeros((n, 3, 3))
    euler_jacobian_blocks.on(backend)[1, 32](q, D, U, L)
    assembled = (np.einsum("irc,ic->ir", D, v) + np.einsum("irc,ic->ir", U, np.roll(v, -1, 0))
                 + np.einsum("irc,ic->ir", L, np.roll(v, 1, 0)))
    np.testing.assert_allclose(jv, assembled, rtol=1e-12, atol=1e-13)


# ==== device level: shapes of inputs and outputs, chunking, control flow =====================
def _fd(f, args, k, h=1e-6):
    a, b = list(args), list(args)
    a[k] += h
    b[k] -= h
    return (np.array(_flat(f(*a))) - np.array(_flat(f(*b)))) / (2 * h)


def _flat(t):
    if isinstance(t, tuple):
        return [v for s in t for v in _flat(s)]
    return [t]


@zm.func
def nested_out(x, y, z):
    a = x * y + math.sin(z)
    b = math.exp(x - z) * y
    return ((a, b), a * b + z * z * z)


@zm.func
def scalar_out(q, s):
    acc = 0.0
    for v in q:
        acc += v * v * s
    return math.sqrt(acc + 1.0)


@zm.func
def looped(x, n):
    acc = x
    k = 0
    while k < n:
        acc = acc - 0.1 * (acc * acc * acc - x)
        if acc > 5.0:
            break
        k += 1
    return (acc, acc * x)


@zm.kernel
def device_mix(X, N, out):
    i = zm.grid(1)
    if i < X.shape[0]:
        x = X[i, 0]
        y = X[i, 1]
        z = X[i, 2]
        o, t = zm.jvp(nested_out, (x, y, z), ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)),
                      width=3)
        out[i, 0] = t[0][0][0]
        out[i, 1] = t[0][0][1]
        out[i, 2] = t[0][0][2]
        out[i, 3] = t[0][1][0]
        out[i, 4] = t[0][1][1]
        out[i, 5] = t[0][1][2]
        out[i, 6] = t[1][0]
        out[i, 7] = t[1][1]
        out[i, 8] = t[1][2]
        J = zm.jacfwd(nested_out, argnums=(0, 1, 2))(x, y, z)
        out[i, 9] = J[0][0][0]
        out[i, 10] = J[0][1][1]
        out[i, 11] = J[1][2]
        R = zm.jacrev(nested_out, argnums=(0, 1, 2))(x, y, z)
        out[i, 12] = R[0][0][0]
        out[i, 13] = R[0][1][1]
        out[i, 14] = R[1][2]
        g = zm.jacfwd(scalar_out)((x, y, z), 0.5)
        out[i, 15] = g[0]
        out[i, 16] = g[1]
        out[i, 17] = g[2]
        out[i, 18] = zm.jacfwd(scalar_out, argnums=1)((x, y, z), 0.5)
        gr = zm.grad(scalar_out, argnums=(0, 1))((x, y, z), 0.5)
        out[i, 19] = gr[0][1]
        out[i, 20] = gr[1]
        L = zm.jacfwd(looped)(x, N[i])
        out[i, 21] = L[0]
        out[i, 22] = L[1]
        Lr = zm.jacrev(looped)(x, N[i])
        out[i, 23] = Lr[0]
        out[i, 24] = Lr[1]
        (p, q), pull = zm.vjp(looped, x, N[i])
        dx, dn = pull((X[i, 1], X[i, 2]))
        out[i, 25] = dx
        out[i, 26] = p + q


@pytest.mark.parametrize("backend", BACKENDS)
def test_device_nested_tuple_outputs_scalar_outputs_and_while_break(backend):
    rng = np.random.default_rng(40)
    n = 10
    X = rng.uniform(0.2, 1.2, (n, 3))
    N = rng.integers(0, 7, n).astype(np.int32)
    out = np.zeros((n, 27))
    device_mix.on(backend)[1, 16](X, N, out)
    for i in range(n):
        x, y, z = X[i]
        J = np.stack([_fd(nested_out, (x, y, z), k) for k in range(3)], 1)
        np.testing.assert_allclose(out[i, 0:9].reshape(3, 3), J, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(out[i, [9, 10, 11]], [J[0, 0], J[1, 1], J[2, 2]], rtol=1e-7)
        np.testing.assert_allclose(out[i, [12, 13, 14]], [J[0, 0], J[1, 1], J[2, 2]], rtol=1e-7)
        g = [_fd(lambda a, b, c: scalar_out((a, b, c), 0.5), (x, y, z), k)[0] for k in range(3)]
        np.testing.assert_allclose(out[i, 15:18], g, rtol=1e-7)
        gs = _fd(lambda s: scalar_out((x, y, z), s), (0.5,), 0)[0]
        np.testing.assert_allclose(out[i, 18], gs, rtol=1e-7)
        np.testing.assert_allclose(out[i, 19:21], [g[1], gs], rtol=1e-7)
        L = _fd(lambda v: looped(v, int(N[i])), (x,), 0)
        np.testing.assert_allclose(out[i, 21:23], L, rtol=1e-6)
        np.testing.assert_allclose(out[i, 23:25], L, rtol=1e-6)
        np.testing.assert_allclose(out[i, 25], L[0] * y + L[1] * z, rtol=1e-6)


@zm.func
def seven(q):
    s = 0.0
    out0 = 0.0
    for k in range(7):
        s += math.sin(q[k]) * (k + 1)
        out0 += q[k] * q[(k + 1) % 7]
    return (s, out0, s * out0)


@zm.func
def thirteen(q):
    p = 1.0
    s = 0.0
    for v in q:
        p *= 1.0 + 0.1 * v
        s += v * v
    return (p, s)


@zm.kernel
def chunked(Q, P, out, out13):
    i = zm.grid(1)
    if i < Q.shape[0]:
        q = (Q[i, 0], Q[i, 1], Q[i, 2], Q[i, 3], Q[i, 4], Q[i, 5], Q[i, 6])
        A = zm.jacfwd(seven, width=3)(q)        # 3 + 3 + 1
        B = zm.jacfwd(seven)(q)
        C = zm.jacrev(seven)(q)
        D = zm.jacfwd(seven, width=1)(q)
        m = 0
        for M in (A, B, C, D):
            r = 0
            for row in M:
                c = 0
                for v in row:
                    out[i, m, r, c] = v
                    c += 1
                r += 1
            m += 1
        p = (P[i, 0], P[i, 1], P[i, 2], P[i, 3], P[i, 4], P[i, 5], P[i, 6], P[i, 7], P[i, 8],
             P[i, 9], P[i, 10], P[i, 11], P[i, 12])
        E = zm.jacfwd(thirteen)(p)              # default width 7: 7 + 6
        r = 0
        for row in E:
            c = 0
            for v in row:
                out13[i, r, c] = v
                c += 1
            r += 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_device_jacobians_in_chunks(backend):
    rng = np.random.default_rng(41)
    n = 6
    Q, P = rng.standard_normal((n, 7)), rng.standard_normal((n, 13))
    out, out13 = np.zeros((n, 4, 3, 7)), np.zeros((n, 2, 13))
    chunked.on(backend)[1, 8](Q, P, out, out13)
    for i in range(n):
        J = np.stack([_fd(lambda *q: seven(q), tuple(Q[i]), c) for c in range(7)], 1)
        for m in range(4):
            np.testing.assert_allclose(out[i, m], J, rtol=1e-7, atol=1e-8)
        J = np.stack([_fd(lambda *q: thirteen(q), tuple(P[i]), c) for c in range(13)], 1)
        np.testing.assert_allclose(out13[i], J, rtol=1e-7, atol=1e-8)


@zm.func
def f2(x, y):
    return (x * y, math.exp(x) + y)


@zm.func
def det_of_jacobian(x, y):
    J = zm.jacfwd(f2, argnums=(0, 1))(x, y)
    return J[0][0] * J[1][1] - J[0][1] * J[1][0]


@zm.func
def cubic_sin(x):
    return x * x * math.sin(x)


@zm.kernel
def second_order(X, out):
    i = zm.grid(1)
    if i < X.shape[0]:
        x = X[i, 0]
        y = X[i, 1]
        out[i, 0] = det_of_jacobian(x, y)
        g = zm.jacfwd(det_of_jacobian, argnums=(0, 1))(x, y)
        out[i, 1] = g[0]
        out[i, 2] = g[1]
        h = zm.jacrev(det_of_jacobian, argnums=(0, 1))(x, y)
        out[i, 3] = h[0]
        out[i, 4] = h[1]
        W = zm.jacfwd(f2, argnums=(0, 1), width=7)(x, y)      # width above the input count
        out[i, 5] = W[0][0]
        out[i, 6] = W[1][0]
        out[i, 7] = zm.jacfwd(cubic_sin)(x)


@zm.kernel
def first_derivative(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = zm.jacfwd(cubic_sin)(x[i])


@pytest.mark.parametrize("backend", BACKENDS)
def test_derivatives_of_derivatives(backend):
    """Not promised by the README ("Not yet: derivatives of derivatives"), but they work."""
    rng = np.random.default_rng(42)
    n = 6
    X = rng.uniform(0.2, 1.0, (n, 2))
    out = np.zeros((n, 8))
    second_order.on(backend)[1, 8](X, out)
    x, y = X[:, 0], X[:, 1]
    np.testing.assert_allclose(out[:, 0], y - x * np.exp(x), rtol=1e-14)
    for col in (1, 3):
        np.testing.assert_allclose(out[:, col], -(1 + x) * np.exp(x), rtol=1e-14)
        np.testing.assert_allclose(out[:, col + 1], 1.0, rtol=1e-14)
    np.testing.assert_allclose(out[:, 5], y, rtol=1e-14)
    np.testing.assert_allclose(out[:, 6], np.exp(x), rtol=1e-14)
    np.testing.assert_allclose(out[:, 7], 2 * x * np.sin(x) + x * x * np.cos(x), rtol=1e-14)
    t = np.zeros(n)
    zm.jvp(first_derivative).on(backend)[1, 8](zm.Duplicated(x.copy(), np.ones(n)),
                                               zm.Duplicated(np.zeros(n), t))
    np.testing.assert_allclose(t, 2 * np.sin(x) + 4 * x * np.cos(x) - x * x * np.sin(x),
                               rtol=1e-13)


@zm.func
def with_local(q):
    w = zm.local.array(4, zm.f64)
    for k in range(4):
        w[k] = q[k] * q[k] + math.sin(q[(k + 1) % 4])
    s = 0.0
    for k in range(4):
        s += w[k] * w[3 - k]
    return (s, w[0] * w[3])


def _with_local_py(q):
    w = [q[k] * q[k] + np.sin(q[(k + 1) % 4]) for k in range(4)]
    return (sum(w[k] * w[3 - k] for k in range(4)), w[0] * w[3])


@zm.func
def pair_and_scale(p, c):
    (a, b) = p
    return a * b * c + math.cos(a)


@zm.func
def one_tuple(x):
    return (x * x,)


@zm.kernel
def device_shapes(Q, X, T, jac, out):
    i = zm.grid(1)
    if i < Q.shape[0]:
        q = (Q[i, 0], Q[i, 1], Q[i, 2], Q[i, 3])
        A = zm.jacfwd(with_local)(q)
        B = zm.jacrev(with_local)(q)
        m = 0
        for M in (A, B):
            r = 0
            for row in M:
                c = 0
                for v in row:
                    jac[i, m, r, c] = v
                    c += 1
                r += 1
            m += 1
        p = (X[i, 0], X[i, 1])
        o, t = zm.jvp(pair_and_scale, (p, X[i, 2]), ((T[i, 0], T[i, 1]), T[i, 2]))
        out[i, 0] = t
        o3, t3 = zm.jvp(pair_and_scale, (p, X[i, 2]),
                        (((T[i, 0], 0.0, 0.0), (T[i, 1], 0.0, 1.0)), (T[i, 2], 0.0, 0.0)),
                        width=3)
        out[i, 1] = t3[0]
        out[i, 2] = t3[2]
        J = zm.jacfwd(pair_and_scale, argnums=(0, 1))(p, X[i, 2])
        out[i, 3] = J[0][0]
        out[i, 4] = J[0][1]
        out[i, 5] = J[1]
        oo, pull = zm.vjp(pair_and_scale, p, X[i, 2])
        ct = pull(2.0)
        out[i, 6] = ct[0][0]
        out[i, 7] = ct[0][1]
        out[i, 8] = ct[1]
        out[i, 9] = zm.jacfwd(one_tuple)(X[i, 0])[0]
        out[i, 10] = zm.jacrev(one_tuple)(X[i, 0])[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_device_local_arrays_tuple_arguments_and_one_tuples(backend):
    rng = np.random.default_rng(43)
    n = 5
    Q, X, T = rng.standard_normal((n, 4)), rng.standard_normal((n, 3)), rng.standard_normal((n, 3))
    jac, out = np.zeros((n, 2, 2, 4)), np.zeros((n, 11))
    device_shapes.on(backend)[1, 8](Q, X, T, jac, out)
    for i in range(n):
        J = np.stack([_fd(lambda *q: _with_local_py(q), tuple(Q[i]), c) for c in range(4)], 1)
        np.testing.assert_allclose(jac[i, 0], J, rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(jac[i, 1], J, rtol=1e-7, atol=1e-8)
    a, b, c = X.T
    ga, gb, gc = b * c - np.sin(a), a * c, a * b
    np.testing.assert_allclose(out[:, 0], ga * T[:, 0] + gb * T[:, 1] + gc * T[:, 2], rtol=1e-13)
    np.testing.assert_allclose(out[:, 1], out[:, 0], rtol=1e-13)
    np.testing.assert_allclose(out[:, 2], gb, rtol=1e-13)
    np.testing.assert_allclose(out[:, 3:6], np.stack([ga, gb, gc], 1), rtol=1e-13)
    np.testing.assert_allclose(out[:, 6:9], 2 * np.stack([ga, gb, gc], 1), rtol=1e-13)
    np.testing.assert_allclose(out[:, 9], 2 * a, rtol=1e-14)
    np.testing.assert_allclose(out[:, 10], 2 * a, rtol=1e-14)


@zm.func
def early_loop(x, n):
    acc = x
    for k in range(n):
        acc = acc * 1.1 + math.sin(acc)
        if acc > 3.0:
            return acc * x
    return acc


@zm.func
def edge_flux(a, b):
    s = 0.5 * (a + b)
    return (s * s * math.exp(-a * b), math.sqrt(1.0 + a * a) * b)


@zm.kernel
def device_in_loops(X, N, u, nbr, out, A):
    i = zm.grid(1)
    if i < X.shape[0]:
        out[i, 0] = zm.jacfwd(early_loop)(X[i], N[i])
        out[i, 1] = zm.jacrev(early_loop)(X[i], N[i])
        o, t = zm.jvp(early_loop, (X[i], N[i]), (1.0, 0))
        out[i, 2] = t
    if i < u.shape[0]:
        acc0 = 0.0
        acc1 = 0.0
        acc2 = 0.0
        acc3 = 0.0
        k = 0
        while k < nbr.shape[1]:
            j = nbr[i, k]
            if j >= 0:
                J = zm.jacrev(edge_flux, argnums=0)(u[i], u[j])
                F = zm.jacfwd(edge_flux, argnums=0)(u[i], u[j])
                acc0 += J[0] + F[0]
                acc1 += J[1] + F[1]
                (f, t) = zm.jvp(edge_flux, (u[i], u[j]), (0.0, 1.0))
                acc2 += t[0]
                acc3 += t[1]
            k += 1
        A[i, 0] = acc0
        A[i, 1] = acc1
        A[i, 2] = acc2
        A[i, 3] = acc3


@pytest.mark.parametrize("backend", BACKENDS)
def test_device_derivatives_with_early_return_and_inside_runtime_loops(backend):
    rng = np.random.default_rng(44)
    n = 10
    X = 3 * rng.uniform(0.2, 1.0, n)
    N = rng.integers(0, 8, n).astype(np.int32)
    u = rng.standard_normal(n)
    nbr = rng.integers(-1, n, (n, 4)).astype(np.int32)
    out, A = np.zeros((n, 3)), np.zeros((n, 4))
    device_in_loops.on(backend)[1, 16](X, N, u, nbr, out, A)
    for i in range(n):
        fd = _fd(lambda v: early_loop(v, int(N[i])), (X[i],), 0)[0]
        np.testing.assert_allclose(out[i], fd, rtol=1e-6)
    expected = np.zeros((n, 4))
    for i in range(n):
        for j in nbr[i]:
            if j >= 0:
                a, b = u[i], u[j]
                s, e = 0.5 * (a + b), np.exp(-a * b)
                expected[i, 0] += 2 * (s * e - s * s * b * e)
                expected[i, 1] += 2 * a / np.sqrt(1 + a * a) * b
                expected[i, 2] += s * e - s * s * a * e
                expected[i, 3] += np.sqrt(1 + a * a)
    np.testing.assert_allclose(A, expected, rtol=1e-13, atol=1e-14)


@zm.func
def long_while(x, n):
    v = x
    k = 0
    while k < n:
        v = v + 0.01 * math.sin(v) * x
        k += 1
    return v


@zm.func
def long_data_while(x):
    v = x
    t = 0.0
    while t < 3.0:
        v = v + 0.01 * math.cos(v * x)
        t += 0.01 * (1.0 + v * v)
    return v


@zm.func
def rotating_local(x, n):
    buf = zm.local.array(3, zm.f64)
    buf[0] = x
    buf[1] = 0.0
    buf[2] = 1.0
    for k in range(n):
        buf[k % 3] = buf[(k + 1) % 3] * 0.9 + math.sin(buf[(k + 2) % 3]) * x
    return buf[0] + buf[1] * buf[2]


GAUSS_W = np.array([5 / 9, 8 / 9, 5 / 9])
GAUSS_X = np.array([-math.sqrt(0.6), 0.0, math.sqrt(0.6)])


@zm.func
def gauss3(a, b):
    w = zm.const.array_like(GAUSS_W)
    t = zm.const.array_like(GAUSS_X)
    s = 0.0
    for k in range(3):
        s += w[k] * math.exp(a * t[k]) * math.sin(b * t[k] + 1.0)
    return s


@zm.kernel
def long_loops(X, N, out):
    i = zm.grid(1)
    if i < X.shape[0]:
        x = X[i]
        out[i, 0] = zm.jacfwd(long_while)(x, N[i])
        out[i, 1] = zm.jacrev(long_while)(x, N[i])
        out[i, 2] = zm.grad(long_while)(x, N[i])
        v, pull = zm.vjp(long_while, x, N[i])
        out[i, 3] = pull(1.0)[0]
        out[i, 4] = zm.jacfwd(long_data_while)(x)
        out[i, 5] = zm.jacrev(long_data_while)(x)
        out[i, 6] = zm.jacfwd(rotating_local)(x, N[i])
        F = zm.jacfwd(gauss3, argnums=(0, 1))(x, 0.5 * x + 0.3)
        R = zm.jacrev(gauss3, argnums=(0, 1))(x, 0.5 * x + 0.3)
        out[i, 7] = F[0]
        out[i, 8] = F[1]
        out[i, 9] = R[0]
        out[i, 10] = R[1]


def _long_while_py(x, n):
    v = x
    for _ in range(n):
        v = v + 0.01 * np.sin(v) * x
    return v


def _long_data_while_py(x):
    v, t = x, 0.0
    while t < 3.0:
        v = v + 0.01 * np.cos(v * x)
        t += 0.01 * (1 + v * v)
    return v


def _rotating_local_py(x, n):
    buf = [x, 0.0, 1.0]
    for k in range(n):
        buf[k % 3] = buf[(k + 1) % 3] * 0.9 + np.sin(buf[(k + 2) % 3]) * x
    return buf[0] + buf[1] * buf[2]


def _gauss3_py(a, b):
    return float(np.sum(GAUSS_W * np.exp(a * GAUSS_X) * np.sin(b * GAUSS_X + 1.0)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_device_run_time_loops_longer_than_the_tape_and_const_arrays(backend):
    """Run-time loops of 0 to 150 iterations (reverse mode tapes the first 32 and replays the
    rest), a data-dependent while, a local array rotated in a loop, Gauss weights."""
    X = np.array([0.3, 0.7, 1.1, 1.5])
    N = np.array([0, 5, 40, 150], np.int32)
    out = np.zeros((4, 11))
    long_loops.on(backend)[1, 4](X, N, out)
    for i in range(4):
        x, n = X[i], int(N[i])
        fd = _fd(lambda v: _long_while_py(v, n), (x,), 0)[0]
        np.testing.assert_allclose(out[i, :4], fd, rtol=1e-7)
        np.testing.assert_allclose(out[i, 1:4], out[i, 0], rtol=1e-13)
        np.testing.assert_allclose(out[i, 4:6], _fd(_long_data_while_py, (x,), 0)[0], rtol=1e-7)
        np.testing.assert_allclose(out[i, 6], _fd(lambda v: _rotating_local_py(v, n), (x,), 0)[0],
                                   rtol=1e-7)
        g = [_fd(_gauss3_py, (x, 0.5 * x + 0.3), k)[0] for k in range(2)]
        np.testing.assert_allclose(out[i, 7:9], g, rtol=1e-7)
        np.testing.assert_allclose(out[i, 9:11], out[i, 7:9], rtol=1e-13)


# ==== bugs found while writing this file (fixed; regression tests) ===========================
@zm.kernel
def monomials(c, x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        s = 0.0
        for k in range(4):
            s += c[k] * x[i] ** k
        y[i] = s


@pytest.mark.parametrize("backend", BACKENDS)
def test_bug_pow_with_zero_exponent_at_zero_base(backend):
    x, c = np.array([0.0, 0.5]), np.array([1.0, 2.0, 3.0, 4.0])
    t = np.zeros(2)
    zm.jvp(monomials).on(backend)[1, 2](c, zm.Duplicated(x, np.ones(2)),
                                        zm.Duplicated(np.zeros(2), t))
    np.testing.assert_allclose(t, 2 + 6 * x + 12 * x * x)     # actual: [nan, 8.]


@zm.func
def quadratic(x, c0, c1, c2):
    s = 0.0
    coef = (c0, c1, c2)
    for k in range(3):
        s += coef[k] * x ** k
    return s


@zm.kernel
def quadratic_slope(X, out):
    i = zm.grid(1)
    if i < X.shape[0]:
        out[i, 0] = zm.jacfwd(quadratic)(X[i], 1.0, 2.0, 3.0)
        out[i, 1] = zm.grad(quadratic)(X[i], 1.0, 2.0, 3.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bug_pow_zero_exponent_device_level(backend):
    X, out = np.array([0.0, 0.5]), np.zeros((2, 2))
    quadratic_slope.on(backend)[1, 2](X, out)
    np.testing.assert_allclose(out, np.stack([2 + 6 * X] * 2, 1))   # actual: [[nan, nan], ...]


@zm.kernel
def nested_ifexp_with_call(x, z, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        u = x[i]
        v = z[i]
        y[i] = u if u > 0.5 else (math.exp(u) if u > 0.0 else v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bug_nested_conditional_expression_with_call(backend):
    x, z = np.linspace(-1, 1, 8), np.linspace(1, -1, 8)
    t = np.zeros(8)
    zm.jvp(nested_ifexp_with_call).on(backend)[1, 8](zm.Duplicated(x, np.ones(8)), z,
                                                     zm.Duplicated(np.zeros(8), t))
    np.testing.assert_allclose(t, np.where(x > 0.5, 1.0, np.where(x > 0.0, np.exp(x), 0.0)))


@zm.func
def van_albada_like_limiter(r):
    if r <= 0.0:
        return 0.0
    elif r < 1.0:
        phi = 2.0 * r / (1.0 + r)
    else:
        phi = 1.0
    return phi


@zm.kernel
def limited(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = van_albada_like_limiter(x[i]) * x[i]


@pytest.mark.parametrize("backend", BACKENDS)
def test_bug_variable_defined_on_every_path_that_falls_through(backend):
    x = np.array([-0.5, 0.5, 2.0])
    t = np.zeros(3)
    zm.jvp(limited).on(backend)[1, 4](zm.Duplicated(x, np.ones(3)), zm.Duplicated(np.zeros(3), t))
    np.testing.assert_allclose(t, [0.0, 4 * 0.5 / 1.5 ** 2 * 0.5 + 2 * 0.5 / 1.5, 1.0])


@zm.kernel
def else_after_continue(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        s = 0.0
        for k in range(4):
            if x[i] * k > 2.0:
                continue
            else:
                r = x[i] * k
            s += r * r
        y[i] = s


@pytest.mark.parametrize("backend", BACKENDS)
def test_bug_variable_assigned_in_else_of_continue(backend):
    x = np.array([0.3, 0.9])
    t = np.zeros(2)
    zm.jvp(else_after_continue).on(backend)[1, 2](zm.Duplicated(x, np.ones(2)),
                                                  zm.Duplicated(np.zeros(2), t))
    np.testing.assert_allclose(t, [2 * 0.3 * 14, 2 * 0.9 * 5])


@zm.kernel
def bad_call_in_loop(x, y):
    i = zm.grid(1)
    s = 0.0
    for k in range(3):
        s += math.factorial(x[i])
    y[i] = s


def test_bug_error_inside_loop_is_a_diagnostic():
    with pytest.raises(zm.CompileError, match=r"test_jvp_kernels.py:\d+:\d+: error"):
        zm.jvp(bad_call_in_loop).on("interp")[1, 4](zm.Duplicated(np.ones(4), np.ones(4)),
                                                    zm.Duplicated(np.zeros(4), np.zeros(4)))


def test_bug_check_jvp_with_duplicated_scalar():
    x = np.random.default_rng(50).standard_normal(10)
    report = zm.check_jvp(sin_axpy, 1, 16, zm.Duplicated(0.5, 1.0),
                          zm.Duplicated(x, np.zeros(10)), zm.Duplicated(np.zeros(10), np.zeros(10)),
                          backend="interp")
    assert report.ok, str(report)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bug_jvp_with_duplicated_no_need(backend):
    x = np.linspace(0, 1, 4)
    t = np.zeros(4)
    zm.jvp(sin_axpy).on(backend)[1, 4](2.0, zm.Duplicated(x, np.ones(4)),
                                       zm.DuplicatedNoNeed(np.zeros(4), t))
    np.testing.assert_allclose(t, 2 * np.cos(x), rtol=1e-14)


@zm.kernel
def const_weights_in_if(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        w = zm.const.array_like(WEIGHTS)
        s = 0.0
        for k in range(4):
            s += w[k] * x[i] * x[i]
        y[i] = s


@pytest.mark.parametrize("backend", BACKENDS)
def test_bug_grad_with_const_array_inside_if(backend):
    x = np.linspace(0.1, 1, 4)
    t = np.zeros(4)
    zm.jvp(const_weights_in_if).on(backend)[1, 4](zm.Duplicated(x, np.ones(4)),
                                                  zm.Duplicated(np.zeros(4), t))
    np.testing.assert_allclose(t, 2 * x * WEIGHTS.sum(), rtol=1e-14)     # forward: fine
    dx = np.zeros(4)
    zm.grad(const_weights_in_if).on(backend)[1, 4](zm.Duplicated(x, dx),
                                                   zm.Duplicated(np.zeros(4), np.ones(4)))
    np.testing.assert_allclose(dx, 2 * x * WEIGHTS.sum(), rtol=1e-14)
