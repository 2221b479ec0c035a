"""Held-out reverse-mode checks, round 2: patterns not in test_grad_kernels.py (non-square
shared-memory tiles, halos in 2-D, block reductions inside loops, atomics in loops, Active
scalars in 2-D/3-D launches and beside shared memory, float32 and mixed precision, in-place
multi-output kernels, device functions with loops, integer index arithmetic, NN layers,
particle physics, flux limiters) and zm.Tape programs against central differences of the
whole program. Each kernel is checked with `zm.check_grad` on the CPU backend and the
interpreter. Tests marked xfail(strict=True) are minimal reproducers of bugs found."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm

BACKENDS = ("cpu", "interp")


def dup(a):
    return zm.Duplicated(a, np.zeros_like(a))


def _z(*shape, dtype=np.float64):
    return dup(np.zeros(shape, dtype))


def check(kernel, grid, block, *args, backend, **kw):
    report = zm.check_grad(kernel, grid, block, *args, backend=backend, **kw)
    assert report.ok, str(report)
    return report


# ---------------------------------------------------------------------------------------------
# shared-memory tiling
# ---------------------------------------------------------------------------------------------
TM, TN, TK = 4, 8, 8


@zm.kernel
def matmul_rect_tiles(A, B, C):
    """C tile of 4x8 (block (8, 4)), K tiles of 8: each thread loads one A element and two
    B elements per tile; ragged edges everywhere."""
    sA = zm.shared.array((TM, TK), zm.f64)
    sB = zm.shared.array((TK, TN), zm.f64)
    tx = zm.threadIdx.x
    ty = zm.threadIdx.y
    row = zm.blockIdx.y * TM + ty
    col = zm.blockIdx.x * TN + tx
    m, k = A.shape[0], A.shape[1]
    acc = 0.0
    for t0 in range(0, k, TK):
        sA[ty, tx] = A[row, t0 + tx] if row < m and t0 + tx < k else 0.0
        for r in range(2):
            kk = ty + 4 * r
            sB[kk, tx] = B[t0 + kk, col] if t0 + kk < k and col < B.shape[1] else 0.0
        zm.syncthreads()
        for q in range(TK):
            acc += sA[ty, q] * sB[q, tx]
        zm.syncthreads()
    if row < m and col < C.shape[1]:
        C[row, col] = acc * acc + acc


@zm.kernel
def halo2d_tile(u, out, c):
    """8x8 blocks with a one-cell halo, 5-point nonlinear Laplacian, zero outside; Active c."""
    tile = zm.shared.array((10, 10), zm.f64)
    tx = zm.threadIdx.x
    ty = zm.threadIdx.y
    j = zm.blockIdx.x * 8 + tx
    i = zm.blockIdx.y * 8 + ty
    ny, nx = u.shape[0], u.shape[1]
    tile[ty + 1, tx + 1] = u[i, j] if i < ny and j < nx else 0.0
    if tx == 0:
        tile[ty + 1, 0] = u[i, j - 1] if i < ny and j >= 1 and j - 1 < nx else 0.0
    if tx == 7:
        tile[ty + 1, 9] = u[i, j + 1] if i < ny and j + 1 < nx else 0.0
    if ty == 0:
        tile[0, tx + 1] = u[i - 1, j] if i >= 1 and i - 1 < ny and j < nx else 0.0
    if ty == 7:
        tile[9, tx + 1] = u[i + 1, j] if i + 1 < ny and j < nx else 0.0
    zm.syncthreads()
    if i < ny and j < nx:
        cc = tile[ty + 1, tx + 1]
        lap = tile[ty, tx + 1] + tile[ty + 2, tx + 1] + tile[ty + 1, tx] + tile[ty + 1, tx + 2] \
            - 4.0 * cc
        out[i, j] = cc + c * lap * (1.0 + cc * cc)


@zm.kernel
def block_reduce_per_feature(x, out):
    """One block reduces all feature columns, a shared tree reduction per feature (barriers
    inside an outer loop), the block's partial added atomically."""
    sm = zm.shared.array(32, zm.f64)
    t = zm.threadIdx.x
    i = zm.grid(1)
    n, f = x.shape[0], x.shape[1]
    for j in range(f):
        sm[t] = x[i, j] * x[i, j] if i < n else 0.0
        zm.syncthreads()
        s = 16
        for _ in range(5):
            if t < s:
                sm[t] += sm[t + s]
            zm.syncthreads()
            s //= 2
        if t == 0:
            zm.atomic.add(out, j, math.sqrt(sm[0] + 1.0))
        zm.syncthreads()


@zm.kernel
def shared_active_2d(x, out, a, b):
    """2-D blocks, row sums staged in shared memory, two Active scalars used before and after
    the barrier."""
    sm = zm.shared.array((4, 8), zm.f64)
    tx = zm.threadIdx.x
    ty = zm.threadIdx.y
    r = zm.blockIdx.y * 4 + ty
    c = zm.blockIdx.x * 8 + tx
    inside = r < x.shape[0] and c < x.shape[1]
    sm[ty, tx] = math.tanh(a * x[r, c]) if inside else 0.0
    zm.syncthreads()
    if inside:
        s = 0.0
        for k in range(8):
            s += sm[ty, k]
        out[r, c] = b * s * sm[ty, tx] + a * b


# ---------------------------------------------------------------------------------------------
# atomics, scalars, launches in 2-D and 3-D
# ---------------------------------------------------------------------------------------------
@zm.kernel
def soft_histogram(x, centers, hist, width):
    """Atomics inside a loop over bins: Gaussian soft binning."""
    i = zm.grid(1)
    if i < x.shape[0]:
        for b in range(centers.shape[0]):
            d = (x[i] - centers[b]) / width
            zm.atomic.add(hist, b, math.exp(-0.5 * d * d))


