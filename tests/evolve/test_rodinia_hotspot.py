"""Rodinia hotspot with its pyramid: the kernel on the CPU backend against `iteration` NumPy
steps (tiles, halos and chip edges included), the check rejects a launch that drops the power
term, the ambient term or a step, and the kernel assembles for the GPU."""
import functools

import numpy as np
import pytest

import zymo as zm

from rodinia_helpers import on_cpu, race_free, run
from bench.evolve import rodinia_hotspot as hs
from zymo.backend.nvptx import ptxas
from zymo.runtime.evolution.workers import IsolatedPool


@pytest.mark.parametrize("rows,cols,height", [(20, 27, 3), (37, 45, 1), (40, 33, 7),
                                              (16, 16, 2), (5, 70, 4)])
def test_kernel_matches_numpy_steps(rows, cols, height):
    w = hs.WORKLOADS["rodinia_hotspot"]
    args = hs.inputs(np.random.default_rng(rows), rows=rows, cols=cols, height=height)
    got = on_cpu(w, args)
    want = hs.reference(args)
    # each step rounds ~340 K to float32
    np.testing.assert_allclose(got[hs.T_DST], want, rtol=0, atol=2e-5 * height)
    assert np.abs(want - args[hs.T_SRC]).max() > 0.3 * height   # the launch moved the chip
    assert w.check(got, got) == 0.0


def test_check_rejects_dropped_work():
    w = hs.WORKLOADS["rodinia_hotspot"]
    args = hs.inputs(np.random.default_rng(4), rows=40, cols=56, height=3)
    expected = on_cpu(w, args)
    for dropped in (dict(power=False), dict(amb=False), dict(steps=2)):
        bad = list(expected)
        bad[hs.T_DST] = hs.reference(args, **dropped).astype(np.float32)
        assert w.check(expected, bad) > w.tolerance, dropped
    # the halo: a block that wrote its whole tile (the ring it could not update is stale)
    stale = list(expected)
    stale[hs.T_DST] = np.where(np.arange(args[hs.T_DST].size) % 56 == 0, args[hs.T_SRC],
                               expected[hs.T_DST])
    assert w.check(expected, stale) > w.tolerance
    # a float32 rounding of the exact steps passes
    close = list(expected)
    close[hs.T_DST] = hs.reference(args).astype(np.float32)
    assert w.check(expected, close) < 1e-3


def test_race_free_inputs_vary_and_holdout_differs():
    w = hs.WORKLOADS["rodinia_hotspot"]
    race_free(w)
    a, b = (hs.inputs(np.random.default_rng(s), rows=24, cols=20) for s in (1, 2))
    assert not np.array_equal(a[hs.T_SRC], b[hs.T_SRC])
    assert not np.array_equal(a[hs.POWER], b[hs.POWER])
    held = w.holdout(None)
    assert (int(held[hs.ROWS]), int(held[hs.COLS]), int(held[hs.ITERATION])) == (1003, 1301, 3)
    assert w.launch(held) == ((131, 101), (16, 16))
    assert w.launch(w.inputs(np.random.default_rng(0))) == ((256, 256), (16, 16))


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
def test_kernel_assembles():
    w = hs.WORKLOADS["rodinia_hotspot"]
    args = w.race_check(np.random.default_rng(1))
    report = ptxas.assemble(w.kernel.specialize(*args).ptx(arch="sm_90"), "sm_90")
    assert report.registers > 0


@pytest.mark.slow   # ~60 s on 2 busy cores
def test_a_short_search_keeps_the_steps():
    w = hs.WORKLOADS["rodinia_hotspot"]
    pool = IsolatedPool(2, timeout=30.0, env={"ZYMO_CPU_THREADS": "1"})
    try:
        result = zm.evolve(w.kernel, w.launch, functools.partial(hs.inputs, rows=64, cols=64,
                                                                 height=3),
                           check=w.check, tolerance=w.tolerance, population=8, generations=2,
                           seed=5, executor=pool, backend="cpu", progress=False,
                           holdout=functools.partial(hs.inputs, rows=97, cols=75, height=2),
                           race_check=w.race_check)
    finally:
        pool.shutdown()
    assert len(result.history) == 3 and result.history[-1]["evaluations"] > 8
    # whatever it reports still takes the steps, on an input it has never seen
    best = result.best if result.best is not None else w.kernel
    args = hs.inputs(np.random.default_rng(99), rows=50, cols=41, height=4)
    got = run(best, w.launch, args, "cpu")
    assert w.check([*args[:hs.T_DST], hs.reference(args).astype(np.float32), *args[hs.T_DST + 1:]],
                   got) <= w.tolerance
