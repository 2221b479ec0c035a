"""Kernels that wait at grid barriers (`cg.this_grid().sync()`), shared by the CPU and GPU
tests. Module-level: kernels are compiled from their source file."""
from __future__ import annotations

import numpy as np

import zymo as zm
from zymo import cg


@zm.kernel
def heat(buf_0, buf_1, timesteps, k):
    """The explicit heat equation, one point per thread, the buffers swapping roles each
    step; every thread's next step reads its neighbours' last one, which blocks wrote."""
    i = zm.grid(1)
    if i >= len(buf_0):
        return
    grid = cg.this_grid()
    for step in range(timesteps):
        if (step % 2) == 0:
            data = buf_0
            next_data = buf_1
        else:
            data = buf_1
            next_data = buf_0
        curr = data[i]
        if i == 0:
            nxt = curr + k * (data[i + 1] - 2 * curr)
        elif i == len(data) - 1:
            nxt = curr + k * (data[i - 1] - 2 * curr)
        else:
            nxt = curr + k * (data[i - 1] - 2 * curr + data[i + 1])
        next_data[i] = nxt
        grid.sync()


def heat_reference(start: np.ndarray, timesteps: int, k: float) -> np.ndarray:
    """The buffer the last step wrote (buf_1 after an odd count of steps, else buf_0)."""
    x = start.copy()
    for _ in range(timesteps):
        y = x.copy()
        y[1:-1] = x[1:-1] + k * (x[:-2] - 2 * x[1:-1] + x[2:])
        y[0] = x[0] + k * (x[1] - 2 * x[0])
        y[-1] = x[-1] + k * (x[-2] - 2 * x[-1])
        x = y
    return x


@zm.kernel
def guarded_heat(a, b, timesteps, k):
    """`heat` with the work guarded instead of an early return (every thread reaches every
    grid.sync, as a derivative needs), nonlinear so that the gradient depends on the data."""
    i = zm.grid(1)
    n = len(a)
    src = a
    dst = b
    for step in range(timesteps):
        if i > 0 and i < n - 1:
            dst[i] = src[i] + k * (src[i - 1] * src[i - 1] - 2 * src[i] + src[i + 1])
        elif i < n:
            dst[i] = src[i]
        cg.this_grid().sync()
        src, dst = dst, src


@zm.kernel
def reversed_total(x, out):
    """Block 0 writes, every block reads it after the grid barrier: without the barrier the
    reads would race with the writes of another block."""
    i = zm.grid(1)
    if zm.blockIdx.x == 0:
        x[zm.threadIdx.x] = x[zm.threadIdx.x] * 2.0
    cg.this_grid().sync()
    out[i] = x[zm.blockDim.x - 1 - zm.threadIdx.x]


@zm.kernel
def unsynced_total(x, out):
    i = zm.grid(1)
    if zm.blockIdx.x == 0:
        x[zm.threadIdx.x] = x[zm.threadIdx.x] * 2.0
    out[i] = x[zm.blockDim.x - 1 - zm.threadIdx.x]


@zm.kernel
def divergent_sync(x):
    i = zm.grid(1)
    if i < 40:
        x[i] = 1.0
        cg.this_grid().sync()
    x[i] += 1.0


@zm.kernel
def label_runs(keys, labels):
    """Each run of equal keys gets the index of its first element: the threads that start a
    run write their own label, wait for every other start (the others have exited: CUDA and
    zymo count only live threads at a grid barrier), then fill the run's other elements."""
    i = zm.grid(1)
    n = len(keys)
    if i >= n:
        return
    if i == 0 or keys[i] != keys[i - 1]:
        labels[i] = i
        cg.this_grid().sync()
        j = i + 1
        while j < n and labels[j] < 0:
            labels[j] = i
            j += 1


def label_runs_reference(keys: np.ndarray) -> np.ndarray:
    starts = np.r_[True, keys[1:] != keys[:-1]]
    return np.maximum.accumulate(np.where(starts, np.arange(len(keys)), 0))