@zm.kernel
def active_2d(u, out, a, b):
    i, j = zm.grid(2)
    if i < u.shape[0] and j < u.shape[1]:
        v = u[i, j]
        out[i, j] = a * v * v + b * math.sin(a * v) + a * b


@zm.kernel
def active_3d(u, out, k, s):
    i, j, m = zm.grid(3)
    if i < u.shape[0] and j < u.shape[1] and m < u.shape[2]:
        out[i, j, m] = math.exp(-k * u[i, j, m] * u[i, j, m]) * s + k * (i + 2 * j - m)


@zm.kernel
def multi_active_loop(x, y, a, b, c, n):
    """Three Active scalars, a run-time trip count from a scalar argument."""
    i = zm.grid(1)
    if i < x.shape[0]:
        acc = x[i]
        for _ in range(n):
            acc = a * acc + b * math.sin(acc) + c
        y[i] = acc


# ---------------------------------------------------------------------------------------------
# precision
# ---------------------------------------------------------------------------------------------
@zm.kernel
def mlp_f32(x, W, bias, y):
    """A tanh layer in float32, weights read by every thread."""
    i = zm.grid(1)
    if i < x.shape[0]:
        for o in range(W.shape[0]):
            s = bias[o]
            for k in range(W.shape[1]):
                s += W[o, k] * x[i, k]
            y[i, o] = math.tanh(s)


@zm.kernel
def mixed_precision(x32, y64, out64, out32):
    i = zm.grid(1)
    if i < x32.shape[0]:
        a = float(x32[i])
        b = y64[i]
        out64[i] = a * b + math.exp(a * 0.5) * zm.f32(1.5)
        out32[i] = zm.f32(b) * x32[i] + x32[i] * x32[i]


# ---------------------------------------------------------------------------------------------
# in-place, several outputs, early return, device functions, tuples
# ---------------------------------------------------------------------------------------------
@zm.kernel
def symplectic_inplace(q, p, energy, dt, nsteps):
    """Semi-implicit Euler, updating q and p in place; energy is a third output."""
    i = zm.grid(1)
    if i < q.shape[0]:
        for _ in range(nsteps):
            p[i] = p[i] - dt * math.sin(q[i])
            q[i] = q[i] + dt * p[i]
        energy[i] = 0.5 * p[i] * p[i] - math.cos(q[i])


@zm.kernel
def early_return_in_loop(x, y, thresh):
    i = zm.grid(1)
    if i >= x.shape[0]:
        return
    acc = 0.0
    v = x[i]
    for k in range(8):
        acc = acc * 0.9 + v * math.cos(k * v)
        if acc > thresh:
            y[i] = acc * acc
            return
    y[i] = -acc


@zm.func
def soft_clip_iter(v, n):
    r = v
    for _ in range(n):
        if r > 1.0:
            r = 1.0 + 0.5 * math.tanh(r - 1.0)
        elif r < -1.0:
            r = -1.0 + 0.5 * math.tanh(r + 1.0)
        else:
            r = r * (1.1 - 0.1 * r * r)
    return r


@zm.kernel
def devfunc_in_loop(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        s = 0.0
        for k in range(4):
            s += soft_clip_iter(x[i] * (k + 1), k + 1)
        y[i] = s


@zm.func
def cmul(a, b):
    return (a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0])


@zm.func
def cadd(a, b):
    return (a[0] + b[0], a[1] + b[1])


@zm.kernel
def complex_iter(z, c, out):
    """z <- z*z + c (10 fixed steps), complex numbers as tuples through device functions."""
    i = zm.grid(1)
    if i < z.shape[0]:
        w = (z[i, 0], z[i, 1])
        cc = (c[i, 0], c[i, 1])
        for _ in range(6):
            w = cadd(cmul(w, w), cc)
            w = (0.5 * w[0], 0.5 * w[1])
        out[i, 0] = w[0]
        out[i, 1] = w[1]


