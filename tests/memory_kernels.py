"""Kernels of the memory-model tests (tests/passes/test_memory_model.py and tests/gpu/): exchanges
between threads across barriers and fences, and kernels whose arguments may overlap."""
from __future__ import annotations

import zymo as zm


@zm.kernel
def partner(a, b):
    t = zm.threadIdx.x
    a[t] = a[t] * b[t]
    zm.syncthreads()
    if t % 2 == 0:
        b[t] = a[t + 1] * a[t]
    zm.syncthreads()
    a[t] = a[t] + b[t ^ 1]


@zm.kernel
def square_then_sine(x, y):
    i = zm.grid(1)
    if i < y.shape[0]:
        y[i] = x[i] * x[i]
        y[i] = y[i] + zm.math.sin(x[i])


@zm.kernel
def publish(data, flag, seen):
    """Thread 0 of each block publishes its block's value and raises a flag; the fence orders
    the two for other blocks."""
    b = zm.blockIdx.x
    if zm.threadIdx.x == 0:
        data[b] = b * 3.0 + 1.0
        zm.threadfence()
        zm.atomic.add(flag, 0, 1)
    zm.syncthreads()
    seen[b * zm.blockDim.x + zm.threadIdx.x] = data[b]


@zm.kernel
def rows(x, y):
    i = zm.grid(1)
    if i < y.shape[0]:
        y[i] = y[i] + x[i]


@zm.kernel
def fences(x):
    i = zm.grid(1)
    x[i] = 1.0
    zm.threadfence_block()
    x[i] = 2.0
    zm.threadfence()
    x[i] = 3.0
    zm.threadfence_system()
    x[i] = 4.0


@zm.kernel
def shared_partner(a, out):
    """The partner exchange through shared memory, then back to global memory."""
    s = zm.shared.array(64, zm.f32)
    t = zm.threadIdx.x
    i = zm.grid(1)
    s[t] = a[i] * 2.0
    zm.syncthreads()
    out[i] = s[t] + s[(t + 1) % 64]


@zm.kernel
def ping(a, b, n):
    """Global memory exchanged between threads of a block across barriers, n rounds."""
    t = zm.threadIdx.x
    for r in range(n):
        b[t] = a[t] + r
        zm.syncthreads()
        a[t] = b[(t + 1) % 64] * 0.5
        zm.syncthreads()


@zm.kernel
def wait_for_later_block(data, flag, out):
    """Block 0 spins on a flag that block 1 raises after publishing data (message passing
    through a fence and an atomic): right on a GPU, which runs both blocks at once."""
    t = zm.threadIdx.x
    b = zm.blockIdx.x
    if b == 0 and t == 0:
        while zm.atomic.add(flag, 0, 0) == 0:
            pass
        zm.threadfence()
        out[0] = data[0]
    if b == 1 and t == 0:
        data[0] = 42
        zm.threadfence()
        zm.atomic.exch(flag, 0, 1)


@zm.kernel
def look_back(data, flag, out):
    """Block b waits for block b - 1's flag (a chained scan's look-back): earlier blocks only."""
    t = zm.threadIdx.x
    b = zm.blockIdx.x
    if t == 0:
        prev = 0
        if b > 0:
            while zm.atomic.add(flag, b - 1, 0) == 0:
                pass
            zm.threadfence()
            prev = data[b - 1]
        data[b] = prev + b
        zm.threadfence()
        zm.atomic.exch(flag, b, 1)
        out[b] = data[b]
