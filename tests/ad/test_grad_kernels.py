"""Held-out-style reverse-mode checks: kernels written the way a scientist would write them
(not taken from the corpus), each checked with `zm.check_grad` (central differences in float64,
random directions and cotangents) on the CPU backend and on the interpreter, some also
element by element against central differences, closed forms, or in float32.

The `test_bug_*` tests are minimal reproducers of bugs these kernels found (NaN gradients of
guarded expressions, x**0 at 0, `break` beside stores, const arrays inside an if), kept as
regression tests; the last section checks that documented limitations give an error naming the
offending source line."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm
from zymo.diagnostics import CompileError

BACKENDS = ("cpu", "interp")


def dup(a):
    return zm.Duplicated(a, np.zeros_like(a))


def check(kernel, grid, block, *args, backend, **kw):
    report = zm.check_grad(kernel, grid, block, *args, backend=backend, **kw)
    assert report.ok, str(report)
    return report


def elementwise_fd(kernel, grid, block, args, backend, h=1e-6, seed=0, tol=1e-6):
    """Every input element's derivative of <w, F> by central differences against zm.grad."""
    rng = np.random.default_rng(seed)
    kinds, vals = [], []
    for a in args:
        if isinstance(a, zm.Duplicated):
            kinds.append("dup")
            vals.append(np.array(a.value, dtype=np.float64))
        elif isinstance(a, zm.Active):
            kinds.append("active")
            vals.append(np.float64(a.value))
        else:
            kinds.append("const")
            vals.append(a)
    w = {k: rng.standard_normal(np.shape(v)) for k, v in enumerate(vals) if kinds[k] == "dup"}
    launcher = kernel.on(backend)

    def F(values):
        values = [v.copy() if isinstance(v, np.ndarray) else v for v in values]
        launcher[grid, block](*values)
        return sum(float(np.vdot(w[k], values[k])) for k in w)

    grad_args, shadows = [], {}
    for k, v in enumerate(vals):
        if kinds[k] == "dup":
            shadows[k] = w[k].copy()
            grad_args.append(zm.Duplicated(v.copy(), shadows[k]))
        elif kinds[k] == "active":
            grad_args.append(zm.Active(v))
        else:
            grad_args.append(v.copy() if isinstance(v, np.ndarray) else v)
    adjoints = iter(zm.grad(kernel).on(backend)[grid, block](*grad_args) or ())
    for k, v in enumerate(vals):
        if kinds[k] == "active":
            ad = float(next(adjoints))
            up, down = list(vals), list(vals)
            up[k], down[k] = v + h, v - h
            fd = (F(up) - F(down)) / (2 * h)
            assert abs(ad - fd) <= tol * max(1.0, abs(fd)), (k, ad, fd)
        elif kinds[k] == "dup":
            fd = np.zeros_like(v)
            for idx in np.ndindex(v.shape):
                up, down = list(vals), list(vals)
                up[k], down[k] = v.copy(), v.copy()
                up[k][idx] += h
                down[k][idx] -= h
                fd[idx] = (F(up) - F(down)) / (2 * h)
            np.testing.assert_allclose(shadows[k], fd, rtol=tol, atol=tol,
                                       err_msg=f"argument {k}")


# ---------------------------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------------------------
@zm.kernel
def piecewise(x, y, lo, hi):
    """Huber-like: linear / quadratic / sine pieces chosen by the data (if/elif/else)."""
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        if v < lo:
            r = lo * v - 0.5 * lo * lo
        elif v < hi:
            r = 0.5 * v * v
        else:
            r = hi * math.sin(v - hi) + 0.5 * hi * hi
        y[i] = r


@zm.kernel
def horner(c, x, y):
    """Polynomial with run-time degree, coefficients read by every thread, a negative step."""
    i = zm.grid(1)
    if i < x.shape[0]:
        acc = 0.0
        for k in range(c.shape[0] - 1, -1, -1):
            acc = acc * x[i] + c[k]
        y[i] = acc


@zm.kernel
def softmax_rows(x, y):
    r = zm.grid(1)
    if r < x.shape[0]:
        n = x.shape[1]
        m = x[r, 0]
        for j in range(1, n):
            m = max(m, x[r, j])
        s = 0.0
        for j in range(n):
            s += math.exp(x[r, j] - m)
        for j in range(n):
            y[r, j] = math.exp(x[r, j] - m) / s


@zm.kernel
def layernorm(x, gamma, beta, y, eps):
    r = zm.grid(1)
    if r < x.shape[0]:
        n = x.shape[1]
        mean = 0.0
        for j in range(n):
            mean += x[r, j]
        mean /= n
        var = 0.0
        for j in range(n):
            d = x[r, j] - mean
            var += d * d
        var /= n
        inv = 1.0 / math.sqrt(var + eps)
        for j in range(n):
            y[r, j] = (x[r, j] - mean) * inv * gamma[j] + beta[j]


@zm.kernel
def heat1d(u, out, alpha):
    i = zm.grid(1)
    n = u.shape[0]
    if i < n:
        if i == 0 or i == n - 1:
            out[i] = u[i]
        else:
            out[i] = u[i] + alpha * (u[i - 1] - 2.0 * u[i] + u[i + 1])


@zm.kernel
def heat2d_nonlinear(u, out, alpha):
    i, j = zm.grid(2)
    ny, nx = u.shape[0], u.shape[1]
    if i < ny and j < nx:
        if 0 < i < ny - 1 and 0 < j < nx - 1:
            lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
            out[i, j] = u[i, j] + alpha * lap * u[i, j]
        else:
            out[i, j] = 0.0


@zm.kernel
def nbody_forces(pos, mass, force, eps):
    i = zm.grid(1)
    n = pos.shape[0]
    if i < n:
        fx = 0.0
        fy = 0.0
        fz = 0.0
        for j in range(n):
            if j == i:
                continue
            dx = pos[j, 0] - pos[i, 0]
            dy = pos[j, 1] - pos[i, 1]
            dz = pos[j, 2] - pos[i, 2]
            r2 = dx * dx + dy * dy + dz * dz + eps
            inv = mass[j] / (r2 * math.sqrt(r2))
            fx += dx * inv
            fy += dy * inv
            fz += dz * inv
        force[i, 0] = fx * mass[i]
        force[i, 1] = fy * mass[i]
        force[i, 2] = fz * mass[i]


@zm.kernel
def bilinear(img, coords, out):
    """Gather through floor()ed, clamped coordinates; derivative w.r.t. image and coords."""
    i = zm.grid(1)
    if i < coords.shape[0]:
        h, w = img.shape[0], img.shape[1]
        y = coords[i, 0]
        x = coords[i, 1]
        y0f = math.floor(y)
        x0f = math.floor(x)
        fy = y - y0f
        fx = x - x0f
        y0 = min(max(int(y0f), 0), h - 2)
        x0 = min(max(int(x0f), 0), w - 2)
        out[i] = (img[y0, x0] * (1.0 - fy) * (1.0 - fx) + img[y0 + 1, x0] * fy * (1.0 - fx)
                  + img[y0, x0 + 1] * (1.0 - fy) * fx + img[y0 + 1, x0 + 1] * fy * fx)


@zm.kernel
def gather_scale(x, idx, w, y):
    i = zm.grid(1)
    if i < y.shape[0]:
        v = x[idx[i]]
        y[i] = w[i] * v * v


