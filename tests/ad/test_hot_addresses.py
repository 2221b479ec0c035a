"""Shadow updates at hot addresses and shared tiles, as in the DG volume kernel: a small
matrix staged in shared memory and read by every thread (its cotangents reach a shared shadow,
then a few global addresses), a shared tile written before a barrier and read by other threads
after it, 2-D blocks that are one partial warp. Derivatives against float64 finite differences
and the dot-product test on the interpreter and the CPU, with each optimisation on and off;
the PTX through ptxas."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm
from zymo.backend import nvptx
from zymo.backend.nvptx import ptxas

BACKENDS = ("interp", "cpu")
NQ = 4
STATES = 2
needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")


@zm.kernel
def tile_derivative(out, q, D):
    """One block of NQ x NQ threads per element: D staged in shared memory; per k, fluxes into
    a shared tile between two barriers, a uniform read s_D[k, n] in a loop over n inside a loop
    over states, and the tile read across the block after the second barrier."""
    i = zm.threadIdx.x
    j = zm.threadIdx.y
    e = zm.blockIdx.x
    s_D = zm.shared.array((NQ, NQ), zm.f64)
    s_F = zm.shared.array((NQ, NQ, STATES), zm.f64)
    acc = zm.local.array((STATES, NQ), zm.f64)
    for s in range(STATES):
        for k in range(NQ):
            acc[s, k] = 0.0
    s_D[j, i] = D[j, i]
    for k in range(NQ):
        zm.syncthreads()
        node = (k * NQ + j) * NQ + i
        u = q[e, 0, node]
        v = q[e, 1, node]
        fs = (u * v, u * u + math.sin(v))
        for s in range(STATES):
            f = fs[s]
            s_F[j, i, s] = f * u
            h = f * v
            for n in range(NQ):
                acc[s, n] += s_D[k, n] * h
        zm.syncthreads()
        for n in range(NQ):
            dni = s_D[n, i]
            dnj = s_D[n, j]
            for s in range(STATES):
                acc[s, k] += dni * s_F[j, n, s] + dnj * s_F[n, i, s]
    for k in range(NQ):
        node = (k * NQ + j) * NQ + i
        for s in range(STATES):
            out[e, s, node] += acc[s, k] * q[e, 0, node]


def reference(out, q, D):
    """The kernel in NumPy, element by element (for the primal check)."""
    out = out.copy()
    for e in range(q.shape[0]):
        u = q[e, 0].reshape(NQ, NQ, NQ)      # [k, j, i]
        v = q[e, 1].reshape(NQ, NQ, NQ)
        fs = np.stack([u * v, u * u + np.sin(v)])          # [s, k, j, i]
        tile = fs * u
        h = fs * v
        acc = np.zeros((STATES, NQ, NQ, NQ))              # [s, k(slot), j, i]
        for k in range(NQ):
            for s in range(STATES):
                for n in range(NQ):
                    acc[s, n] += D[k, n] * h[s, k]
            for n in range(NQ):
                for s in range(STATES):
                    acc[s, k] += D[n][None, :] * tile[s, k][:, n][:, None] \
                        + D[n][:, None] * tile[s, k][n][None, :]
        out[e] += (acc * u[None]).reshape(STATES, -1)
    return out


def inputs(elements=3, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.5, 1.5, (elements, STATES, NQ ** 3))
    D = rng.standard_normal((NQ, NQ))
    out = rng.standard_normal((elements, STATES, NQ ** 3))
    return out, q, D


def dup(a):
    return zm.Duplicated(a, np.zeros_like(a))


def check(backend, elements=3):
    out, q, D = inputs(elements)
    report = zm.check_grad(tile_derivative, (elements,), (NQ, NQ), dup(out), dup(q), dup(D),
                           backend=backend, directions=2)
    assert report.ok, str(report)


def test_primal_matches_numpy():
    out, q, D = inputs()
    expected = reference(out, q, D)
    tile_derivative.on("interp")[(3,), (NQ, NQ)](out, q, D)
    np.testing.assert_allclose(out, expected, rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient(backend):
    check(backend)


def gradient_ptx():
    out, q, D = inputs()
    spec = zm.grad(tile_derivative).specialize(dup(out), dup(q), dup(D))
    return spec


@needs_ptxas
def test_partial_warp_sums_in_ptx(monkeypatch):
    """A 4 x 4 block is a warp of 16 lanes: the uniform read's cotangent is summed by a tree
    guarded by the active lanes' count (popc), one atomic per warp; off, no tree runs."""
    spec = gradient_ptx()
    on = nvptx.compile(spec.codegen, arch="sm_90").ptx
    monkeypatch.setenv("ZYMO_PARTIAL_WARP_SUMS", "0")
    off = nvptx.compile(spec.codegen, arch="sm_90").ptx
    assert "popc.b32" in on and "popc.b32" not in off
    for ptx in (on, off):
        ptxas.assemble(ptx, "sm_90")
