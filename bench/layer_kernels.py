"""The layers of bench/torch_layer.py as zymo kernels, without PyTorch: the dense layer
`tanh(x @ w + b)` and the radial basis layer `exp(-g[j] * |x[i] - c[j]|^2)`, one output per
thread and ROWS rows per thread. The tests differentiate them too (tests/interop,
tests/ad/test_hot_addresses.py)."""
from __future__ import annotations

import zymo as zm


@zm.kernel
def dense_tanh(x, w, b, y):
    i, j = zm.grid(2)
    if i < x.shape[0] and j < w.shape[1]:
        acc = b[j]
        for k in range(x.shape[1]):
            acc += x[i, k] * w[k, j]
        y[i, j] = zm.math.tanh(acc)


@zm.kernel
def radial(x, c, g, y):
    """A 2-D grid: c[j, k] and g[j] are read alike by all threads of one j (threadIdx.y), so
    their cotangents go to addresses shared by runs of a warp's lanes."""
    i, j = zm.grid(2)
    if i < x.shape[0] and j < c.shape[0]:
        d = 0.0
        for k in range(x.shape[1]):
            t = x[i, k] - c[j, k]
            d += t * t
        y[i, j] = zm.math.exp(-g[j] * d)


ROWS = 16   # rows per thread in the row-chunked kernels


@zm.kernel
def dense_tanh_rows(x, w, b, y):
    """ROWS rows per thread, `threads` apart (a warp's lanes take neighbouring rows): w[k, j]'s
    cotangents are summed over the thread's rows before they leave it (ad/loopsums.py), then
    over the warp's lanes, which share j (segmented warp sums). Out-of-range rows recompute the
    last row and store nothing, so the loops have no branch around them."""
    t, j = zm.grid(2)
    threads = zm.gridDim.x * zm.blockDim.x
    n = x.shape[0]
    if j < w.shape[1]:
        for r in range(ROWS):
            i = min(t + r * threads, n - 1)
            acc = b[j]
            for k in range(x.shape[1]):
                acc += x[i, k] * w[k, j]
            if t + r * threads < n:
                y[i, j] = zm.math.tanh(acc)


@zm.kernel
def radial_rows(x, c, g, y):
    """radial with ROWS rows per thread, as dense_tanh_rows."""
    t, j = zm.grid(2)
    threads = zm.gridDim.x * zm.blockDim.x
    n = x.shape[0]
    if j < c.shape[0]:
        for r in range(ROWS):
            i = min(t + r * threads, n - 1)
            d = 0.0
            for k in range(x.shape[1]):
                e = x[i, k] - c[j, k]
                d += e * e
            if t + r * threads < n:
                y[i, j] = zm.math.exp(-g[j] * d)
