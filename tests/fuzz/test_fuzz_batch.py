"""Seeded fuzzing batches: random race-free kernels on the interpreter and the CPU backend (and
CUDA where a GPU is present), their derivatives against finite differences. Any finding, or a
program the language rejects (a generator bug), fails the test with the report."""
from __future__ import annotations

import time

import pytest

from zymo.fuzz.report import Batch

PRIMAL_SEEDS = range(1000, 1060)
GRAD_SEEDS = range(5000, 5010)


def _run(backends, seeds, grad: bool, budget: float) -> Batch:
    batch = Batch(backends, grad, avoid_known=True)
    start = time.perf_counter()
    batch.run(seeds, timeout=60.0, time_budget=budget)
    elapsed = time.perf_counter() - start
    bad = batch.findings() or [o for o in batch.outcomes if o.status == "rejected"]
    assert not bad, batch.report(elapsed)
    assert len(batch.outcomes) >= min(len(seeds), 10), "the batch ran almost nothing"
    return batch


def test_primal_batch_interp_cpu():
    _run(("interp", "cpu"), PRIMAL_SEEDS, grad=False, budget=45.0)


def test_derivative_batch_interp_cpu():
    _run(("interp", "cpu"), GRAD_SEEDS, grad=True, budget=35.0)


@pytest.mark.gpu
def test_primal_batch_with_cuda():
    _run(("interp", "cpu", "cuda"), range(2000, 2100), grad=False, budget=240.0)


@pytest.mark.gpu
def test_derivative_batch_with_cuda():
    _run(("interp", "cpu", "cuda"), range(6000, 6020), grad=True, budget=240.0)
