"""A small kernel for trying `zymo evolve bench/evolve/wasteful.toml` on the CPU in seconds: every
thread clears all of shared memory 16 times for nothing, which the search learns to skip.
The evolution tests (tests/evolve/evolve_kernels.py) search it too."""
import numpy as np

import zymo as zm

N = 500
BLOCK = 128


@zm.kernel
def wasteful_scale(x, out):
    """out = 2 x + x[next], after every thread clears all of shared memory 16 times (in a
    thread-varying order, as naive kernels do) for nothing."""
    s = zm.shared.array(BLOCK, zm.f32)
    t = zm.threadIdx.x
    i = zm.grid(1)
    for r in range(16):
        for j in range(BLOCK):
            s[(t + j) % BLOCK] = 0.0
        zm.syncthreads()
    v = 0.0
    if i < x.shape[0]:
        v = x[i]
    s[t] = v
    zm.syncthreads()
    if i < x.shape[0]:
        out[i] = s[t] * 2.0 + s[(t + 1) % BLOCK]


def inputs(rng):
    return [rng.standard_normal(N).astype(np.float32), np.zeros(N, np.float32)]


def holdout(rng):
    """A larger input, not a multiple of the block, for the final validation."""
    return [rng.standard_normal(4 * N + 37).astype(np.float32), np.zeros(4 * N + 37, np.float32)]


def launch(args):
    return ((args[0].shape[0] + BLOCK - 1) // BLOCK, BLOCK)
