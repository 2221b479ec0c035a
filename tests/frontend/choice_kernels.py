"""Kernels whose array variables hold different arrays on different paths (numba allows it:
`data = a if even else b`, buffers swapped in a loop). Module-level: compiled from source."""
from __future__ import annotations

import zymo as zm


@zm.kernel
def ping_pong(a, b, steps):
    """Jacobi smoothing in one block, the buffers swapped by name each step."""
    i = zm.threadIdx.x
    n = len(a)
    src = a
    dst = b
    for _ in range(steps):
        if i > 0 and i < n - 1:
            dst[i] = 0.5 * src[i] + 0.25 * (src[i - 1] + src[i + 1])
        elif i < n:
            dst[i] = src[i]
        zm.syncthreads()
        src, dst = dst, src


@zm.kernel
def three_way(x, y, z, out, which):
    i = zm.grid(1)
    if which == 0:
        chosen = x
    elif which == 1:
        chosen = y
    else:
        chosen = z
    if i < len(chosen):
        out[i] = chosen[i] * 2.0
        zm.atomic.add(chosen, i, 1.0)


@zm.kernel
def scaled_pick(x, y, out, k, first):
    i = zm.grid(1)
    source = x if first else y
    if i < out.shape[0]:
        out[i] = k * source[i] * source[i]


@zm.kernel
def mixed_types(x, y, out, flag):
    i = zm.grid(1)
    if flag:
        src = x
    else:
        src = y
    out[i] = src[i]
