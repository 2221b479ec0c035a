"""Grid barriers (`cg.this_grid().sync()`, numba's cooperative groups) on the interpreter and
the CPU (which runs such kernels on the interpreter: every block must be held at once), the
race detector's view of them, their PTX, and derivatives through them."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from zymo.backend.nvptx import ptxas
from zymo.diagnostics import CompileError, KernelRuntimeError, RaceError

from . import grid_sync_kernels as K

BACKENDS = ("interp", "cpu")


@pytest.mark.parametrize("backend", BACKENDS)
def test_heat_matches_numpy_across_blocks(backend):
    n, steps = 101, 60
    start = np.zeros(n)
    start[50] = 100.0
    a, b = start.copy(), np.zeros(n)
    K.heat.on(backend)[4, 32](a, b, steps, 0.25)
    last = b if steps % 2 else a
    np.testing.assert_array_equal(last, K.heat_reference(start, steps, 0.25))
    assert last.sum() == pytest.approx(100.0)


def test_cuda_alias_reaches_cooperative_groups():
    assert zm.cg.this_grid.path == "cg.this_grid"
    from zymo.frontend.resolve import CUDA_ALIAS
    assert CUDA_ALIAS.cg is zm.cg


@pytest.mark.parametrize("backend", BACKENDS)
def test_grid_barrier_orders_blocks_for_the_race_detector(backend):
    x = np.arange(32, dtype=np.float64)
    out = np.zeros(96)
    K.reversed_total.on(backend)[3, 32](x, out)
    np.testing.assert_array_equal(out, np.tile((np.arange(32) * 2.0)[::-1], 3))
    with pytest.raises(RaceError, match="data race on `x"):
        K.unsynced_total.on("interp")[3, 32](np.arange(32, dtype=np.float64), np.zeros(96))


def test_a_thread_that_skips_a_grid_sync_and_goes_on_is_an_error():
    with pytest.raises(KernelRuntimeError, match="divergent grid sync"):
        K.divergent_sync.on("interp")[2, 32](np.zeros(64))


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_waits_on_the_cooperative_workspace(arch):
    a = np.zeros(64)
    ptx = K.heat.specialize(a, a.copy(), 3, 0.25).ptx(arch)
    assert "%envreg1" in ptx and "%envreg2" in ptx   # the driver's grid workspace
    assert "atom.global.add.u32" in ptx and "fence.sc.gpu" in ptx
    assert ptx.count("bar.sync") >= 2 or ptx.count("barrier.sync") >= 2
    ptxas.assemble(ptx, arch)


def test_cpu_kernels_with_grid_barriers_know_they_may_have_any_number_of_blocks():
    spec = K.heat.specialize(np.zeros(8), np.zeros(8), 1, 0.5)
    assert spec.max_cooperative_grid_blocks(128, backend="cpu") == 2**31 - 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_through_grid_barriers(backend):
    n = 64   # every thread reaches every grid.sync
    rng = np.random.default_rng(1)
    report = zm.check_grad(K.guarded_heat, 2, 32,
                           zm.Duplicated(rng.random(n), np.zeros(n)),
                           zm.Duplicated(np.zeros(n), np.zeros(n)), 5, zm.Active(0.25),
                           backend=backend)
    assert report.ok, str(report)


def test_gradient_refuses_threads_that_skip_a_grid_sync():
    with pytest.raises(CompileError, match="may skip this grid.sync") as caught:
        zm.grad(K.heat).specialize(zm.Duplicated(np.zeros(8), np.zeros(8)),
                                   zm.Duplicated(np.zeros(8), np.zeros(8)), 3, zm.Active(0.5))
    assert "grid_sync_kernels.py:" in str(caught.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_threads_that_exited_do_not_hold_up_a_grid_barrier(backend):
    keys = np.array([1, 1, 1, 2, 2, 3, 3, 3, 3, 4, 5, 5], np.int64)
    labels = np.full(len(keys), -1, np.int64)
    K.label_runs.on(backend)[1, 32](keys, labels)
    np.testing.assert_array_equal(labels, K.label_runs_reference(keys))
