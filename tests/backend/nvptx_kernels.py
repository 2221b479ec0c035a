"""Kernels for the NVPTX tests beyond the corpus: every atomic and shuffle on every scalar
type, in global and shared memory, local and dynamic shared arrays."""
from __future__ import annotations

import numpy as np

import zymo as zm

ATOMIC_TYPES = (zm.f32, zm.f64, zm.i32, zm.i64, zm.u32, zm.u64)
NARROW_TYPES = (zm.f16, zm.i8, zm.i16, zm.u8, zm.u16)
SHUFFLE_TYPES = (zm.f16, zm.f32, zm.f64, zm.i8, zm.i16, zm.i32, zm.i64, zm.u8, zm.u32,
                 zm.u64, zm.bool_)
TABLE = np.linspace(0.0, 1.0, 16, dtype=np.float32)


@zm.kernel
def global_atomics(a, v, old):
    i = zm.grid(1) * 5
    old[i] = zm.atomic.add(a, 0, v)
    old[i + 1] = zm.atomic.sub(a, 1, v)
    old[i + 2] = zm.atomic.max(a, 2, v)
    old[i + 3] = zm.atomic.min(a, 3, v)
    old[i + 4] = zm.atomic.exch(a, 4, v)


@zm.kernel
def compare_and_swap(a, expected, new, old):
    old[zm.grid(1)] = zm.atomic.cas(a, 0, expected, new)


def shared_atomics(dtype):
    """Atomics on a shared array of `dtype`, copied in from and out to `out`."""

    @zm.kernel
    def kernel(out, v):
        s = zm.shared.array(8, dtype)
        t = zm.threadIdx.x
        if t < 8:
            s[t] = out[t]
        zm.syncthreads()
        zm.atomic.add(s, 0, v)
        zm.atomic.sub(s, 1, v)
        zm.atomic.max(s, 2, v)
        zm.atomic.min(s, 3, v)
        zm.atomic.exch(s, 4, v)
        zm.syncthreads()
        if t < 8:
            out[t] = s[t]

    return kernel


@zm.kernel
def shuffles(x, out):
    i = zm.grid(1)
    v = x[i]
    out[0, i] = zm.shfl_sync(0xFFFFFFFF, v, 3)
    out[1, i] = zm.shfl_down_sync(0xFFFFFFFF, v, 1)
    out[2, i] = zm.shfl_up_sync(0xFFFFFFFF, v, 2)
    out[3, i] = zm.shfl_xor_sync(0xFFFFFFFF, v, 4)


@zm.kernel
def dynamic_shared(x, out):
    buffer = zm.shared.array(0, zm.f32)
    t = zm.threadIdx.x
    buffer[t] = x[t]
    zm.syncthreads()
    out[t] = buffer[zm.blockDim.x - 1 - t]


@zm.kernel
def local_reverse(x, out):
    i = zm.grid(1)
    scratch = zm.local.array(8, zm.f32)
    for k in range(8):
        scratch[k] = x[i, k]
    for k in range(8):
        out[i, k] = scratch[7 - k]


@zm.kernel
def divide_sqrt_sin(x, out):
    i = zm.grid(1)
    out[i] = zm.math.sin(x[i]) / zm.math.sqrt(x[i] + 1.0)


@zm.kernel
def table_lookup(index, out):
    i = zm.grid(1)
    table = zm.const.array_like(TABLE)
    out[i] = table[index[i]]


@zm.kernel
def negate_unless(keep, x, out):
    i = zm.grid(1)
    out[i] = x[i] if keep else -x[i]


@zm.kernel
def atomics_per_thread(a, values):
    i = zm.grid(1)
    v = values[i]
    zm.atomic.add(a, 0, v)
    zm.atomic.sub(a, 1, v)
    zm.atomic.max(a, 2, v)
    zm.atomic.min(a, 3, v)


@zm.kernel
def nest_30x30(x, y):
    """A static 30 x 30 nest: each loop alone is short enough to unroll, both together are
    900 copies of the body (minutes in nvJitLink, more for a derivative)."""
    i = zm.grid(1)
    if i < y.shape[0]:
        acc = 0.0
        for a in range(30):
            for b in range(30):
                acc += zm.math.sin(x[i] * a + b) * x[(i + a * b) % x.shape[0]]
        y[i] = acc
