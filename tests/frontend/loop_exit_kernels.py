"""Kernels reading, after a loop, names the loop defined (Python's and numba's semantics)."""
from __future__ import annotations

import zymo as zm


@zm.kernel
def after_loops(ary, n):
    for _ in range(2):
        tx = zm.threadIdx.x
    for j in range(3):
        ty = zm.threadIdx.y
    ary[tx, ty] = 1.0 + j
    s = 0
    for m in range(n):
        s += m
    if tx == 0 and ty == 0:
        ary[0, 0] = m + s * 100


@zm.kernel
def reused_loop_variable(out):
    t = zm.grid(1)
    if t < out.shape[0]:
        total = 0
        for j in range(3):
            total += j
        for i in range(2):
            for j in range(1, 4):
                total += j * i
            for j in range(2):
                total += j
        out[t] = total + j
