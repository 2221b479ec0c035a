"""Rodinia backprop: the layer-forward kernel on the CPU backend against NumPy; the check
rejects a variant whose tree skips a round."""
import numpy as np

from rodinia_helpers import on_cpu, race_free
from bench.evolve import rodinia_backprop as bp


def test_partial_sums_match_numpy():
    w = bp.WORKLOADS["rodinia_backprop"]
    args = bp.inputs(np.random.default_rng(1), n=96)
    got = on_cpu(w, args)
    np.testing.assert_allclose(got[bp.PARTIAL], bp.reference(args), rtol=1e-5)
    assert w.check(got, got) == 0.0
    bad = list(got)
    half = (args[bp.INPUT][1:, None] * args[bp.WEIGHTS][1:, 1:]).reshape(-1, 16, 16)
    bad[bp.PARTIAL] = half[:, :8].sum(axis=1).astype(np.float32)
    assert w.check(got, bad) > w.tolerance


def test_race_free():
    race_free(bp.WORKLOADS["rodinia_backprop"])