@zm.kernel
def scatter_sq(x, idx, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        zm.atomic.add(out, idx[i], x[i] * x[i])


@zm.kernel
def gaussian_bump(x, y, a, b):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = a * math.exp(-b * x[i] * x[i])


@zm.kernel
def sumexp_atomic(x, acc, shift):
    """The sum inside a logsumexp, accumulated with atomics."""
    i = zm.grid(1)
    if i < x.shape[0]:
        zm.atomic.add(acc, 0, math.exp(x[i] - shift))


@zm.kernel
def polar_multi(r, th, xo, yo, ro, to):
    i = zm.grid(1)
    if i < r.shape[0]:
        xx = r[i] * math.cos(th[i])
        yy = r[i] * math.sin(th[i])
        xo[i] = xx
        yo[i] = yy
        ro[i] = math.hypot(xx + 0.3, yy)
        to[i] = math.atan2(yy, xx + 0.3)


@zm.func
def rotate(x, y, c, s):
    return c * x - s * y, s * x + c * y


@zm.func
def rot_angle(x, y, t):
    return rotate(x, y, math.cos(t), math.sin(t))


@zm.func
def norm_and_angle(x, y):
    r = math.sqrt(x * x + y * y)
    if r < 1e-12:
        return 0.0, 0.0
    return r, math.atan2(y, x)


@zm.kernel
def devfuncs(p, t, out):
    i = zm.grid(1)
    if i < p.shape[0]:
        a, b = rot_angle(p[i, 0], p[i, 1], t[i])
        r, th = norm_and_angle(a + 0.1, b)
        out[i, 0] = r * th
        out[i, 1] = a * b


@zm.kernel
def cbrt_newton(x, y):
    """Newton iteration to convergence: while loop, data-dependent break."""
    i = zm.grid(1)
    if i < x.shape[0]:
        a = x[i]
        z = 1.0 + a / 3.0
        it = 0
        while it < 50:
            zn = z - (z * z * z - a) / (3.0 * z * z)
            if abs(zn - z) < 1e-15:
                z = zn
                break
            z = zn
            it += 1
        y[i] = z


@zm.kernel
def break_continue(a, y, thresh):
    i = zm.grid(1)
    if i < a.shape[0]:
        s = 0.0
        for k in range(a.shape[1]):
            v = a[i, k]
            if v < 0.0:
                continue
            s += v * v
            if s > thresh:
                break
        y[i] = s


@zm.kernel
def early_return(x, y, z):
    i = zm.grid(1)
    if i >= x.shape[0]:
        return
    v = x[i]
    if v < -1.0:
        y[i] = 0.0
        z[i] = v
        return
    w = math.tanh(v)
    if w > 0.5:
        y[i] = w * v
        return
    y[i] = w + v * v
    z[i] = w * w


@zm.kernel
def block_sum_cubes(x, out):
    s = zm.shared.array(64, zm.f64)
    t = zm.threadIdx.x
    i = zm.grid(1)
    v = 0.0
    if i < x.shape[0]:
        v = x[i]
    s[t] = v * v * v
    zm.syncthreads()
    step = 32
    while step > 0:
        if t < step:
            s[t] = s[t] + s[t + step]
        zm.syncthreads()
        step //= 2
    if t == 0:
        out[zm.blockIdx.x] = math.sqrt(s[0] * s[0] + 1.0)


@zm.kernel
def tile_conv(x, w, y):
    """A shared-memory tile with a one-element halo on each side."""
    tile = zm.shared.array(34, zm.f64)
    t = zm.threadIdx.x
    i = zm.grid(1)
    n = x.shape[0]
    tile[t + 1] = x[i] if i < n else 0.0
    if t == 0:
        tile[0] = x[i - 1] if i > 0 else 0.0
    if t == 31:
        tile[33] = x[i + 1] if i + 1 < n else 0.0
    zm.syncthreads()
    if i < n:
        y[i] = w[0] * tile[t] + w[1] * tile[t + 1] + w[2] * tile[t + 2] * tile[t + 1]


@zm.kernel
def pendulum_rk4(state, k, dt, nsteps):
    """RK4 for x'' = -k sin x, in place, run-time number of steps."""
    i = zm.grid(1)
    if i < state.shape[0]:
        x = state[i, 0]
        v = state[i, 1]
        kk = k[i]
        for _ in range(nsteps):
            a1 = -kk * math.sin(x)
            x2 = x + 0.5 * dt * v
            v2 = v + 0.5 * dt * a1
            a2 = -kk * math.sin(x2)
            x3 = x + 0.5 * dt * v2
            v3 = v + 0.5 * dt * a2
            a3 = -kk * math.sin(x3)
            x4 = x + dt * v3
            v4 = v + dt * a3
            a4 = -kk * math.sin(x4)
            x = x + dt / 6.0 * (v + 2.0 * v2 + 2.0 * v3 + v4)
            v = v + dt / 6.0 * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
        state[i, 0] = x
        state[i, 1] = v


@zm.kernel
def grid_stride(x, y, c):
    start = zm.grid(1)
    stride = zm.gridsize(1)
    for i in range(start, x.shape[0], stride):
        y[i] = math.erf(c * x[i]) * x[i] + zm.fma(x[i], x[i], c)


@zm.kernel
def matmul_sq(A, B, C):
    i, j = zm.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        C[i, j] = acc * acc


@zm.kernel
def warp_reduce(x, out):
    i = zm.grid(1)
    v = 0.0
    if i < x.shape[0]:
        v = math.sin(x[i]) * x[i]
    off = 16
    while off > 0:
        v += zm.shfl_down_sync(0xFFFFFFFF, v, off)
        off //= 2
    if zm.laneid == 0:
        zm.atomic.add(out, 0, v * v)


@zm.kernel
def inplace_loop(y, x, n):
    i = zm.grid(1)
    if i < y.shape[0]:
        for _ in range(n):
            y[i] = y[i] * math.cos(x[i]) + 0.1 * x[i]


@zm.kernel
def local_cumprod(a, out):
    i = zm.grid(1)
    if i < a.shape[0]:
        buf = zm.local.array(6, zm.f64)
        for k in range(6):
            buf[k] = a[i, k]
        for k in range(1, 6):
            buf[k] = buf[k] * buf[k - 1] + 0.5
        s = 0.0
        for k in range(6):
            s += buf[k] * (k + 1)
        out[i] = s


@zm.kernel
def grid3d_pointwise(u, v, out):
    i, j, k = zm.grid(3)
    if i < u.shape[0] and j < u.shape[1] and k < u.shape[2]:
        a = u[i, j, k]
        b = v[i, j, k]
        out[i, j, k] = a ** 3 - math.pow(abs(b) + 1.0, a) + min(a, b) * max(a, 0.0)


@zm.kernel
def laplace3d(u, out, h2):
    i, j, k = zm.grid(3)
    if 0 < i < u.shape[0] - 1 and 0 < j < u.shape[1] - 1 and 0 < k < u.shape[2] - 1:
        lap = (u[i - 1, j, k] + u[i + 1, j, k] + u[i, j - 1, k] + u[i, j + 1, k]
               + u[i, j, k - 1] + u[i, j, k + 1] - 6.0 * u[i, j, k]) / h2
        out[i, j, k] = lap * math.exp(-u[i, j, k] * u[i, j, k])


@zm.kernel
def logistic_map(x, r, y, n):
    """40 iterations of a run-time counted while loop (more than the 32 taped ones)."""
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        k = 0
        while k < n:
            v = r[i] * v * (1.0 - v)
            k += 1
        y[i] = v


@zm.kernel
def decay_until_small(x, y):
    """A while loop whose trip count depends on the data (~50 iterations)."""
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        steps = 0
        while v > 0.01:
            v = v * 0.9 + 0.001 * math.sin(v)
            steps += 1
        y[i] = v * steps


@zm.kernel
def conv_valid(x, w, y):
    i = zm.grid(1)
    K = w.shape[0]
    if i + K <= x.shape[0]:
        acc = 0.0
        for k in range(K):
            acc += w[k] * x[i + k]
        y[i] = math.tanh(acc)


@zm.kernel
def conv2d3x3(img, w, out):
    i, j = zm.grid(2)
    if i < img.shape[0] - 2 and j < img.shape[1] - 2:
        acc = 0.0
        for a in range(3):
            for b in range(3):
                acc += w[a, b] * img[i + a, j + b]
        out[i, j] = acc * acc


COEF = (1.0, -0.5, 0.25, -0.125)


@zm.kernel
def tuple_poly(x, y):
    """A module-level tuple indexed by the loop variable, and a loop over a tuple."""
    i = zm.grid(1)
    if i < x.shape[0]:
        acc = 0.0
        p = 1.0
        for k in range(4):
            acc += COEF[k] * p
            p *= x[i]
        for c in (0.3, 0.7):
            acc = acc * c + math.sinh(x[i] * c)
        y[i] = acc


@zm.kernel
def strided_partial(x, out):
    start = zm.grid(1)
    stride = zm.gridsize(1)
    s = 0.0
    for i in range(start, x.shape[0], stride):
        s += math.cos(x[i]) * x[i]
    zm.atomic.add(out, 0, s * s)


@zm.kernel
def softmax_block(x, y):
    """One block per row: shared-memory max and sum tree reductions."""
    sm = zm.shared.array(32, zm.f64)
    row = zm.blockIdx.x
    t = zm.threadIdx.x
    n = x.shape[1]
    v = x[row, t] if t < n else -1e30
    sm[t] = v
    zm.syncthreads()
    for lvl in range(5):
        s = 16 >> lvl
        if t < s:
            sm[t] = max(sm[t], sm[t + s])
        zm.syncthreads()
    m = sm[0]
    zm.syncthreads()
    e = math.exp(v - m) if t < n else 0.0
    sm[t] = e
    zm.syncthreads()
    for lvl in range(5):
        s = 16 >> lvl
        if t < s:
            sm[t] += sm[t + s]
        zm.syncthreads()
    tot = sm[0]
    if t < n:
        y[row, t] = e / tot


@zm.kernel
def tiled_matmul(A, B, C):
    sA = zm.shared.array((4, 4), zm.f64)
    sB = zm.shared.array((4, 4), zm.f64)
    tx = zm.threadIdx.x
    ty = zm.threadIdx.y
    row = zm.blockIdx.y * 4 + ty
    col = zm.blockIdx.x * 4 + tx
    n = A.shape[1]
    acc = 0.0
    for t0 in range(0, n, 4):
        sA[ty, tx] = A[row, t0 + tx] if row < A.shape[0] and t0 + tx < n else 0.0
        sB[ty, tx] = B[t0 + ty, col] if t0 + ty < n and col < B.shape[1] else 0.0
        zm.syncthreads()
        for k in range(4):
            acc += sA[ty, k] * sB[k, tx]
        zm.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = math.sin(acc)


@zm.kernel
def xor_normalize(x, y):
    i = zm.grid(1)
    v = x[i] * x[i]
    s = v
    m = 16
    while m > 0:
        s += zm.shfl_xor_sync(0xFFFFFFFF, s, m)
        m //= 2
    y[i] = x[i] / math.sqrt(s)


@zm.kernel
def cross_entropy(logits, labels, loss):
    r = zm.grid(1)
    if r < logits.shape[0]:
        n = logits.shape[1]
        m = -1e30
        for j in range(n):
            m = max(m, logits[r, j])
        s = 0.0
        for j in range(n):
            s += math.exp(logits[r, j] - m)
        zm.atomic.add(loss, 0, (math.log(s) + m - logits[r, labels[r]]) / logits.shape[0])


@zm.kernel
def active_in_shared(x, out, scale):
    sm = zm.shared.array(32, zm.f64)
    t = zm.threadIdx.x
    i = zm.grid(1)
    sm[t] = scale * x[i] if i < x.shape[0] else 0.0
    zm.syncthreads()
    if t == 0:
        acc = 0.0
        for k in range(32):
            acc += sm[k] * sm[k]
        out[zm.blockIdx.x] = acc * scale


@zm.kernel
def math_zoo(x, y, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        a = x[i]
        b = y[i]
        out[i] = (math.tan(0.3 * a) + math.asin(0.4 * b) + math.acos(0.3 * a)
                  + math.atan(a * b) + math.cosh(0.5 * a) + math.log10(b * b + 1.0)
                  + math.log2(a * a + 2.0) + math.copysign(a * a, b) + math.expm1(0.3 * b)
                  + math.log1p(a * a) + math.exp2(0.5 * b) + math.ceil(b) * a)


@zm.kernel
def gelu_clamp(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        g = 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))
        c = min(max(v, -1.0), 1.0)
        y[i] = g + c * math.fabs(v) + max(v, 0.0, 0.5 * v * v)


@zm.kernel
def short_circuit(x, y, z):
    i = zm.grid(1)
    if i < x.shape[0]:
        a = x[i]
        b = y[i]
        if a > 0.0 and b > 0.0 or -0.5 < a < 0.5 and not b > 1.0:
            z[i] = a * b
        else:
            z[i] = a - b * b
        z[i] += a if a > b else b * b


@zm.kernel
def sigmoid_bce(z, t, loss):
    i = zm.grid(1)
    if i < z.shape[0]:
        p = 1.0 / (1.0 + math.exp(-z[i]))
        zm.atomic.add(loss, 0, -(t[i] * math.log(p) + (1.0 - t[i]) * math.log(1.0 - p)))


@zm.kernel
def warp_scan(x, y):
    i = zm.grid(1)
    lane = zm.laneid
    v = x[i] * x[i]
    off = 1
    while off < 32:
        u = zm.shfl_up_sync(0xFFFFFFFF, v, off)
        if lane >= off:
            v += u
        off *= 2
    y[i] = math.sqrt(v)


@zm.kernel
def cic_deposit(pos, q, grid):
    """Cloud-in-cell: particles deposit charge to two cells with atomics."""
    i = zm.grid(1)
    if i < pos.shape[0]:
        p = pos[i]
        c = math.floor(p)
        f = p - c
        k = int(c)
        zm.atomic.add(grid, k, q[i] * (1.0 - f))
        zm.atomic.add(grid, k + 1, q[i] * f)


@zm.kernel
def sph_density(pos, mass, rho, h):
    i = zm.grid(1)
    n = pos.shape[0]
    if i < n:
        acc = 0.0
        for j in range(n):
            dx = pos[i, 0] - pos[j, 0]
            dy = pos[i, 1] - pos[j, 1]
            r2 = dx * dx + dy * dy
            if r2 < h * h:
                t = h * h - r2
                acc += mass[j] * t * t * t
        rho[i] = acc


@zm.kernel
def sparse_sym_scatter(vals, rows, cols, out, norm):
    i = zm.grid(1)
    if i < vals.shape[0]:
        v = vals[i]
        zm.atomic.add(out, (rows[i], cols[i]), v * v * norm)
        zm.atomic.sub(out, (cols[i], rows[i]), math.sin(v))


@zm.kernel
def springs(pos, edges, rest, k, force, energy):
    e = zm.grid(1)
    if e < edges.shape[0]:
        a = edges[e, 0]
        b = edges[e, 1]
        dx = pos[b, 0] - pos[a, 0]
        dy = pos[b, 1] - pos[a, 1]
        L = math.sqrt(dx * dx + dy * dy)
        s = k * (L - rest[e])
        fx = s * dx / L
        fy = s * dy / L
        zm.atomic.add(force, (a, 0), fx)
        zm.atomic.add(force, (a, 1), fy)
        zm.atomic.add(force, (b, 0), -fx)
        zm.atomic.add(force, (b, 1), -fy)
        zm.atomic.add(energy, 0, 0.5 * k * (L - rest[e]) ** 2)


@zm.kernel
def sphere_trace(ro, rd, radius, depth):
    i = zm.grid(1)
    if i < ro.shape[0]:
        t = 0.0
        for step in range(64):
            px = ro[i, 0] + t * rd[i, 0]
            py = ro[i, 1] + t * rd[i, 1]
            pz = ro[i, 2] + t * rd[i, 2]
            d = math.sqrt(px * px + py * py + pz * pz) - radius
            if d < 1e-10:
                break
            t += d
        depth[i] = t


@zm.kernel
def black_scholes(S, K, T, r, sigma, call):
    i = zm.grid(1)
    if i < S.shape[0]:
        sq = sigma * math.sqrt(T[i])
        d1 = (math.log(S[i] / K[i]) + (r + 0.5 * sigma * sigma) * T[i]) / sq
        d2 = d1 - sq
        n1 = 0.5 * (1.0 + math.erf(d1 / math.sqrt(2.0)))
        n2 = 0.5 * (1.0 + math.erf(d2 / math.sqrt(2.0)))
        call[i] = S[i] * n1 - K[i] * math.exp(-r * T[i]) * n2


@zm.func
def lap5(u, i, j):
    return u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]


