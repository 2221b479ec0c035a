"""Shadow updates at hot addresses and shared tiles, as in the DG volume kernel: a small
matrix staged in shared memory and read by every thread (its cotangents reach a shared shadow,
then a few global addresses), a shared tile written before a barrier and read by other threads
after it, 2-D blocks that are one partial warp. Derivatives against float64 finite differences
and the dot-product test on the interpreter and the CPU, with each optimisation on and off;
the PTX through ptxas."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import zymo as zm
from bench.layer_kernels import radial
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


@pytest.mark.parametrize("transpose", ["1", "0"])
@pytest.mark.parametrize("sums", ["1", "0", "uniform", "atomic"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient(backend, sums, transpose, monkeypatch):
    monkeypatch.setenv("ZYMO_AD_LOOP_SUMS", sums)
    monkeypatch.setenv("ZYMO_AD_TRANSPOSE", transpose)
    check(backend)


def shadow_updates(ir: str) -> list:
    return re.findall(r"atomic\.(\w+)\(%ds_D, ([^)]*)\)", ir)


def test_loop_sums_take_the_updates_out_of_the_loops(monkeypatch):
    """s_D[k, n]'s cotangent summed over the states (one warp sum per (k, n), in the k loop),
    s_D[n, i]'s and s_D[n, j]'s over k (one update per n, after the k loop: an atomic for i,
    which every lane indexes differently, a warp sum by runs of lanes for j = threadIdx.y),
    each element taken from the loop over the sums' slots (%t); off, each is made where the
    read reverses. (With the reads' adjoints transposed there are no atomics: they are off.)"""
    monkeypatch.setenv("ZYMO_AD_TRANSPOSE", "0")
    out, q, D = inputs()
    args = (dup(out), dup(q), dup(D))
    on = shadow_updates(zm.grad(tile_derivative).specialize(*args).ir())
    monkeypatch.setenv("ZYMO_AD_LOOP_SUMS", "0")
    off = shadow_updates(zm.grad(tile_derivative).specialize(*args).ir())
    assert sorted(kind for kind, _ in on) == ["accumulate", "accumulate", "add"]
    assert all(re.search(r"%t\d*\b", indices) for _, indices in on)
    assert not any(re.search(r"%t\d*\b", indices) for _, indices in off)


@zm.kernel
def half_tile(out, q):
    """Only half the threads store into the tile (a branch): the refill cannot promise the
    reads their elements, so the reads stay on a tape."""
    i = zm.threadIdx.x
    j = zm.threadIdx.y
    e = zm.blockIdx.x
    s_F = zm.shared.array((NQ, NQ), zm.f64)
    total = 0.0
    for k in range(NQ):
        zm.syncthreads()
        node = (k * NQ + j) * NQ + i
        u = q[e, 0, node]
        if i < NQ // 2:
            s_F[j, i] = u * u
        zm.syncthreads()
        for n in range(NQ // 2):
            total += s_F[j, n] * u
    out[e, 0, (j * NQ) + i] += total


@pytest.mark.parametrize("refill", ["1", "0"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_with_and_without_tile_refill(backend, refill, monkeypatch):
    monkeypatch.setenv("ZYMO_AD_TILE_REFILL", refill)
    check(backend)


def test_tile_refill_replaces_the_tape(monkeypatch):
    """The tile's reads (s_F[j, n, s], s_F[n, i, s] per k: 2 x NQ x NQ x STATES a thread)
    were per-thread tape; refilled, no tape, and the launch needs NQ threads along x and y."""
    out, q, D = inputs()
    args = (dup(out), dup(q), dup(D))
    on = zm.grad(tile_derivative).specialize(*args)
    assert on.local_tape_bytes == 0
    assert on.assumptions.blocks == {("x", NQ), ("y", NQ)}
    assert on.assumptions.hold((3, 1, 1), (NQ, NQ, 1), lambda source: None)
    assert not on.assumptions.hold((3, 1, 1), (NQ, NQ - 1, 1), lambda source: None)
    monkeypatch.setenv("ZYMO_AD_TILE_REFILL", "0")
    off = zm.grad(tile_derivative).specialize(*args)
    assert off.local_tape_bytes == 2 * NQ * NQ * STATES * 8   # (read, k, n, s)
    assert not off.assumptions.blocks


@pytest.mark.parametrize("backend", BACKENDS)
def test_tile_written_under_a_branch_keeps_its_tape(backend):
    rng = np.random.default_rng(3)
    q = rng.uniform(0.5, 1.5, (2, 1, NQ ** 3))
    out = np.zeros((2, 1, NQ * NQ))
    report = zm.check_grad(half_tile, (2,), (NQ, NQ), dup(out), dup(q), backend=backend)
    assert report.ok, str(report)
    spec = zm.grad(half_tile).specialize(dup(out), dup(q))
    assert spec.local_tape_bytes > 0 and not spec.assumptions.blocks


@needs_ptxas
def test_gradient_ptx_assembles_with_all_switches_on_and_each_off(monkeypatch):
    out, q, D = inputs()
    for switch in ("ZYMO_AD_LOOP_SUMS", "ZYMO_AD_TILE_REFILL", "ZYMO_AD_TRANSPOSE", None):
        with monkeypatch.context() as m:
            if switch is not None:
                m.setenv(switch, "0")
            spec = zm.grad(tile_derivative).specialize(dup(out), dup(q), dup(D))
            ptxas.assemble(nvptx.compile(spec.codegen, arch="sm_90").ptx, "sm_90")


@zm.kernel
def tile_two_stores(out, q):
    """Two stores fill the tile, the second under a branch on the element's values: not
    every iteration writes every element, so no refill (its reads go on a tape)."""
    i = zm.threadIdx.x
    j = zm.threadIdx.y
    e = zm.blockIdx.x
    s_F = zm.shared.array((NQ, NQ), zm.f64)
    total = 0.0
    for k in range(NQ):
        zm.syncthreads()
        u = q[e, 0, (k * NQ + j) * NQ + i]
        s_F[j, i] = u * u
        if u > 1.0:
            s_F[j, i] = u
        zm.syncthreads()
        for n in range(NQ):
            total += s_F[j, n] * u
    out[e, 0, (j * NQ) + i] += total


@pytest.mark.parametrize("backend", BACKENDS)
def test_tile_stored_twice_under_a_branch(backend):
    q = np.random.default_rng(4).uniform(0.5, 1.5, (2, 1, NQ ** 3))
    out = np.zeros((2, 1, NQ * NQ))
    report = zm.check_grad(tile_two_stores, (2,), (NQ, NQ), dup(out), dup(q), backend=backend)
    assert report.ok, str(report)
    assert zm.grad(tile_two_stores).specialize(dup(out), dup(q)).local_tape_bytes > 0


def radial_inputs(n=13, m=6, dims=3, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, dims)), rng.standard_normal((m, dims)),
            rng.uniform(0.1, 0.5, m), np.zeros((n, m)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_reads_shared_along_x_are_grouped(backend):
    """c's and g's cotangents by warp sums over runs of lanes (`atomic.accumulate`), checked
    against finite differences with blocks whose warps hold several rows (4 x 3, 8 x 8)."""
    x, c, g, y = radial_inputs()
    ir = zm.grad(radial).specialize(x, dup(c), dup(g), dup(y)).ir()
    assert "atomic.accumulate(%dc" in ir and "atomic.accumulate(%dg" in ir
    assert "atomic.add(%dc" not in ir and "atomic.add(%dg" not in ir
    for block in ((4, 3), (8, 8)):
        grid = tuple(-(-n // b) for n, b in zip(y.shape, block))
        report = zm.check_grad(radial, grid, block, x, dup(c), dup(g), dup(y),
                               backend=backend, directions=2)
        assert report.ok, str(report)


@needs_ptxas
@pytest.mark.parametrize("segmented", ["1", "0"])
def test_grouped_sums_in_ptx(segmented, monkeypatch):
    """Segmented warp sums (`match.any.sync`, one atomic per run) unless
    ZYMO_SEGMENTED_WARP_SUMS=0; the PTX assembles either way."""
    monkeypatch.setenv("ZYMO_SEGMENTED_WARP_SUMS", segmented)
    x, c, g, y = (a.astype(np.float32) for a in radial_inputs())
    spec = zm.grad(radial).specialize(x, dup(c), dup(g), dup(y))
    ptx = nvptx.compile(spec.codegen, arch="sm_90").ptx
    assert ("match.any.sync" in ptx) == (segmented == "1")
    report = ptxas.assemble(ptx, "sm_90")
    assert report.spill_stores == 0
