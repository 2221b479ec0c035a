"""Kernels and their inputs for the evolution tests (module level, so workers import them)."""
import math
import os
import sys

import numpy as np

import zymo as zm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:    # `bench` imports here and in the workers (spawned with this path)
    sys.path.insert(0, ROOT)

# the kernel of `zymo evolve bench/evolve/wasteful.toml`, with its inputs and launch
from bench.evolve.wasteful import BLOCK, N, wasteful_scale  # noqa: E402,F401
from bench.evolve.wasteful import holdout as scale_holdout  # noqa: E402
from bench.evolve.wasteful import inputs as scale_inputs  # noqa: E402
from bench.evolve.wasteful import launch as scale_launch  # noqa: E402


@zm.kernel
def spin(x, out):
    """Loops as many times as x[0] says: a mutation of the bound can make it hang."""
    i = zm.grid(1)
    k = 0
    acc = 0.0
    while k < x.shape[0]:
        acc += x[k]
        k += 1
    if i < out.shape[0]:
        out[i] = acc


def spin_inputs(rng):
    return [rng.standard_normal(64).astype(np.float32), np.zeros(64, np.float32)]


@zm.kernel
def burn_once(work, out):
    """Loops work[0] times, then sets work[0] = 0: run again on the same memory, it is free."""
    acc = 0.0
    for k in range(work[0]):
        acc += 1.0 / (k + 1.0)
    out[0] = acc
    work[0] = 0


@zm.kernel
def neighbour_sum(x, out):
    """out = x + x[next in the block], through shared memory: race-free, until its barrier
    goes."""
    s = zm.shared.array(BLOCK, zm.f32)
    t = zm.threadIdx.x
    i = zm.grid(1)
    s[t] = x[i] if i < x.shape[0] else 0.0
    zm.syncthreads()
    if i < x.shape[0]:
        out[i] = s[t] + s[(t + 1) % BLOCK]


# ---- derivatives: the search edits zm.grad / zm.jvp of a kernel ----------------------------
@zm.kernel
def restore_square(x, out):
    """out = x * x (for a finite out), computed 512 times over: `out[i] * 0.0` is not 0 to the
    optimizer (NaN and Inf), so only the search can drop the repeats. No barriers, so the CPU
    backend compiles its derivatives fast."""
    i = zm.grid(1)
    if i < x.shape[0]:
        for r in range(512):
            out[i] = out[i] * 0.0 + x[i] * x[i]


@zm.kernel
def restore_sine(x, out):
    """restore_square with a sine in the repeats: its derivative keeps the waste on the GPU,
    where restore_square's reverse sweep now holds the shadow in a register (0.037 ms against
    0.028 ms without the repeats on an H200, within the timings' noise) and restore_sine's
    recomputes a sine and a cosine per repeat (0.131 ms against 0.041 ms)."""
    i = zm.grid(1)
    if i < x.shape[0]:
        for r in range(512):
            out[i] = math.sin(out[i]) * 0.0 + x[i] * x[i]


def grad_inputs(rng):
    """Activities for zm.grad(restore_square): d out seeded, d x accumulated."""
    x, out = scale_inputs(rng)
    return [zm.Duplicated(x, np.zeros_like(x)),
            zm.Duplicated(out, rng.standard_normal(N).astype(np.float32))]


def grad_holdout(rng):
    x, out = scale_holdout(rng)
    return [zm.Duplicated(x, np.zeros_like(x)),
            zm.Duplicated(out, rng.standard_normal(out.shape[0]).astype(np.float32))]


def jvp_inputs(rng):
    x, out = scale_inputs(rng)
    return [zm.Duplicated(x, rng.standard_normal(N).astype(np.float32)),
            zm.Duplicated(out, np.zeros_like(out))]


def activity_launch(args):
    """The launch of a derivative, from its activities."""
    return scale_launch([a.value for a in args])


@zm.kernel
def racy_scale(x, out):
    """out = 2 x, after every thread writes its own id to one shared slot nobody reads: the
    original itself races (a different value each)."""
    s = zm.shared.array(1, zm.i32)
    s[0] = zm.threadIdx.x
    zm.syncthreads()
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = 2.0 * x[i]


@zm.kernel
def ring_shift(x, out):
    """Eight rounds, each adding half the right-hand neighbour's value through shared memory,
    double-buffered by round parity so that one barrier per round suffices. With one buffer
    (the parity a constant) a thread may overwrite its slot before its neighbour has read it."""
    s = zm.shared.array(2 * BLOCK, zm.f32)
    t = zm.threadIdx.x
    i = zm.grid(1)
    v = x[i] if i < x.shape[0] else 0.0
    for r in range(8):
        par = (r & 1) * BLOCK
        s[par + t] = v
        zm.syncthreads()
        v = s[par + (t + 1) % BLOCK] * 0.5 + v
    if i < x.shape[0]:
        out[i] = v


@zm.kernel
def rescale_by_norm(x, w, out):
    """out = x |w|^2, each thread for 8 elements, recomputing the norm for each: the inner loop
    is invariant, but the bound it reads is computed inside the bounds check."""
    i = zm.grid(1)
    for e in range(8):
        j = i * 8 + e
        if j < x.shape[0]:
            s = 0.0
            for k in range(w.shape[0]):
                s += w[k] * w[k]
            out[j] = x[j] * s


def norm_inputs(rng):
    return [rng.standard_normal(N).astype(np.float32), rng.standard_normal(16).astype(np.float32),
            np.zeros(N, np.float32)]
