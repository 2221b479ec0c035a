"""A short evolution of a Rodinia workload on the CPU: backprop's layer-forward kernel, whose
write-back of the products over the weights is read by nobody (the check looks at the partial
sums only), so a few generations find variants that still pass the check, the race check and
the held-out input."""
import functools

import numpy as np
import pytest

import zymo as zm
from rodinia_helpers import run
from zymo.runtime.evolution.workers import IsolatedPool
from bench.evolve import rodinia_backprop as bp


@pytest.mark.slow   # ~28 s on 2 busy cores
def test_a_short_search_keeps_the_partial_sums():
    w = bp.WORKLOADS["rodinia_backprop"]
    pool = IsolatedPool(2, timeout=30.0, env={"ZYMO_CPU_THREADS": "1"})
    try:
        result = zm.evolve(w.kernel, w.launch, functools.partial(bp.inputs, n=2048),
                           check=w.check, tolerance=w.tolerance, population=8, generations=3,
                           seed=3, executor=pool, backend="cpu", progress=False,
                           holdout=functools.partial(bp.inputs, n=4096 + 16),
                           race_check=w.race_check)
    finally:
        pool.shutdown()
    assert len(result.history) == 4 and result.history[-1]["evaluations"] > 8
    assert result.speedup > 0.5
    # whatever it reports still computes the partial sums, on an input it has never seen
    best = result.best if result.best is not None else w.kernel
    args = bp.inputs(np.random.default_rng(99), n=512)
    got = run(best, w.launch, args, "cpu")
    np.testing.assert_allclose(got[bp.PARTIAL], bp.reference(args), rtol=1e-5)