@zm.kernel
def gray_scott(u, v, uo, vo, Du, k):
    i, j = zm.grid(2)
    if 0 < i < u.shape[0] - 1 and 0 < j < u.shape[1] - 1:
        uu = u[i, j]
        vv = v[i, j]
        r = uu * vv * vv
        uo[i, j] = uu + Du * lap5(u, i, j) - r + 0.05 * (1.0 - uu)
        vo[i, j] = vv + 0.5 * Du * lap5(v, i, j) + r - (k + 0.05) * vv


@zm.kernel
def restrict_fw(fine, coarse):
    """Full-weighting restriction (stride-2 neighbour reads) with a nonlinearity."""
    i = zm.grid(1)
    if 0 < i and 2 * i + 1 < fine.shape[0] and i < coarse.shape[0]:
        coarse[i] = (0.25 * fine[2 * i - 1] + 0.5 * fine[2 * i] * fine[2 * i]
                     + 0.25 * fine[2 * i + 1])


@zm.kernel
def prolong(coarse, fine):
    i = zm.grid(1)
    if i + 1 < coarse.shape[0]:
        fine[2 * i] = coarse[i] * coarse[i]
        fine[2 * i + 1] = 0.5 * (coarse[i] + coarse[i + 1])


@zm.kernel
def clamped_stencil(x, y):
    i = zm.grid(1)
    n = x.shape[0]
    if i < n:
        left = x[max(i - 1, 0)]
        r = x[min(i + 1, n - 1)]
        y[i] = left * r + math.sin(x[i]) * left