@zm.kernel
def index_arith(x, y):
    """Gathers through modulo, floor division and clamps; the same element read often."""
    i = zm.grid(1)
    n = x.shape[0]
    if i < y.shape[0]:
        a = x[(3 * i + 1) % n]
        b = x[i // 2]
        c = x[min(max(i - 3, 0), n - 1)]
        d = x[(n - 1 - i) % n]
        y[i] = a * b + c * c * d + x[i // 2] * a


@zm.kernel
def repeated_reads(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = x[i] * x[i] + math.sin(x[i]) * x[i] + x[i] / (1.0 + x[i] * x[i])


@zm.kernel
def conditional_stores(x, y, z):
    """Each thread writes y or z or neither (they keep their values: identity derivative)."""
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        if v > 0.3:
            y[i] = v * v
        elif v < -0.3:
            z[i] = math.exp(v) * y[i]


@zm.kernel
def while_data_exit(x, y, tol):
    """Newton for sqrt with a data-dependent exit and an iteration cap."""
    i = zm.grid(1)
    if i < x.shape[0]:
        a = x[i]
        g = a
        it = 0
        while abs(g * g - a) > tol and it < 60:
            g = 0.5 * (g + a / g)
            it += 1
        y[i] = g * a


# ---------------------------------------------------------------------------------------------
# neural-network-like
# ---------------------------------------------------------------------------------------------
@zm.kernel
def conv1d_multichannel(x, w, bias, y):
    """y[o, t] = relu-ish(sum_{c,k} w[o, c, k] x[c, t + k - 1] + bias[o]); 2-D launch (t, o)."""
    t, o = zm.grid(2)
    C, T = x.shape[0], x.shape[1]
    if t < T and o < y.shape[0]:
        s = bias[o]
        for c in range(C):
            for k in range(3):
                tt = t + k - 1
                if 0 <= tt < T:
                    s += w[o, c, k] * x[c, tt]
        y[o, t] = s if s > 0.0 else 0.1 * s


@zm.kernel
def conv2d_stride2(img, w, out):
    """3x3 convolution with stride 2, two input channels."""
    i, j = zm.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        s = 0.0
        for c in range(2):
            for a in range(3):
                for b in range(3):
                    s += w[c, a, b] * img[c, 2 * i + a, 2 * j + b]
        out[i, j] = math.tanh(s)


@zm.kernel
def batchnorm_block(x, gamma, beta, y, eps):
    """One block per feature; mean and variance over the batch by shared reductions."""
    sm = zm.shared.array(32, zm.f64)
    f = zm.blockIdx.x
    t = zm.threadIdx.x
    n = x.shape[0]
    v = x[t, f] if t < n else 0.0
    sm[t] = v
    zm.syncthreads()
    s = 16
    for _ in range(5):
        if t < s:
            sm[t] += sm[t + s]
        zm.syncthreads()
        s //= 2
    mean = sm[0] / n
    zm.syncthreads()
    d = v - mean if t < n else 0.0
    sm[t] = d * d
    zm.syncthreads()
    s = 16
    for _ in range(5):
        if t < s:
            sm[t] += sm[t + s]
        zm.syncthreads()
        s //= 2
    var = sm[0] / n
    if t < n:
        y[t, f] = gamma[f] * d / math.sqrt(var + eps) + beta[f]


@zm.kernel
def attention_row(Q, K, V, out):
    """One thread per query row: scores, row-wise softmax (max-subtracted), weighted sum."""
    i = zm.grid(1)
    nq, nk, d = Q.shape[0], K.shape[0], Q.shape[1]
    if i < nq:
        scale = 1.0 / math.sqrt(d)
        m = -1e30
        for j in range(nk):
            s = 0.0
            for c in range(d):
                s += Q[i, c] * K[j, c]
            m = max(m, s * scale)
        tot = 0.0
        for j in range(nk):
            s = 0.0
            for c in range(d):
                s += Q[i, c] * K[j, c]
            tot += math.exp(s * scale - m)
        for c in range(V.shape[1]):
            out[i, c] = 0.0
        for j in range(nk):
            s = 0.0
            for c in range(d):
                s += Q[i, c] * K[j, c]
            p = math.exp(s * scale - m) / tot
            for c in range(V.shape[1]):
                out[i, c] += p * V[j, c]


# ---------------------------------------------------------------------------------------------
# physics
# ---------------------------------------------------------------------------------------------
@zm.kernel
def lennard_jones(pos, force, energy, eps, sigma, rc):
    i = zm.grid(1)
    n = pos.shape[0]
    if i < n:
        fx = 0.0
        fy = 0.0
        e = 0.0
        for j in range(n):
            if j != i:
                dx = pos[i, 0] - pos[j, 0]
                dy = pos[i, 1] - pos[j, 1]
                r2 = dx * dx + dy * dy
                if r2 < rc * rc:
                    s2 = sigma * sigma / r2
                    s6 = s2 * s2 * s2
                    e += 2.0 * eps * (s6 * s6 - s6)
                    fmag = 24.0 * eps * (2.0 * s6 * s6 - s6) / r2
                    fx += fmag * dx
                    fy += fmag * dy
        force[i, 0] = fx
        force[i, 1] = fy
        zm.atomic.add(energy, 0, e)


@zm.func
def minmod(a, b):
    if a * b <= 0.0:
        return 0.0
    return a if abs(a) < abs(b) else b


@zm.kernel
def burgers_limiter(u, out, dtdx):
    """Burgers with a MUSCL minmod reconstruction and Rusanov flux, periodic."""
    i = zm.grid(1)
    n = u.shape[0]
    if i < n:
        um2 = u[(i - 2 + n) % n]
        um1 = u[(i - 1 + n) % n]
        u0 = u[i]
        up1 = u[(i + 1) % n]
        up2 = u[(i + 2) % n]
        # interface i+1/2
        sl0 = minmod(u0 - um1, up1 - u0)
        sl1 = minmod(up1 - u0, up2 - up1)
        uL = u0 + 0.5 * sl0
        uR = up1 - 0.5 * sl1
        a = max(abs(uL), abs(uR))
        fR = 0.25 * (uL * uL + uR * uR) - 0.5 * a * (uR - uL)
        # interface i-1/2
        slm = minmod(um1 - um2, u0 - um1)
        vL = um1 + 0.5 * slm
        vR = u0 - 0.5 * sl0
        b = max(abs(vL), abs(vR))
        fL = 0.25 * (vL * vL + vR * vR) - 0.5 * b * (vR - vL)
        out[i] = u0 - dtdx * (fR - fL)


@zm.kernel
def advect2d_upwind(q, vel, out, dt):
    """2-D donor-cell advection with velocity sign chosen per cell, clamped boundaries."""
    i, j = zm.grid(2)
    ny, nx = q.shape[0], q.shape[1]
    if i < ny and j < nx:
        vx = vel[i, j, 0]
        vy = vel[i, j, 1]
        jm = max(j - 1, 0)
        jp = min(j + 1, nx - 1)
        im = max(i - 1, 0)
        ip = min(i + 1, ny - 1)
        dqx = q[i, j] - q[i, jm] if vx > 0.0 else q[i, jp] - q[i, j]
        dqy = q[i, j] - q[im, j] if vy > 0.0 else q[ip, j] - q[i, j]
        out[i, j] = q[i, j] - dt * (vx * dqx + vy * dqy)


@zm.kernel
def sph_pressure(pos, rho, acc, h, k0):
    """SPH pressure accelerations with a spiky-like kernel gradient and cutoff."""
    i = zm.grid(1)
    n = pos.shape[0]
    if i < n:
        ax = 0.0
        ay = 0.0
        pi = k0 * rho[i] * rho[i]
        for j in range(n):
            if j == i:
                continue
            dx = pos[i, 0] - pos[j, 0]
            dy = pos[i, 1] - pos[j, 1]
            r2 = dx * dx + dy * dy
            if r2 >= h * h:
                continue
            r = math.sqrt(r2 + 1e-12)
            q = h - r
            pj = k0 * rho[j] * rho[j]
            coef = (pi / (rho[i] * rho[i]) + pj / (rho[j] * rho[j])) * q * q / r
            ax += coef * dx
            ay += coef * dy
        acc[i, 0] = ax
        acc[i, 1] = ay


# ---------------------------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------------------------
def _lj_args(r):
    g = np.stack(np.meshgrid(np.arange(4.0), np.arange(4.0)), -1).reshape(-1, 2) * 1.1
    return [dup(g + r.uniform(-0.1, 0.1, g.shape)), _z(16, 2), _z(1), zm.Active(1.0),
            zm.Active(1.0), 2.0]


def _sph_args(r):
    return [dup(r.uniform(0, 2, (20, 2))), dup(r.uniform(0.8, 1.2, 20)), _z(20, 2), 0.8,
            zm.Active(0.5)]


CASES = [
    ("matmul_rect_tiles", matmul_rect_tiles, (2, 3), (8, 4),
     lambda r: [dup(r.standard_normal((10, 13))), dup(r.standard_normal((13, 11))), _z(10, 11)]),
    ("halo2d_tile", halo2d_tile, (2, 2), (8, 8),
     lambda r: [dup(r.standard_normal((11, 13))), _z(11, 13), zm.Active(0.15)]),
    ("block_reduce_per_feature", block_reduce_per_feature, 2, 32,
     lambda r: [dup(r.standard_normal((50, 3))), _z(3)]),
    ("shared_active_2d", shared_active_2d, (2, 2), (8, 4),
     lambda r: [dup(r.standard_normal((7, 13))), _z(7, 13), zm.Active(0.7), zm.Active(-1.2)]),
    ("soft_histogram", soft_histogram, 2, 32,
     lambda r: [dup(r.standard_normal(50)), dup(np.linspace(-2, 2, 6)), _z(6), zm.Active(0.6)]),
    ("active_2d", active_2d, (2, 3), (4, 4),
     lambda r: [dup(r.standard_normal((7, 10))), _z(7, 10), zm.Active(0.8), zm.Active(1.3)]),
    ("active_3d", active_3d, (2, 1, 2), (2, 4, 4),
     lambda r: [dup(r.standard_normal((3, 4, 6))), _z(3, 4, 6), zm.Active(0.4),
                zm.Active(1.7)]),
    ("multi_active_loop", multi_active_loop, 2, 16,
     lambda r: [dup(r.uniform(-1, 1, 25)), _z(25), zm.Active(0.6), zm.Active(0.3),
                zm.Active(0.1), 5]),
    ("mixed_precision", mixed_precision, 1, 32,
     lambda r: [dup(r.standard_normal(20).astype(np.float32)), dup(r.standard_normal(20)),
                _z(20), _z(20, dtype=np.float32)]),
    ("symplectic_inplace", symplectic_inplace, 1, 32,
     lambda r: [dup(r.uniform(-1, 1, 20)), dup(r.uniform(-1, 1, 20)), _z(20), zm.Active(0.1),
                6]),
    ("early_return_in_loop", early_return_in_loop, 2, 32,
     lambda r: [dup(r.uniform(-1.5, 1.5, 50)), _z(50), 1.2]),
    ("devfunc_in_loop", devfunc_in_loop, 1, 32, lambda r: [dup(r.uniform(-1.5, 1.5, 30)), _z(30)]),
    ("complex_iter", complex_iter, 1, 32,
     lambda r: [dup(r.uniform(-0.6, 0.6, (20, 2))), dup(r.uniform(-0.5, 0.5, (20, 2))),
                _z(20, 2)]),
    ("index_arith", index_arith, 1, 32, lambda r: [dup(r.standard_normal(17)), _z(30)]),
    ("repeated_reads", repeated_reads, 1, 32, lambda r: [dup(r.standard_normal(30)), _z(30)]),
    ("conditional_stores", conditional_stores, 2, 32,
     lambda r: [dup(r.uniform(-1, 1, 50)), dup(r.standard_normal(50)),
                dup(r.standard_normal(50))]),
    ("while_data_exit", while_data_exit, 1, 32,
     lambda r: [dup(r.uniform(0.5, 4, 25)), _z(25), 1e-12]),
    ("conv1d_multichannel", conv1d_multichannel, (2, 2), (8, 2),
     lambda r: [dup(r.standard_normal((3, 12))), dup(r.standard_normal((4, 3, 3))),
                dup(r.standard_normal(4)), _z(4, 12)]),
    ("conv2d_stride2", conv2d_stride2, (1, 1), (4, 8),
     lambda r: [dup(r.standard_normal((2, 9, 13))), dup(0.3 * r.standard_normal((2, 3, 3))),
                _z(4, 6)]),
    ("batchnorm_block", batchnorm_block, 4, 32,
     lambda r: [dup(r.standard_normal((20, 4))), dup(r.standard_normal(4)),
                dup(r.standard_normal(4)), _z(20, 4), 1e-5]),
    ("attention_row", attention_row, 1, 8,
     lambda r: [dup(r.standard_normal((5, 4))), dup(r.standard_normal((6, 4))),
                dup(r.standard_normal((6, 3))), _z(5, 3)]),
    ("lennard_jones", lennard_jones, 1, 16, _lj_args),
    ("burgers_limiter", burgers_limiter, 2, 32,
     lambda r: [dup(np.sin(np.linspace(0, 2 * np.pi, 40, endpoint=False)) + 0.3
                    * r.standard_normal(40)), _z(40), zm.Active(0.2)]),
    ("advect2d_upwind", advect2d_upwind, (2, 2), (4, 8),
     lambda r: [dup(r.standard_normal((7, 12))), dup(r.uniform(-1, 1, (7, 12, 2))), _z(7, 12),
                zm.Active(0.1)]),
    ("sph_pressure", sph_pressure, 1, 32, _sph_args),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, kernel, grid, block, make", CASES, ids=[c[0] for c in CASES])
def test_gradient(name, kernel, grid, block, make, backend):
    seed = sum(map(ord, name))
    args = make(np.random.default_rng(seed))
    check(kernel, grid, block, *args, backend=backend, seed=seed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mlp_float32_native_and_f64(backend):
    r = np.random.default_rng(11)
    x = r.standard_normal((12, 5)).astype(np.float32)
    W = (0.5 * r.standard_normal((3, 5))).astype(np.float32)
    b = r.standard_normal(3).astype(np.float32)
    for precision in ("float64", "native"):
        kw = dict(rtol=2e-2, atol=1e-3, step=1e-2) if precision == "native" else {}
        check(mlp_f32, 1, 16, dup(x), dup(W), dup(b), _z(12, 3, dtype=np.float32),
              backend=backend, precision=precision, **kw)


# ---------------------------------------------------------------------------------------------
# round 2b: harder control flow and memory patterns
# ---------------------------------------------------------------------------------------------
@zm.kernel
def matmul_accumulate_tiles(A, B, C, alpha, ktiles):
    """C += alpha * A @ B (C is input and output), number of K tiles from a scalar argument."""
    sA = zm.shared.array((4, 4), zm.f64)
    sB = zm.shared.array((4, 4), zm.f64)
    tx = zm.threadIdx.x
    ty = zm.threadIdx.y
    row = zm.blockIdx.y * 4 + ty
    col = zm.blockIdx.x * 4 + tx
    acc = 0.0
    for t in range(ktiles):
        sA[ty, tx] = A[row, t * 4 + tx]
        sB[ty, tx] = B[t * 4 + ty, col]
        zm.syncthreads()
        for k in range(4):
            acc += sA[ty, k] * sB[k, tx]
        zm.syncthreads()
    C[row, col] = C[row, col] + alpha * acc


@zm.kernel
def jacobi_shared_steps(x, y, steps):
    """One block smooths its tile for a run-time number of sweeps, shared ping-pong."""
    a = zm.shared.array(34, zm.f64)
    b = zm.shared.array(34, zm.f64)
    t = zm.threadIdx.x
    i = zm.grid(1)
    a[t + 1] = x[i]
    b[t + 1] = 0.0
    if t == 0:
        a[0] = 0.0
        a[33] = 0.0
        b[0] = 0.0
        b[33] = 0.0
    zm.syncthreads()
    for s in range(steps):
        if s % 2 == 0:
            b[t + 1] = 0.25 * a[t] + 0.5 * a[t + 1] + 0.25 * a[t + 2] + 0.1 * a[t + 1] * a[t + 1]
        else:
            a[t + 1] = 0.25 * b[t] + 0.5 * b[t + 1] + 0.25 * b[t + 2] + 0.1 * b[t + 1] * b[t + 1]
        zm.syncthreads()
    y[i] = b[t + 1] if steps % 2 == 1 else a[t + 1]


@zm.kernel
def triangular_loop(x, y):
    """Thread-dependent trip count range(i, n) and a reversed inner loop."""
    i = zm.grid(1)
    n = x.shape[0]
    if i < n:
        s = 0.0
        for j in range(i, n):
            s += x[j] * x[i] / (1.0 + j - i)
        for j in range(i - 1, -1, -1):
            s -= 0.1 * x[j] * s
        y[i] = s


@zm.kernel
def local_topk(x, out):
    """Top 3 kept sorted in a local array by conditional swaps (constant-bound loops)."""
    i = zm.grid(1)
    if i < x.shape[0]:
        top = zm.local.array(3, zm.f64)
        for k in range(3):
            top[k] = -1e30
        for j in range(x.shape[1]):
            v = x[i, j]
            for p in range(3):
                if v > top[p]:
                    tmp = top[p]
                    top[p] = v
                    v = tmp
        out[i] = top[0] + 2.0 * top[1] + 3.0 * top[2]


@zm.kernel
def local_topk_while(x, out):
    """The same with a while loop whose exit reads the local array (documented limitation)."""
    i = zm.grid(1)
    if i < x.shape[0]:
        top = zm.local.array(3, zm.f64)
        for k in range(3):
            top[k] = -1e30
        for j in range(x.shape[1]):
            v = x[i, j]
            if v > top[2]:
                p = 2
                while p > 0 and top[p - 1] < v:
                    top[p] = top[p - 1]
                    p -= 1
                top[p] = v
        out[i] = top[0] + 2.0 * top[1] + 3.0 * top[2]


@zm.kernel
def math_zoo2(x, y, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        a = x[i]
        b = y[i]
        out[i] = (math.atan2(a, b) + math.hypot(a, b) + a ** 3 + b ** -2
                  + math.fmod(a * 5.0, 1.7) + math.copysign(a * a, b) + math.log1p(a * a)
                  + math.expm1(0.3 * b) + math.asinh(a) + math.acos(0.4 * math.tanh(b))
                  + math.cbrt(a * a + 0.5) + math.pow(abs(b) + 0.5, a))


@zm.kernel
def periodic_2d(u, out, c):
    i, j = zm.grid(2)
    ny, nx = u.shape[0], u.shape[1]
    if i < ny and j < nx:
        n = u[(i - 1 + ny) % ny, j]
        s = u[(i + 1) % ny, j]
        w = u[i, (j - 1 + nx) % nx]
        e = u[i, (j + 1) % nx]
        v = u[i, j]
        out[i, j] = v + c * (n + s + w + e - 4.0 * v) - c * v * v * v


@zm.kernel
def grid_stride_shared_active(x, out, a):
    """Grid-stride loop, a block-level shared reduction afterwards, Active scalar in both."""
    sm = zm.shared.array(32, zm.f64)
    t = zm.threadIdx.x
    s = 0.0
    for i in range(zm.grid(1), x.shape[0], zm.gridsize(1)):
        s += math.sin(a * x[i])
    sm[t] = s
    zm.syncthreads()
    if t == 0:
        tot = 0.0
        for k in range(32):
            tot += sm[k] * a
        zm.atomic.add(out, 0, tot)


@zm.func
def refine(v, a):
    """Device function with a while loop and an early return."""
    k = 0
    while k < 20:
        if v > a:
            return v - a, k
        v = v * 1.5 + 0.1
        k += 1
    return v, k


@zm.kernel
def devfunc_while_tuple(x, y, a):
    i = zm.grid(1)
    if i < x.shape[0]:
        r, k = refine(x[i], a)
        y[i] = r * (k + 1)


@zm.kernel
def scatter_loop_atomic(x, idx, w, out):
    """Each thread scatters into several bins through an index table, in a loop."""
    i = zm.grid(1)
    if i < x.shape[0]:
        for k in range(idx.shape[1]):
            zm.atomic.add(out, idx[i, k], w[k] * x[i] * x[i])


@zm.kernel
def inplace_two_arrays(u, v, c):
    """u and v both read and written in place, each thread its own elements, read twice."""
    i = zm.grid(1)
    if i < u.shape[0]:
        a = u[i]
        b = v[i]
        u[i] = a * b + c
        v[i] = v[i] * u[i] + math.sin(a)
        u[i] = u[i] * 2.0 - v[i]


@zm.kernel
def loop_carried_tuple(x, y, n):
    i = zm.grid(1)
    if i < x.shape[0]:
        st = (x[i], 0.0, 1.0)
        for _ in range(n):
            st = (st[0] * 0.9 + 0.1 * st[2], st[1] + st[0] * st[0], st[2] * math.cos(st[0]))
        y[i] = st[0] + st[1] + st[2]


CASES2 = [
    ("matmul_accumulate_tiles", matmul_accumulate_tiles, (2, 2), (4, 4),
     lambda r: [dup(r.standard_normal((8, 12))), dup(r.standard_normal((12, 8))),
                dup(r.standard_normal((8, 8))), zm.Active(0.7), 3]),
    ("jacobi_shared_steps", jacobi_shared_steps, 2, 32,
     lambda r: [dup(0.5 * r.standard_normal(64)), _z(64), 5]),
    ("triangular_loop", triangular_loop, 1, 32, lambda r: [dup(r.standard_normal(20)), _z(20)]),
    ("local_topk", local_topk, 1, 16, lambda r: [dup(r.standard_normal((12, 7))), _z(12)]),
    ("math_zoo2", math_zoo2, 1, 32,
     lambda r: [dup(r.uniform(0.2, 1.5, 30)), dup(r.uniform(0.3, 1.5, 30) * r.choice([-1, 1], 30)),
                _z(30)]),
    ("periodic_2d", periodic_2d, (2, 2), (4, 4),
     lambda r: [dup(r.standard_normal((7, 6))), _z(7, 6), zm.Active(0.1)]),
    ("grid_stride_shared_active", grid_stride_shared_active, 2, 32,
     lambda r: [dup(r.standard_normal(150)), _z(1), zm.Active(0.9)]),
    ("devfunc_while_tuple", devfunc_while_tuple, 1, 32,
     lambda r: [dup(r.uniform(0.1, 2.0, 30)), _z(30), zm.Active(1.7)]),
    ("scatter_loop_atomic", scatter_loop_atomic, 1, 32,
     lambda r: [dup(r.standard_normal(25)), r.integers(0, 5, (25, 3)).astype(np.int32),
                dup(r.standard_normal(3)), _z(5)]),
    ("inplace_two_arrays", inplace_two_arrays, 1, 32,
     lambda r: [dup(r.standard_normal(25)), dup(r.standard_normal(25)), zm.Active(0.4)]),
    ("loop_carried_tuple", loop_carried_tuple, 1, 32,
     lambda r: [dup(r.uniform(-1, 1, 20)), _z(20), 7]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, kernel, grid, block, make", CASES2, ids=[c[0] for c in CASES2])
def test_gradient_b(name, kernel, grid, block, make, backend):
    seed = sum(map(ord, name))
    args = make(np.random.default_rng(seed))
    check(kernel, grid, block, *args, backend=backend, seed=seed)


# ---------------------------------------------------------------------------------------------
# zm.Tape programs, against central differences of the whole program in float64
# ---------------------------------------------------------------------------------------------
@zm.kernel
def t_advect(src, dst, vel, dt):
    """Periodic upwind advection with a per-cell velocity (a parameter read every step)."""
    i = zm.grid(1)
    n = src.shape[0]
    if i < n:
        v = vel[i]
        if v > 0.0:
            d = src[i] - src[(i - 1 + n) % n]
        else:
            d = src[(i + 1) % n] - src[i]
        dst[i] = src[i] - dt * v * d


@zm.kernel
def t_react(u, k, dt):
    """In place: logistic growth with a per-cell rate (a parameter read every step)."""
    i = zm.grid(1)
    if i < u.shape[0]:
        u[i] = u[i] + dt * k[i] * u[i] * (1.0 - u[i])


@zm.kernel
def t_energy(u, w, out):
    """Block reduction in shared memory, one atomic per block into a 1-element array."""
    sm = zm.shared.array(32, zm.f64)
    t = zm.threadIdx.x
    i = zm.grid(1)
    sm[t] = w[i] * u[i] * u[i] if i < u.shape[0] else 0.0
    zm.syncthreads()
    s = 16
    for _ in range(5):
        if t < s:
            sm[t] += sm[t + s]
        zm.syncthreads()
        s //= 2
    if t == 0:
        zm.atomic.add(out, 0, sm[0])


@zm.kernel
def t_matvec_tanh(W, h, x, U, out):
    """out = tanh(W h + U x): W and U are shared by every time step (weight tying)."""
    i = zm.grid(1)
    if i < out.shape[0]:
        s = 0.0
        for k in range(h.shape[0]):
            s += W[i, k] * h[k]
        for k in range(x.shape[0]):
            s += U[i, k] * x[k]
        out[i] = math.tanh(s)


@zm.kernel
def t_sqdist(a, b, loss):
    i = zm.grid(1)
    if i < a.shape[0]:
        d = a[i] - b[i]
        zm.atomic.add(loss, 0, d * d)


def _fd_check(f, params, grads, seed=0, h=1e-6, tol=1e-6):
    """Directional central differences of the scalar program f(*params) against grads."""
    rng = np.random.default_rng(seed)
    for k, g in enumerate(grads):
        for _ in range(2):
            v = rng.standard_normal(params[k].shape)
            up = [p.copy() for p in params]
            down = [p.copy() for p in params]
            up[k] += h * v
            down[k] -= h * v
            fd = (f(*up) - f(*down)) / (2 * h)
            ad = float(np.vdot(g, v))
            assert abs(ad - fd) <= tol * max(1.0, abs(fd)), (k, ad, fd)


def _advect_react_program(backend, u0, vel, k, w, steps=5):
    a, b = u0.copy(), np.zeros_like(u0)
    first = a
    loss = np.zeros(1)
    for _ in range(steps):
        t_advect.on(backend)[2, 32](a, b, vel, 0.3)
        a, b = b, a
        t_react.on(backend)[2, 32](a, k, 0.2)
    t_energy.on(backend)[2, 32](a, w, loss)
    return first, loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_tape_pingpong_two_kernels_scalar_output(backend):
    r = np.random.default_rng(21)
    n = 45
    u0, vel, k, w = r.uniform(0.1, 0.9, n), r.uniform(-1, 1, n), r.uniform(0.5, 2, n), \
        r.standard_normal(n)
    with zm.Tape() as tape:
        first, loss = _advect_react_program(backend, u0, vel, k, w)
    tape.backward(loss, np.ones(1))
    grads = [tape.gradient(first), tape.gradient(vel), tape.gradient(k), tape.gradient(w)]

    def f(u0, vel, k, w):
        return float(_advect_react_program(backend, u0, vel, k, w)[1][0])

    _fd_check(f, [u0, vel, k, w], grads)


def _inplace_then_reduce(backend, u0, k, w):
    u = u0.copy()
    loss = np.zeros(1)
    t_react.on(backend)[2, 32](u, k, 0.5)
    t_energy.on(backend)[2, 32](u, w, loss)
    t_react.on(backend)[2, 32](u, k, 0.5)      # u changes after the reduction read it
    t_energy.on(backend)[2, 32](u, k, loss)    # k read by three launches
    return u, loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_tape_inplace_then_reduction(backend):
    r = np.random.default_rng(22)
    n = 50
    u0, k, w = r.uniform(0.1, 0.9, n), r.uniform(0.5, 2, n), r.standard_normal(n)
    with zm.Tape() as tape:
        u, loss = _inplace_then_reduce(backend, u0, k, w)
    tape.backward(loss, np.array([1.0]))
    grads = [tape.gradient(u), tape.gradient(k), tape.gradient(w)]

    def f(u0, k, w):
        return float(_inplace_then_reduce(backend, u0, k, w)[1][0])

    _fd_check(f, [u0, k, w], grads)


def _rnn_program(backend, W, U, xs, h0, target):
    h, nxt = h0.copy(), np.zeros_like(h0)
    first = h
    loss = np.zeros(1)
    for t in range(xs.shape[0]):
        x = xs[t].copy()
        t_matvec_tanh.on(backend)[1, 32](W, h, x, U, nxt)
        h, nxt = nxt, h
        t_sqdist.on(backend)[1, 32](h, target, loss)     # loss accumulated every step
    return first, loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_tape_rnn_weight_tying_accumulated_loss(backend):
    r = np.random.default_rng(23)
    H, X, T = 6, 3, 4
    W, U = 0.5 * r.standard_normal((H, H)), 0.5 * r.standard_normal((H, X))
    xs, h0, target = r.standard_normal((T, X)), r.standard_normal(H), r.standard_normal(H)
    with zm.Tape() as tape:
        first, loss = _rnn_program(backend, W, U, xs, h0, target)
    tape.backward([(loss, np.ones(1))])
    grads = [tape.gradient(W), tape.gradient(U), tape.gradient(first), tape.gradient(target)]

    def f(W, U, h0, target):
        return float(_rnn_program(backend, W, U, xs, h0, target)[1][0])

    _fd_check(f, [W, U, h0, target], grads)


def _two_outputs_program(backend, u0, k, w):
    u = u0.copy()
    v = np.zeros_like(u0)
    t_advect.on(backend)[2, 32](u, v, k, 0.25)      # v written
    t_react.on(backend)[2, 32](u, w, 0.3)           # u in place, after v read it
    out = np.zeros(1)
    t_energy.on(backend)[2, 32](v, w, out)          # v read after being written
    return u, v, out


@pytest.mark.parametrize("backend", BACKENDS)
def test_tape_several_seeds(backend):
    """Seeds on an intermediate read later (v), an in-place array (u) and the scalar."""
    r = np.random.default_rng(24)
    n = 40
    u0, k, w = r.uniform(0.1, 0.9, n), r.uniform(-1, 1, n), r.standard_normal(n)
    su, sv = r.standard_normal(n), r.standard_normal(n)
    with zm.Tape() as tape:
        u, v, out = _two_outputs_program(backend, u0, k, w)
    tape.backward([(u, su), (v, sv), (out, np.array([0.7]))])
    grads = [tape.gradient(u), tape.gradient(k), tape.gradient(w)]

    def f(u0, k, w):
        u, v, out = _two_outputs_program(backend, u0, k, w)
        return float(su @ u + sv @ v + 0.7 * out[0])

    _fd_check(f, [u0, k, w], grads)


# ---------------------------------------------------------------------------------------------
# round 2c: ownership and gather-form stencils (which thread reads which element)
# ---------------------------------------------------------------------------------------------
@zm.kernel
def data_dep_stencil(x, y):
    """Which neighbour is read depends on the data (the gather form must replay the test)."""
    i = zm.grid(1)
    n = x.shape[0]
    if 0 < i < n - 1:
        y[i] = x[i - 1] * x[i] if x[i] > 0.0 else x[i + 1] * 2.0


@zm.kernel
def radius_loop_stencil(x, w, y, rad):
    """Stencil radius from a scalar argument."""
    i = zm.grid(1)
    n = x.shape[0]
    if i < n:
        acc = 0.0
        for k in range(-rad, rad + 1):
            j = i + k
            if 0 <= j < n:
                acc += w[k + rad] * x[j] * x[j]
        y[i] = acc


@zm.kernel
def outer_2d_shared_rows(x, w, y):
    """x[i] read by every thread of a 2-D block row (y-threads share it)."""
    i, j = zm.grid(2)
    if i < y.shape[0] and j < y.shape[1]:
        y[i, j] = x[i] * x[i] * w[j]


@zm.kernel
def mod_m_readers(x, y, m):
    """x[i % m]: one reader per element or several, depending on m."""
    i = zm.grid(1)
    if i < y.shape[0]:
        y[i] = math.sin(x[i % m]) * x[i % m]


@zm.kernel
def shared_hist(x, out):
    """Atomics on a shared-memory histogram, flushed with global atomics."""
    h = zm.shared.array(8, zm.f64)
    t = zm.threadIdx.x
    if t < 8:
        h[t] = 0.0
    zm.syncthreads()
    i = zm.grid(1)
    if i < x.shape[0]:
        b = int(abs(x[i]) * 3.0) % 8
        zm.atomic.add(h, b, x[i] * x[i])
        zm.atomic.sub(h, (b + 1) % 8, 0.5 * x[i])
    zm.syncthreads()
    if t < 8:
        zm.atomic.add(out, t, h[t] * h[t])


@zm.kernel
def float_mod_div(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        y[i] = (v % 1.7) * v + (v // 0.5) * v + math.floor(v) * v * v + min(v, -v, 0.3 * v)


CASES3 = [
    ("data_dep_stencil", data_dep_stencil, 2, 32, lambda r: [dup(r.standard_normal(40)), _z(40)]),
    ("radius_loop_stencil", radius_loop_stencil, 2, 32,
     lambda r: [dup(r.standard_normal(40)), dup(r.standard_normal(5)), _z(40), 2]),
    ("outer_2d_shared_rows", outer_2d_shared_rows, (1, 1), (16, 4),
     lambda r: [dup(r.standard_normal(10)), dup(r.standard_normal(3)), _z(10, 3)]),
    ("mod_m_several_readers", mod_m_readers, 2, 32,
     lambda r: [dup(r.standard_normal(20)), _z(50), 7]),
    ("mod_m_one_reader", mod_m_readers, 2, 32,
     lambda r: [dup(r.standard_normal(60)), _z(50), 60]),
    ("shared_hist", shared_hist, 2, 32, lambda r: [dup(r.standard_normal(50)), _z(8)]),
    ("float_mod_div", float_mod_div, 1, 32, lambda r: [dup(r.uniform(-3, 3, 20)), _z(20)]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, kernel, grid, block, make", CASES3, ids=[c[0] for c in CASES3])
def test_gradient_c(name, kernel, grid, block, make, backend):
    seed = sum(map(ord, name))
    args = make(np.random.default_rng(seed))
    check(kernel, grid, block, *args, backend=backend, seed=seed)


# ---------------------------------------------------------------------------------------------
# bugs found (minimal reproducers)
# ---------------------------------------------------------------------------------------------
@zm.kernel
def inplace_range_lo_hi(y, lo, hi):
    i = zm.grid(1)
    if i < y.shape[0]:
        for _ in range(lo, hi):
            y[i] = math.sin(y[i])


@zm.kernel
def inplace_range_down(y, n):
    i = zm.grid(1)
    if i < y.shape[0]:
        for _ in range(n - 1, -1, -1):
            y[i] = math.sin(y[i])


@zm.kernel
def inplace_range_n(y, n):
    """The same update over range(n) works (global tape)."""
    i = zm.grid(1)
    if i < y.shape[0]:
        for _ in range(n):
            y[i] = math.sin(y[i])


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_range_n_works(backend):
    y = np.random.default_rng(1).uniform(0.2, 0.9, 20)
    check(inplace_range_n, 1, 32, dup(y), 3, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kernel, extra", [(inplace_range_lo_hi, (1, 4)),
                                           (inplace_range_down, (3,))],
                         ids=["range_lo_hi", "range_down"])
def test_inplace_update_in_runtime_ranges(kernel, extra, backend):
    y = np.random.default_rng(1).uniform(0.2, 0.9, 20)
    check(kernel, 1, 32, dup(y), *extra, backend=backend)


# ---------------------------------------------------------------------------------------------
# documented limitation: a while loop whose exit reads a local array that is overwritten
# ---------------------------------------------------------------------------------------------
def test_topk_while_reports_the_line():
    from zymo.diagnostics import CompileError
    x = np.random.default_rng(2).standard_normal((12, 7))
    with pytest.raises(CompileError) as info:
        zm.grad(local_topk_while).on("cpu")[1, 16](dup(x), _z(12))
    message = str(info.value)
    assert "test_grad_patterns.py:" in message and "while p > 0 and top[p - 1] < v" in message
