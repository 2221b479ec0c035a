"""Three kernels of the CUDA backend's benchmark (zymo/bench/gpu_kernels.py) as evolution
workloads: already about as fast as their CUDA C twins, so what the search finds is what an edit
can still take out of a tuned kernel (GEVO's +29% on hand-tuned code), not a naive kernel's
waste.

- `sgemm`: shared-memory 16x16 tiles, two barriers per tile step;
- `hotspot`: Rodinia's 5-point thermal stencil with a source term, clamped borders;
- `nbody`: all-pairs gravity through shared-memory tiles of 256 bodies.

Floats are compared norm-wise (largest absolute difference over the largest magnitude), so a
variant that reorders a sum passes and one that drops a term does not; tolerances are a few
float32 roundings of the kernel's longest sum.
"""
from __future__ import annotations

import functools

import numpy as np

from zymo.bench import gpu_kernels as gk
from .workloads import Workload


def normwise_error(expected, got) -> float:
    """Largest |got - expected| over the largest |expected|, over the float arrays; integer
    arrays must match."""
    error = 0.0
    for e, g in zip(expected, got):
        if not isinstance(e, np.ndarray):
            continue
        if e.dtype.kind != "f":
            if not np.array_equal(e, g):
                return float("inf")
            continue
        diff = np.abs(g.astype(np.float64) - e)
        if not np.all(np.isfinite(diff)):
            return float("inf")
        error = max(error, float(diff.max(initial=0.0)) / max(float(np.abs(e).max(initial=0.0)),
                                                              1e-30))
    return error


# ---- sgemm: c = a @ b, n a multiple of the tile ------------------------------------------------
def sgemm_inputs(rng, n: int = 512) -> list:
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    return [a, b, np.zeros((n, n), np.float32)]


def sgemm_launch(args):
    n = args[2].shape[0]
    return (n // gk.TILE, n // gk.TILE), (gk.TILE, gk.TILE)


# ---- hotspot: one step of the thermal stencil --------------------------------------------------
def hotspot_inputs(rng, rows: int = 2048, cols: int = 2048) -> list:
    temp = (323.0 + 10.0 * rng.random((rows, cols))).astype(np.float32)
    power = (0.5 * rng.random((rows, cols))).astype(np.float32)
    # coefficients in the range of Rodinia's; stable: cap * (2 rx + 2 ry + rz) < 1
    return [temp, power, np.zeros((rows, cols), np.float32), 0.5, 0.1, 0.1, 0.0001, 80.0]


HOTSPOT_BLOCK = (16, 16)


def hotspot_launch(args):
    rows, cols = args[0].shape
    return (-(-cols // 16), -(-rows // 16)), HOTSPOT_BLOCK


# ---- n-body: accelerations of all pairs, n a multiple of the tile -----------------------------
def nbody_inputs(rng, n: int = 4096) -> list:
    pos = rng.standard_normal((n, 4)).astype(np.float32)
    pos[:, 3] = rng.random(n).astype(np.float32) + 0.5     # masses
    return [pos, np.zeros((n, 3), np.float32), 0.01]


def nbody_launch(args):
    return (args[0].shape[0] // gk.NT,), (gk.NT,)


def _holdout(inputs, **size):
    """A held-out input of another size, from its own seed."""
    return functools.partial(_seeded, functools.partial(inputs, **size))


def _seeded(inputs, rng=None):
    return inputs(np.random.default_rng(2026))


WORKLOADS = {
    "sgemm": Workload(gk.sgemm, sgemm_launch, sgemm_inputs, _holdout(sgemm_inputs, n=1024),
                      normwise_error, 1e-5,
                      functools.partial(sgemm_inputs, n=32),
                      describe="SGEMM, shared 16x16 tiles, 512x512 (held out: 1024x1024)"),
    "hotspot": Workload(gk.hotspot, hotspot_launch, hotspot_inputs,
                        _holdout(hotspot_inputs, rows=3001, cols=4099), normwise_error, 1e-6,
                        functools.partial(hotspot_inputs, rows=20, cols=37),
                        describe="hotspot 5-point stencil, 2048x2048 (held out: 3001x4099)"),
    "nbody": Workload(gk.nbody, nbody_launch, nbody_inputs, _holdout(nbody_inputs, n=16384),
                      normwise_error, 1e-5, functools.partial(nbody_inputs, n=2 * gk.NT),
                      describe="all-pairs n-body, shared tiles of 256, 4096 bodies "
                               "(held out: 16384)"),
}
