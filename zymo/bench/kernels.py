"""Kernels of the CPU benchmark set, with the NumPy code each is compared against."""

import zymo as zm

TILE = 16


@zm.kernel
def saxpy(a, x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]


@zm.kernel
def stencil(u, out):
    i, j = zm.grid(2)
    n, m = u.shape
    if 0 < i < n - 1 and 0 < j < m - 1:
        out[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) - u[i, j]


@zm.kernel
def block_sum(x, partial):
    s = zm.shared.array(256, zm.f32)
    t = zm.threadIdx.x
    i = zm.grid(1)
    s[t] = x[i] if i < x.shape[0] else 0.0
    zm.syncthreads()
    stride = zm.blockDim.x // 2
    while stride > 0:
        if t < stride:
            s[t] += s[t + stride]
        zm.syncthreads()
        stride //= 2
    if t == 0:
        partial[zm.blockIdx.x] = s[0]


@zm.kernel
def matmul(a, b, c):
    sa = zm.shared.array((TILE, TILE), zm.f32)
    sb = zm.shared.array((TILE, TILE), zm.f32)
    tx, ty = zm.threadIdx.x, zm.threadIdx.y
    row = zm.blockIdx.y * TILE + ty
    col = zm.blockIdx.x * TILE + tx
    n = a.shape[1]
    acc = zm.f32(0.0)
    for k0 in range(0, n, TILE):
        sa[ty, tx] = a[row, k0 + tx] if row < a.shape[0] and k0 + tx < n else 0.0
        sb[ty, tx] = b[k0 + ty, col] if k0 + ty < n and col < b.shape[1] else 0.0
        zm.syncthreads()
        for k in range(TILE):
            acc += sa[ty, k] * sb[k, tx]
        zm.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@zm.kernel
def histogram(values, bins):
    i = zm.grid(1)
    if i < values.shape[0]:
        zm.atomic.add(bins, values[i] % bins.shape[0], 1)
