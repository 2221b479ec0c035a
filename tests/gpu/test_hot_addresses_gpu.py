"""The hot-address and shared-tile derivative strategies on the GPU, each switch on and off:
warp sums in partial warps (ZYMO_PARTIAL_WARP_SUMS) and by runs of lanes
(ZYMO_SEGMENTED_WARP_SUMS), per-thread sums over loops
(ZYMO_AD_LOOP_SUMS), shared tiles filled again instead of taped (ZYMO_AD_TILE_REFILL);
gradients against float64 finite differences and the dot-product test."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from ad.test_hot_addresses import NQ, dup, inputs, radial, radial_inputs, tile_derivative

pytestmark = pytest.mark.gpu

SWITCHES = [{}, {"ZYMO_PARTIAL_WARP_SUMS": "0"}, {"ZYMO_SEGMENTED_WARP_SUMS": "0"},
            {"ZYMO_AD_LOOP_SUMS": "0"},
            {"ZYMO_AD_LOOP_SUMS": "uniform"}, {"ZYMO_AD_TILE_REFILL": "0"}]


@pytest.mark.parametrize("switches", SWITCHES, ids=lambda s: ",".join(
    f"{k}={v}" for k, v in s.items()) or "all-on")
def test_tile_derivative(switches, monkeypatch):
    for name, value in switches.items():
        monkeypatch.setenv(name, value)
    out, q, D = inputs(7, seed=4)
    report = zm.check_grad(tile_derivative, (7,), (NQ, NQ), dup(out), dup(q), dup(D),
                           backend="cuda", directions=3)
    assert report.ok, str(report)


@zm.kernel
def scaled(w, x, y):
    """w[0] read by every thread (a uniform address); blocks of 25 or 48 threads end in a
    partial warp; `positive` makes the active lanes of a warp scattered."""
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = w[0] * x[i] + w[1] * x[i] * x[i]


@zm.kernel
def scaled_where_positive(w, x, y):
    i = zm.grid(1)
    if i < x.shape[0] and x[i] > 0:
        y[i] = w[0] * x[i]


@pytest.mark.parametrize("partial", ["1", "0"])
@pytest.mark.parametrize("block", [25, 48, 64])
def test_uniform_cotangents_in_partial_warps(block, partial, monkeypatch):
    """dw summed exactly as NumPy sums it (float64), whatever lanes are active."""
    monkeypatch.setenv("ZYMO_PARTIAL_WARP_SUMS", partial)
    rng = np.random.default_rng(block)
    n = 300
    x, dy = rng.standard_normal(n), rng.standard_normal(n)
    grid = (n + block - 1) // block
    for kernel, expected in (
            (scaled, [np.dot(x, dy), np.dot(x * x, dy)]),
            (scaled_where_positive, [np.dot(np.where(x > 0, x, 0), dy), 0.0])):
        w = np.array([0.7, -0.3])
        dw = np.zeros(2)
        zm.grad(kernel)[grid, block](zm.Duplicated(w, dw), x, zm.Duplicated(np.zeros(n),
                                                                            dy.copy()))
        np.testing.assert_allclose(dw, expected, rtol=1e-12, atol=1e-12)


def test_dg_gate_with_each_switch_off(monkeypatch):
    """The DG benchmark's gate (float64, 3 elements, 2 directions) with each switch off."""
    from bench.enzyme import dg
    for switches in SWITCHES:
        with monkeypatch.context() as m:
            for name, value in switches.items():
                m.setenv(name, value)
            gate = dg.gate("cuda")
            assert gate.ok, (switches, gate.detail)


@pytest.mark.parametrize("switches", [{}, {"ZYMO_SEGMENTED_WARP_SUMS": "0"},
                                      {"ZYMO_PARTIAL_WARP_SUMS": "0"}],
                         ids=["all-on", "segmented-off", "partial-off"])
@pytest.mark.parametrize("block", [(16, 16), (8, 4), (5, 5), (33, 2), (32, 1), (1, 32)])
def test_sums_by_runs_of_lanes(block, switches, monkeypatch):
    """dc and dg, whose addresses runs of lanes share (one per threadIdx.y), equal NumPy's
    float64 sums whatever the block's shape: runs of 16, 8, 5 lanes, runs broken by a warp
    boundary (33 x 2), whole warps, or no two lanes alike (1 x 32); rows past the end of x
    leave lanes inactive."""
    for name, value in switches.items():
        monkeypatch.setenv(name, value)
    x, c, g, y = radial_inputs(n=70, m=9, dims=3, seed=sum(block))
    dy = np.random.default_rng(1).standard_normal(y.shape)
    diff = x[:, None, :] - c[None, :, :]
    d = (diff ** 2).sum(-1)
    e = np.exp(-g[None, :] * d) * dy
    expected_dg = (-d * e).sum(0)
    expected_dc = (2 * g[None, :, None] * e[:, :, None] * diff).sum(0)
    dc, dg = np.zeros_like(c), np.zeros_like(g)
    grid = tuple(-(-n // b) for n, b in zip(y.shape, block))
    zm.grad(radial)[grid, block](x, zm.Duplicated(c, dc), zm.Duplicated(g, dg),
                                 zm.Duplicated(y, dy.copy()))
    np.testing.assert_allclose(dg, expected_dg, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dc, expected_dc, rtol=1e-12, atol=1e-12)