@zm.kernel
def periodic_stencil(x, y, c):
    i = zm.grid(1)
    n = x.shape[0]
    if i < n:
        left = x[(i - 1 + n) % n]
        r = x[(i + 1) % n]
        y[i] = x[i] + c * (left - 2.0 * x[i] + r) + 0.1 * left * r


@zm.kernel
def upwind(x, vel, y):
    i = zm.grid(1)
    n = x.shape[0]
    if 0 < i < n - 1:
        if vel[i] > 0.0:
            y[i] = x[i] - vel[i] * (x[i] - x[i - 1])
        else:
            y[i] = x[i] - vel[i] * (x[i + 1] - x[i])


@zm.kernel
def stencil_accumulate(x, y, a):
    """A gather-form stencil on x while y is updated in place."""
    i = zm.grid(1)
    n = x.shape[0]
    if 0 < i < n - 1:
        y[i] = y[i] * y[i] + a * (x[i - 1] - 2.0 * x[i] + x[i + 1]) * x[i + 1]


@zm.kernel
def bubble_sort_weighted(x, y):
    """Data-dependent swaps in a local array (static nest on a per-thread tape)."""
    i = zm.grid(1)
    if i < x.shape[0]:
        a = zm.local.array(5, zm.f64)
        for k in range(5):
            a[k] = x[i, k]
        for p in range(5):
            for k in range(4):
                lo = a[k]
                hi = a[k + 1]
                if lo > hi:
                    a[k] = hi
                    a[k + 1] = lo
        for k in range(5):
            y[i, k] = a[k] * (k + 1.0)


@zm.kernel
def matvec_inplace(A, b, y):
    i = zm.grid(1)
    if i < A.shape[0]:
        y[i] = 0.0
        for k in range(A.shape[1]):
            y[i] += A[i, k] * b[k]
            y[i] = y[i] * 0.9 + 0.1 * math.tanh(y[i])


@zm.kernel
def local_evolve(a, out, steps):
    i = zm.grid(1)
    if i < a.shape[0]:
        buf = zm.local.array(4, zm.f64)
        for k in range(4):
            buf[k] = a[i, k]
        for _ in range(steps):
            for k in range(1, 4):
                buf[k] = buf[k] + 0.1 * math.sin(buf[k - 1])
        s = 0.0
        for k in range(4):
            s += buf[k] * buf[k]
        out[i] = s


@zm.kernel
def prefix_product(x, y):
    """The trip count depends on the thread index (triangular over threads)."""
    i = zm.grid(1)
    if i < x.shape[0]:
        v = 1.0
        for j in range(i + 1):
            v = v * x[j] * 0.5 + math.sin(v)
        y[i] = v


@zm.func
def clipped_iter(v, n):
    for k in range(n):
        v = v * v * 0.5 + 0.2
        if v > 1.5:
            return v, k
    return v, n


@zm.kernel
def devfunc_early_loop(x, y, n):
    i = zm.grid(1)
    if i < x.shape[0]:
        v, k = clipped_iter(x[i], n)
        y[i] = v * (k + 1.0)


@zm.kernel
def explicit_euler(x, y, T, dt):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        for _ in range(int(T / dt)):
            v = v - dt * v * v * v
        y[i] = v


