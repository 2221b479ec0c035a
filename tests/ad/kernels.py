"""The classic GPU-AD cases (Enzyme's and Clad's tests), shared by the CPU and GPU test files."""
from __future__ import annotations

import math

import numpy as np

import zymo as zm


@zm.kernel
def square(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = x[i] * x[i]


@zm.kernel
def exp_cos(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = math.exp(x[i]) * math.cos(x[i])


@zm.kernel
def dense(W, b, x, y):
    """y[n, j] = tanh(sum_k W[j, k] x[n, k] + b[j]); every thread reads all of W and b."""
    n = zm.grid(1)
    if n < x.shape[0]:
        for j in range(W.shape[0]):
            acc = b[j]
            for k in range(W.shape[1]):
                acc += W[j, k] * x[n, k]
            y[n, j] = math.tanh(acc)


@zm.kernel
def scale_sum(a, out):
    """out[i] = a * (i + 1): the adjoint of a sums over all threads."""
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = a * (i + 1)


@zm.kernel
def block_reduce(x, out):
    s = zm.shared.array(128, zm.f64)
    t = zm.threadIdx.x
    i = zm.grid(1)
    s[t] = x[i] * x[i] if i < x.shape[0] else 0.0
    zm.syncthreads()
    stride = 64
    while stride > 0:
        if t < stride:
            s[t] += s[t + stride]
        zm.syncthreads()
        stride //= 2
    if t == 0:
        zm.atomic.add(out, 0, s[0])


@zm.kernel
def scatter_add(x, index, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        zm.atomic.add(out, index[i], math.sin(x[i]))


@zm.kernel
def in_place_axpy(a, x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]


@zm.kernel
def power_loop(x, counts, y):
    """A per-thread trip count; the carried value is replayed from the loop's start."""
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        for _ in range(counts[i]):
            v = v * 0.5 + math.sin(v)
        y[i] = v


@zm.kernel
def early_exit(x, y, limit):
    i = zm.grid(1)
    if i >= x.shape[0]:
        return
    v = x[i]
    if v > limit:
        y[i] = v * v
        return
    acc = v
    k = 0
    while k < 3:
        acc = acc * v + 1.0
        k += 1
    y[i] = acc


@zm.kernel
def valid_convolution(x, out):
    """out has two elements fewer than x: launched with one thread per output, no thread owns
    x[-2:]."""
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = x[i] + 2.0 * x[i + 1] + 3.0 * x[i + 2]


@zm.kernel
def shifted_neighbours(x, y):
    """Two threads read each x element: plain updates would race, so atomics are used."""
    i = zm.grid(1)
    if i + 1 < x.shape[0]:
        y[i] = x[i] * x[i + 1]


@zm.kernel
def warp_sum(x, out):
    i = zm.grid(1)
    v = x[i] * x[i]
    offset = 16
    while offset > 0:
        v += zm.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if zm.laneid == 0:
        zm.atomic.add(out, i // 32, v)


@zm.kernel
def uniform_read(w, x, y):
    """Every thread reads w[0] and w[1]: the adjoint is a warp reduction, then an atomic."""
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = w[0] * x[i] + w[1]


def rng_args(seed=0):
    return np.random.default_rng(seed)


@zm.kernel
def periodic_pull(src, dst, c):
    """Lattice-Boltzmann streaming on a periodic 2-D box: every direction q pulls from its
    upwind neighbour `(x - cx[q]) % nx`. Each (q, cell) is read by one thread only."""
    x, y = zm.grid(2)
    ny, nx = src.shape[1], src.shape[2]
    cx = zm.const.array_like(PULL_CX)
    cy = zm.const.array_like(PULL_CY)
    f = zm.local.array(5, zm.f64)
    total = 0.0
    for q in range(5):
        v = src[q, (y - cy[q] + ny) % ny, (x - cx[q] + nx) % nx]
        f[q] = v
        total += v * v
    for q in range(5):
        dst[q, y, x] = f[q] * c + 0.1 * total * f[q]


@zm.kernel
def rolling_window(x, y):
    """`x[(i + k) % n]` for k in a loop: thread i at k = 1 and thread i + 1 at k = 0 read the
    same element, and nothing in the index tells the moments apart: atomics."""
    i = zm.grid(1)
    n = x.shape[0]
    acc = 0.0
    for k in range(3):
        acc += x[(i + k) % n] * (k + 1)
    y[i] = acc


@zm.kernel
def rows_per_step(a, y):
    """`a[k, i]` with k a loop variable: the row tells the moments apart, so plain updates."""
    i = zm.grid(1)
    if i < a.shape[1]:
        acc = 0.0
        for k in range(a.shape[0]):
            acc += a[k, i] * a[k, i]
        y[i] = acc


PULL_CX = np.array([0, 1, -1, 0, 0], np.int32)
PULL_CY = np.array([0, 0, 0, 1, -1], np.int32)


@zm.kernel
def shifted_by(x, y, s):
    """A shift known only at run time: the reads may overlap in any pattern, so atomics."""
    i = zm.grid(1)
    if i + s < x.shape[0]:
        y[i] = x[i] * x[i + s]


@zm.kernel
def nonlinear_stencil(x, y):
    """Each x element is read by three threads, through a nonlinear body with a branch."""
    i = zm.grid(1)
    n = x.shape[0]
    if 0 < i < n - 1:
        left = x[i - 1]
        if left > 0.0:
            y[i] = left * x[i + 1] + math.sin(x[i])
        else:
            y[i] = math.exp(x[i + 1]) * x[i]
    elif i < n:
        y[i] = 2.0 * x[i]


@zm.kernel
def rows_of_pairs(x, y):
    """Every row j reads the same x: threads along y share the elements of x."""
    i, j = zm.grid(2)
    if 0 < i < x.shape[0] - 1 and j < y.shape[0]:
        y[j, i] = x[i - 1] * x[i + 1]


@zm.kernel
def static_power(x, y):
    """A static trip count: the carried value is kept per iteration on a per-thread tape."""
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        for _ in range(6):
            v = v * 0.5 + math.sin(v)
        y[i] = v


@zm.kernel
def ragged_softmax(x, lens, out):
    """Row lengths from an array: the launch cannot size a tape for the in-place scaling loop,
    so differentiating it is a compile error naming the line."""
    r = zm.grid(1)
    if r < x.shape[0]:
        s = 0.0
        for j in range(lens[r]):
            e = math.exp(x[r, j])
            out[r, j] = e
            s += e
        for j in range(lens[r]):
            out[r, j] *= 1.0 / s


@zm.kernel
def three_outputs(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        out[i, 0] = math.sin(v)
        out[i, 1] = v * v
        out[i, 2] = math.exp(-v)


@zm.kernel
def folded_carry(x, n, acc):
    """A loop whose carried integer folds to a constant (`v * 0`) around a loop with a
    break: the reverse sweep replays the outer loop's slice for it (a fuzzer finding)."""
    g = zm.grid(1)
    v = zm.u64(16)
    w = 0
    while w < 2:
        w += 1
        for k in range(2):
            acc[g] += math.sin(x[g] * (v % 5 + 1))
            if g % 3 != 1:
                break
            if n[g] <= 2:
                v = zm.u64(g)
        v = v * zm.u64(0)