@zm.kernel
def block_smooth(x, y, steps):
    """Jacobi-like smoothing inside a block, double-buffered in shared memory."""
    a = zm.shared.array(34, zm.f64)
    b = zm.shared.array(34, zm.f64)
    t = zm.threadIdx.x + 1
    i = zm.grid(1)
    a[t] = x[i]
    if t == 1:
        a[0] = 0.0
        a[33] = 0.0
        b[0] = 0.0
        b[33] = 0.0
    zm.syncthreads()
    for _ in range(steps):
        b[t] = 0.25 * a[t - 1] + 0.5 * math.tanh(a[t]) + 0.25 * a[t + 1]
        zm.syncthreads()
        a[t] = b[t]
        zm.syncthreads()
    y[i] = a[t]


@zm.kernel
def shared_transpose(x, y):
    tile = zm.shared.array((8, 9), zm.f64)
    tx = zm.threadIdx.x
    ty = zm.threadIdx.y
    bx = zm.blockIdx.x * 8
    by = zm.blockIdx.y * 8
    r = by + ty
    c = bx + tx
    if r < x.shape[0] and c < x.shape[1]:
        tile[ty, tx] = math.exp(0.5 * x[r, c])
    zm.syncthreads()
    r2 = bx + ty
    c2 = by + tx
    if r2 < y.shape[0] and c2 < y.shape[1]:
        y[r2, c2] = tile[tx, ty] * x[c2, r2]


@zm.kernel
def babylonian(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        n = 0
        while True:
            v = 0.5 * (v + 2.0 / v)
            n += 1
            if n >= 6:
                break
        y[i] = v * x[i]


@zm.kernel
def early_active(x, y, a, b):
    i = zm.grid(1)
    if i >= x.shape[0]:
        return
    v = x[i]
    if v < 0.0:
        y[i] = b * v
        return
    y[i] = a * math.exp(-a * v) + b


@zm.kernel
def stream_compact(x, count, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        if v > 0.0:
            slot = zm.atomic.add(count, 0, 1)
            out[slot] = v * v


@zm.kernel
def embed_mlp(emb, tok, W, out):
    i = zm.grid(1)
    if i < tok.shape[0]:
        t = tok[i]
        for j in range(W.shape[0]):
            acc = 0.0
            for k in range(W.shape[1]):
                acc += W[j, k] * emb[t, k]
            out[i, j] = max(acc, 0.0) + 0.01 * min(acc, 0.0)


# ---------------------------------------------------------------------------------------------
# the table: name, kernel, grid, block, args(rng), element-wise finite differences too
# ---------------------------------------------------------------------------------------------
def _z(*shape):
    return dup(np.zeros(shape))


def _springs_args(rng):
    n = 8
    pos = rng.standard_normal((n, 2))
    edges = np.array([[i, (i + 1) % n] for i in range(n)] + [[0, 4], [2, 6]], np.int32)
    rest = rng.uniform(0.5, 1.5, len(edges))
    return [dup(pos), edges, dup(rest), zm.Active(2.0), _z(n, 2), _z(1)]


def _trace_args(rng):
    ro = np.tile([0.0, 0.0, -3.0], (12, 1)) + rng.uniform(-0.1, 0.1, (12, 3))
    rd = rng.standard_normal((12, 3)) * 0.1 + np.array([0, 0, 1.0])
    rd /= np.linalg.norm(rd, axis=1, keepdims=True)
    return [dup(ro), dup(rd), zm.Active(1.0), _z(12)]


CASES = [
    ("piecewise_const_bounds", piecewise, 1, 64,
     lambda r: [dup(r.uniform(-3, 3, 50)), _z(50), -1.0, 1.5], True),
    ("piecewise_active_bounds", piecewise, 1, 64,
     lambda r: [dup(r.uniform(-3, 3, 50)), _z(50), zm.Active(-1.0), zm.Active(1.5)], True),
    ("horner", horner, 1, 64,
     lambda r: [dup(r.standard_normal(5)), dup(r.uniform(-1, 1, 40)), _z(40)], True),
    ("softmax_rows", softmax_rows, 1, 8, lambda r: [dup(r.standard_normal((6, 7))), _z(6, 7)],
     True),
    ("layernorm", layernorm, 1, 8,
     lambda r: [dup(r.standard_normal((6, 7))), dup(r.standard_normal(7)),
                dup(r.standard_normal(7)), _z(6, 7), 1e-5], True),
    ("heat1d", heat1d, 1, 32, lambda r: [dup(r.standard_normal(30)), _z(30), zm.Active(0.2)],
     True),
    ("heat2d_nonlinear", heat2d_nonlinear, (3, 3), (4, 4),
     lambda r: [dup(r.standard_normal((9, 11))), _z(9, 11), zm.Active(0.1)], True),
    ("nbody_forces", nbody_forces, 1, 16,
     lambda r: [dup(r.standard_normal((12, 3))), dup(r.uniform(0.5, 1.5, 12)), _z(12, 3), 0.01],
     True),
    ("bilinear", bilinear, 1, 32,
     lambda r: [dup(r.standard_normal((6, 7))),
                dup(np.stack([r.uniform(0.1, 4.8, 20), r.uniform(0.1, 5.8, 20)], 1)), _z(20)],
     True),
    ("gather_scale", gather_scale, 1, 32,
     lambda r: [dup(r.standard_normal(10)), r.integers(0, 10, 25).astype(np.int32),
                dup(r.standard_normal(25)), _z(25)], True),
    ("scatter_sq", scatter_sq, 2, 32,
     lambda r: [dup(r.standard_normal(40)), r.integers(0, 6, 40).astype(np.int32), _z(6)], True),
    ("gaussian_bump", gaussian_bump, 3, 32,
     lambda r: [dup(r.standard_normal(70)), _z(70), zm.Active(1.3), zm.Active(0.7)], True),
    ("sumexp_atomic", sumexp_atomic, 2, 32, lambda r: [dup(r.standard_normal(50)), _z(1), 0.5],
     True),
    ("polar_multi", polar_multi, 1, 32,
     lambda r: [dup(r.uniform(0.5, 2, 30)), dup(r.uniform(-3, 3, 30))]
     + [_z(30) for _ in range(4)], True),
    ("devfuncs_nested_tuples", devfuncs, 1, 32,
     lambda r: [dup(r.standard_normal((20, 2))), dup(r.uniform(-2, 2, 20)), _z(20, 2)], True),
    ("cbrt_newton", cbrt_newton, 1, 32, lambda r: [dup(r.uniform(0.5, 3.0, 20)), _z(20)], True),
    ("break_continue", break_continue, 1, 16,
     lambda r: [dup(r.standard_normal((15, 8))), _z(15), 1.5], True),
    ("early_return", early_return, 1, 64, lambda r: [dup(r.uniform(-2, 2, 40)), _z(40), _z(40)],
     True),
    ("block_sum_cubes", block_sum_cubes, 3, 64, lambda r: [dup(r.standard_normal(150)), _z(3)],
     False),
    ("tile_conv", tile_conv, 3, 32,
     lambda r: [dup(r.standard_normal(90)), dup(r.standard_normal(3)), _z(90)], False),
    ("pendulum_rk4", pendulum_rk4, 1, 16,
     lambda r: [dup(r.standard_normal((10, 2))), dup(r.uniform(0.5, 2, 10)), zm.Active(0.05), 7],
     True),
    ("grid_stride", grid_stride, 2, 16,
     lambda r: [dup(r.standard_normal(100)), _z(100), zm.Active(0.8)], False),
    ("matmul_sq", matmul_sq, (2, 2), (4, 4),
     lambda r: [dup(r.standard_normal((5, 4))), dup(r.standard_normal((4, 6))), _z(5, 6)], True),
    ("warp_reduce", warp_reduce, 1, 96, lambda r: [dup(r.standard_normal(80)), _z(1)], False),
    ("inplace_loop", inplace_loop, 1, 32,
     lambda r: [dup(r.standard_normal(30)), dup(r.standard_normal(30)), 4], True),
    ("local_cumprod", local_cumprod, 1, 32, lambda r: [dup(r.uniform(-1, 1, (20, 6))), _z(20)],
     True),
    ("grid3d_pointwise", grid3d_pointwise, (1, 1, 1), (4, 4, 8),
     lambda r: [dup(r.standard_normal((3, 4, 5))), dup(r.standard_normal((3, 4, 5))),
                _z(3, 4, 5)], True),
    ("laplace3d", laplace3d, (2, 2, 2), (4, 4, 4),
     lambda r: [dup(r.standard_normal((5, 6, 7))), _z(5, 6, 7), zm.Active(0.5)], False),
    ("logistic_map_40", logistic_map, 1, 32,
     lambda r: [dup(r.uniform(0.2, 0.8, 20)), dup(r.uniform(2.5, 3.2, 20)), _z(20), 40], True),
    ("decay_until_small", decay_until_small, 1, 32, lambda r: [dup(r.uniform(0.5, 2, 20)), _z(20)],
     True),
    ("conv_valid", conv_valid, 2, 32,
     lambda r: [dup(r.standard_normal(40)), dup(r.standard_normal(5)), _z(40)], True),
    ("conv2d3x3", conv2d3x3, (2, 2), (4, 4),
     lambda r: [dup(r.standard_normal((8, 9))), dup(r.standard_normal((3, 3))), _z(6, 7)], False),
    ("tuple_poly", tuple_poly, 1, 32, lambda r: [dup(r.standard_normal(30)), _z(30)], True),
    ("strided_partial", strided_partial, 2, 16, lambda r: [dup(r.standard_normal(100)), _z(1)],
     False),
    ("softmax_block", softmax_block, 5, 32, lambda r: [dup(r.standard_normal((5, 27))), _z(5, 27)],
     False),
    ("tiled_matmul", tiled_matmul, (2, 2), (4, 4),
     lambda r: [dup(r.standard_normal((6, 10))), dup(r.standard_normal((10, 7))), _z(6, 7)],
     False),
    ("xor_normalize", xor_normalize, 2, 32, lambda r: [dup(r.uniform(0.5, 1, 64)), _z(64)], False),
    ("cross_entropy", cross_entropy, 1, 8,
     lambda r: [dup(r.standard_normal((8, 5))), r.integers(0, 5, 8).astype(np.int32), _z(1)],
     True),
    ("active_in_shared", active_in_shared, 2, 32,
     lambda r: [dup(r.standard_normal(60)), _z(2), zm.Active(0.7)], True),
    ("math_zoo", math_zoo, 1, 64,
     lambda r: [dup(r.uniform(-1.5, 1.5, 40)), dup(r.uniform(-1.5, 1.5, 40)), _z(40)], True),
    ("gelu_clamp", gelu_clamp, 1, 64, lambda r: [dup(r.uniform(-2, 2, 40)), _z(40)], True),
    ("short_circuit", short_circuit, 1, 64,
     lambda r: [dup(r.uniform(-2, 2, 40)), dup(r.uniform(-2, 2, 40)), _z(40)], True),
    ("warp_scan", warp_scan, 2, 32, lambda r: [dup(r.standard_normal(64)), _z(64)], False),
    ("cic_deposit", cic_deposit, 1, 32,
     lambda r: [dup(r.uniform(0.1, 8.9, 30)), dup(r.uniform(0.5, 1.5, 30)), _z(10)], True),
    ("sph_density", sph_density, 1, 32,
     lambda r: [dup(r.uniform(0, 2, (25, 2))), dup(r.uniform(0.5, 1, 25)), _z(25),
                zm.Active(0.7)], False),
    ("sparse_sym_scatter", sparse_sym_scatter, 1, 32,
     lambda r: [dup(r.standard_normal(30)), r.integers(0, 4, 30).astype(np.int32),
                r.integers(0, 4, 30).astype(np.int32), _z(4, 4), zm.Active(0.5)], True),
    ("springs", springs, 1, 32, _springs_args, True),
    ("sphere_trace", sphere_trace, 1, 16, _trace_args, False),
    ("black_scholes", black_scholes, 1, 32,
     lambda r: [dup(r.uniform(80, 120, 20)), dup(r.uniform(90, 110, 20)),
                dup(r.uniform(0.2, 2, 20)), zm.Active(0.03), zm.Active(0.25), _z(20)], False),
    ("gray_scott", gray_scott, (2, 2), (4, 8),
     lambda r: [dup(r.uniform(0.3, 1.0, (8, 9))), dup(r.uniform(0.0, 0.5, (8, 9))), _z(8, 9),
                _z(8, 9), zm.Active(0.1), zm.Active(0.06)], False),
    ("restrict_fw", restrict_fw, 1, 32, lambda r: [dup(r.standard_normal(41)), _z(20)], True),
    ("prolong", prolong, 1, 32, lambda r: [dup(r.standard_normal(20)), _z(40)], True),
    ("clamped_stencil", clamped_stencil, 2, 32, lambda r: [dup(r.standard_normal(40)), _z(40)],
     True),
    ("periodic_stencil", periodic_stencil, 2, 32,
     lambda r: [dup(r.standard_normal(40)), _z(40), zm.Active(0.3)], True),
    ("upwind", upwind, 2, 32,
     lambda r: [dup(r.standard_normal(40)), dup(r.uniform(-0.5, 0.5, 40)), _z(40)], True),
    ("stencil_accumulate", stencil_accumulate, 2, 32,
     lambda r: [dup(r.standard_normal(40)), dup(r.standard_normal(40)), zm.Active(0.3)], True),
    ("bubble_sort_weighted", bubble_sort_weighted, 1, 16,
     lambda r: [dup(r.standard_normal((10, 5))), _z(10, 5)], True),
    ("matvec_inplace", matvec_inplace, 1, 16,
     lambda r: [dup(r.standard_normal((10, 6))), dup(r.standard_normal(6)), _z(10)], True),
    ("local_evolve", local_evolve, 1, 16, lambda r: [dup(r.standard_normal((10, 4))), _z(10), 3],
     True),
    ("prefix_product", prefix_product, 1, 32, lambda r: [dup(r.uniform(-1, 1, 20)), _z(20)], True),
    ("devfunc_early_loop", devfunc_early_loop, 1, 32,
     lambda r: [dup(r.uniform(-1.5, 1.5, 30)), _z(30), 6], True),
    ("explicit_euler", explicit_euler, 1, 32,
     lambda r: [dup(r.uniform(0.5, 1.5, 30)), _z(30), 1.0, 0.05], True),
    ("block_smooth", block_smooth, 2, 32, lambda r: [dup(r.standard_normal(64)), _z(64), 3],
     False),
    ("shared_transpose", shared_transpose, (3, 2), (8, 8),
     lambda r: [dup(r.standard_normal((16, 24))), _z(24, 16)], False),
    ("babylonian", babylonian, 1, 32, lambda r: [dup(r.uniform(1, 3, 20)), _z(20)], True),
    ("early_active", early_active, 3, 32,
     lambda r: [dup(r.standard_normal(70)), _z(70), zm.Active(0.8), zm.Active(-0.3)], True),
    ("embed_mlp", embed_mlp, 1, 32,
     lambda r: [dup(r.standard_normal((7, 5))), r.integers(0, 7, 30).astype(np.int32),
                dup(r.standard_normal((4, 5))), _z(30, 4)], False),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, kernel, grid, block, make, elementwise", CASES,
                         ids=[case[0] for case in CASES])
def test_gradient(name, kernel, grid, block, make, elementwise, backend):
    seed = sum(map(ord, name))
    args = make(np.random.default_rng(seed))
    check(kernel, grid, block, *args, backend=backend, seed=seed)
    if elementwise and backend == "cpu":   # the interpreter is covered by check_grad
        elementwise_fd(kernel, grid, block, make(np.random.default_rng(seed)), backend,
                       seed=seed)


# ---------------------------------------------------------------------------------------------
# closed forms, float32, launches with different shapes
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_bce_float32_closed_form(backend):
    rng = np.random.default_rng(7)
    z = rng.standard_normal(50).astype(np.float32)
    t = rng.uniform(0, 1, 50).astype(np.float32)
    for precision in ("float64", "native"):
        check(sigmoid_bce, 2, 32, dup(z), dup(t), dup(np.zeros(1, np.float32)),
              backend=backend, precision=precision)
    dz, dt = np.zeros_like(z), np.zeros_like(t)
    zm.grad(sigmoid_bce).on(backend)[2, 32](zm.Duplicated(z, dz), zm.Duplicated(t, dt),
                                            zm.Duplicated(np.zeros(1, np.float32),
                                                          np.ones(1, np.float32)))
    assert dz.dtype == np.float32
    z64 = z.astype(np.float64)
    np.testing.assert_allclose(dz, 1 / (1 + np.exp(-z64)) - t, atol=1e-6)
    np.testing.assert_allclose(dt, -z64, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_active_scalars_and_noneed(backend):
    @zm.kernel
    def affine(a, x, b, y):
        i = zm.grid(1)
        if i < x.shape[0]:
            y[i] = a * x[i] * x[i] + b

    x = np.random.default_rng(8).standard_normal(1000).astype(np.float32)
    dx, dy = np.zeros_like(x), np.ones_like(x)
    da, db = zm.grad(affine).on(backend)[8, 128](
        zm.Active(np.float32(1.5)), zm.Duplicated(x, dx), zm.Active(np.float32(0.5)),
        zm.DuplicatedNoNeed(np.zeros_like(x), dy))
    np.testing.assert_allclose(da, (x.astype(np.float64) ** 2).sum(), rtol=1e-5)
    assert db == 1000
    np.testing.assert_allclose(dx, 3 * x, rtol=1e-6)
    check(affine, 8, 128, zm.Active(np.float32(1.5)), dup(x), zm.Active(np.float32(0.5)),
          dup(np.zeros_like(x)), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rows_norm_float32_2d_grid(backend):
    @zm.kernel
    def rows_norm(x, y):
        r, c = zm.grid(2)
        if r < x.shape[0] and c < x.shape[1]:
            s = zm.f32(0.0)
            for k in range(x.shape[1]):
                s += x[r, k] * x[r, k]
            y[r, c] = x[r, c] / math.sqrt(s)

    X = np.random.default_rng(9).standard_normal((4, 6)).astype(np.float32)
    for precision in ("float64", "native"):
        check(rows_norm, (1, 1), (4, 8), dup(X), dup(np.zeros_like(X)), backend=backend,
              precision=precision)


@pytest.mark.parametrize("backend", BACKENDS)
def test_periodic_ownership_depends_on_launch(backend):
    """One derivative kernel launched where each element has one reader, then where the
    periodic index wraps (two readers), then the first shape again."""
    @zm.kernel
    def periodic_shift(x, y):
        i = zm.grid(1)
        n = x.shape[0]
        if i < y.shape[0]:
            v = x[(i + 3) % n]
            y[i] = v * v

    rng = np.random.default_rng(10)
    g = zm.grad(periodic_shift).on(backend)
    for ny, nx in ((64, 64), (64, 20), (64, 64)):
        x = rng.standard_normal(nx)
        dx = np.zeros(nx)
        g[2, 32](zm.Duplicated(x, dx), zm.Duplicated(np.zeros(ny), np.ones(ny)))
        expected = np.zeros(nx)
        src = (np.arange(ny) + 3) % nx
        np.add.at(expected, src, 2 * x[src])
        np.testing.assert_allclose(dx, expected, rtol=1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
def test_strided_views(backend):
    @zm.kernel
    def cube(x, y):
        i, j = zm.grid(2)
        if i < x.shape[0] and j < x.shape[1]:
            y[i, j] = x[i, j] * x[i, j] * x[i, j]

    base = np.random.default_rng(11).standard_normal((6, 10))
    for view in (lambda a: a[:, ::2], lambda a: a.T):
        dbase = np.zeros_like(base)
        xv, dxv = view(base), view(dbase)
        yv = np.zeros((xv.shape[1], xv.shape[0])).T
        dyb = np.ones((xv.shape[1], xv.shape[0]))
        zm.grad(cube).on(backend)[(1, 1), (16, 16)](zm.Duplicated(xv, dxv),
                                                    zm.Duplicated(yv, dyb.T))
        np.testing.assert_allclose(dxv, 3 * xv ** 2, rtol=1e-14)
        assert np.count_nonzero(dbase) == np.count_nonzero(dxv)   # nothing outside the view
        assert not dyb.any()


@pytest.mark.parametrize("backend", BACKENDS)
def test_stream_compaction_slots_from_atomics(backend):
    rng = np.random.default_rng(12)
    x = rng.standard_normal(40)
    count, out = np.zeros(1, np.int32), np.zeros(40)
    stream_compact.on(backend)[2, 32](x, count, out)
    seed = rng.standard_normal(40)
    dx, count2 = np.zeros(40), np.zeros(1, np.int32)
    zm.grad(stream_compact).on(backend)[2, 32](zm.Duplicated(x, dx), count2,
                                               zm.Duplicated(np.zeros(40), seed.copy()))
    assert count2[0] == count[0]
    expected = np.zeros(40)
    for s in range(count[0]):
        src = int(np.flatnonzero(np.isclose(x * x, out[s]) & (x > 0))[0])
        expected[src] += seed[s] * 2 * x[src]
    np.testing.assert_allclose(dx, expected, rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pow_active_exponent_at_zero_base(backend):
    @zm.kernel
    def powlaw(x, y, e):
        i = zm.grid(1)
        if i < x.shape[0]:
            y[i] = x[i] ** e

    x = np.array([0.0, 0.5, 2.0])
    dx = np.zeros(3)
    (de,) = zm.grad(powlaw).on(backend)[1, 4](zm.Duplicated(x, dx),
                                              zm.Duplicated(np.zeros(3), np.ones(3)),
                                              zm.Active(2.5))
    np.testing.assert_allclose(dx, 2.5 * x ** 1.5, rtol=1e-14)
    np.testing.assert_allclose(de, (np.log(x[1:]) * x[1:] ** 2.5).sum(), rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# known bugs (minimal reproducers)
# ---------------------------------------------------------------------------------------------
@zm.kernel
def safe_reciprocal(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        y[i] = 1.0 / (v - 1.0) if v != 1.0 else 0.0


@zm.kernel
def sqrt_or_zero(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        y[i] = v ** 0.5 if v > 0.0 else 0.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_bug_ifexp_select_nan(backend):
    for kernel, x, expected in ((safe_reciprocal, [1.0, 3.0], [0.0, -0.25]),
                                (sqrt_or_zero, [-1.5, 4.0], [0.0, 0.25])):
        x = np.array(x)
        dx = np.zeros_like(x)
        zm.grad(kernel).on(backend)[1, 32](zm.Duplicated(x, dx),
                                           zm.Duplicated(np.zeros_like(x), np.ones_like(x)))
        np.testing.assert_allclose(dx, expected)


@zm.kernel
def gravity_guarded(pos, mass, acc):
    """The realistic form: no `j != i` test, the self term guarded by r2 > 0 instead."""
    i = zm.grid(1)
    n = pos.shape[0]
    if i < n:
        ax = 0.0
        ay = 0.0
        xi = pos[i, 0]
        yi = pos[i, 1]
        for j in range(n):
            dx = pos[j, 0] - xi
            dy = pos[j, 1] - yi
            r2 = dx * dx + dy * dy
            inv = 1.0 / (r2 * r2) if r2 > 0.0 else 0.0
            ax += mass[j] * dx * inv
            ay += mass[j] * dy * inv
        acc[i, 0] = ax
        acc[i, 1] = ay


@pytest.mark.parametrize("backend", BACKENDS)
def test_bug_guarded_gravity_nan(backend):
    rng = np.random.default_rng(13)
    check(gravity_guarded, 1, 8, dup(rng.standard_normal((8, 2))), dup(rng.uniform(0.5, 1, 8)),
          _z(8, 2), backend=backend)


@zm.kernel
def guarded_scale_in_loop(x, s, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        sig = s[i]
        for k in range(x.shape[1]):
            if sig > 0.0:
                y[i, k] = x[i, k] / math.sqrt(sig)
            else:
                y[i, k] = x[i, k]


@pytest.mark.parametrize("backend", BACKENDS)
def test_bug_licm_hoisted_guarded_sqrt_nan(backend):
    x = np.random.default_rng(14).standard_normal((4, 3))
    s = np.array([0.0, 1.0, -1.0, 4.0])
    ds, dx = np.zeros(4), np.zeros_like(x)
    zm.grad(guarded_scale_in_loop).on(backend)[1, 4](
        zm.Duplicated(x, dx), zm.Duplicated(s, ds), zm.Duplicated(np.zeros_like(x),
                                                                  np.ones_like(x)))
    safe = np.where(s > 0, s, 1.0)
    expected = np.where(s > 0, -0.5 * x.sum(1) * safe ** -1.5, 0.0)
    np.testing.assert_allclose(dx, np.where(s > 0, 1 / np.sqrt(safe), 1.0)[:, None] * np.ones(3))
    np.testing.assert_allclose(ds, expected)


@zm.kernel
def poly_powers(c, x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        acc = 0.0
        for k in range(c.shape[0]):
            acc += c[k] * x[i] ** k
        y[i] = acc


@pytest.mark.parametrize("backend", BACKENDS)
def test_bug_pow_zero_exponent_at_zero(backend):
    c = np.array([1.0, 2.0, 3.0, 4.0])
    x = np.array([0.0, 0.5, -1.0, 2.0])
    dx, dc = np.zeros(4), np.zeros(4)
    zm.grad(poly_powers).on(backend)[1, 4](zm.Duplicated(c, dc), zm.Duplicated(x, dx),
                                           zm.Duplicated(np.zeros(4), np.ones(4)))
    np.testing.assert_allclose(dx, 2 + 6 * x + 12 * x ** 2)


@zm.kernel
def store_until(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        for k in range(4):
            if x[i, k] > 1.0:
                break
            y[i, k] = 2.0 * x[i, k]


@pytest.mark.parametrize("backend", BACKENDS)
def test_bug_break_in_loop_with_store(backend):
    x = np.random.default_rng(15).uniform(-0.5, 1.5, (10, 4))
    check(store_until, 1, 16, dup(x), dup(np.random.default_rng(16).standard_normal((10, 4))),
          backend=backend)


GL_W = np.array([5.0, 8.0, 5.0]) / 9.0
GL_X = np.array([-math.sqrt(0.6), 0.0, math.sqrt(0.6)])


@zm.kernel
def gauss_legendre(a, b, out):
    i = zm.grid(1)
    if i < b.shape[0]:
        w = zm.const.array_like(GL_W)
        xs = zm.const.array_like(GL_X)
        half = 0.5 * b[i]
        s = 0.0
        for q in range(3):
            t = half * (xs[q] + 1.0)
            s += w[q] * math.exp(-a[i] * t * t)
        out[i] = half * s


@pytest.mark.parametrize("backend", BACKENDS)
def test_bug_const_array_inside_if(backend):
    rng = np.random.default_rng(17)
    check(gauss_legendre, 1, 32, dup(rng.uniform(0.5, 2, 20)), dup(rng.uniform(0.5, 2, 20)),
          _z(20), backend=backend)


# ---------------------------------------------------------------------------------------------
# documented limitations: the error names the line
# ---------------------------------------------------------------------------------------------
@zm.kernel
def atomic_max_kernel(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        zm.atomic.max(out, 0, x[i] * x[i])


@zm.kernel
def broadcast_lane0(x, y):
    i = zm.grid(1)
    lead = zm.shfl_sync(0xFFFFFFFF, x[i], 0)
    y[i] = lead * x[i]


@zm.kernel
def scratch_const(x, tmp, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        tmp[i] = x[i] * x[i]
        y[i] = tmp[i] * 3.0 + x[i]


@zm.kernel
def block_max_while(x, out):
    sm = zm.shared.array(32, zm.f64)
    t = zm.threadIdx.x
    sm[t] = x[zm.grid(1)]
    zm.syncthreads()
    s = 16
    while s > 0:
        if t < s:
            sm[t] = max(sm[t], sm[t + s])
        zm.syncthreads()
        s //= 2
    if t == 0:
        out[zm.blockIdx.x] = sm[0]


@pytest.mark.parametrize("kernel, args, line", [
    (atomic_max_kernel, lambda: [dup(np.ones(8)), _z(1)], "zm.atomic.max(out, 0, x[i] * x[i])"),
    (broadcast_lane0, lambda: [dup(np.ones(32)), _z(32)], "zm.shfl_sync(0xFFFFFFFF, x[i], 0)"),
    (scratch_const, lambda: [dup(np.ones(8)), np.zeros(8), _z(8)], "tmp[i] = x[i] * x[i]"),
    (block_max_while, lambda: [dup(np.ones(32)), _z(1)], "sm[t] = max(sm[t], sm[t + s])"),
], ids=["atomic_max", "indexed_shuffle", "const_scratch", "shared_max_while"])
def test_unsupported_reports_the_line(kernel, args, line):
    with pytest.raises(CompileError) as info:
        zm.grad(kernel).on("cpu")[1, 32](*args())
    message = str(info.value)
    assert "test_grad_kernels.py:" in message and line in message, message
