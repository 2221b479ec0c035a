"""Rodinia streamcluster: the cost kernel on the CPU backend against NumPy, and the check
rejects a variant that loses the savings."""
import numpy as np

from rodinia_helpers import on_cpu, race_free
from bench.evolve import rodinia_streamcluster as sc


def test_cost_matches_numpy():
    w = sc.WORKLOADS["rodinia_streamcluster"]
    args = sc.inputs(np.random.default_rng(7), dim=9, n=1100)
    got = on_cpu(w, args)
    switch, work = sc.reference(args)
    assert 0 < switch.sum() < switch.size
    np.testing.assert_array_equal(got[sc.SWITCH], switch)
    np.testing.assert_allclose(got[sc.WORK], work, rtol=1e-5, atol=1e-6)
    assert w.check(got, got) == 0.0
    bad = list(got)
    bad[sc.WORK] = got[sc.WORK].copy()
    bad[sc.WORK][:, sc.K] = 0.0
    assert w.check(got, bad) > w.tolerance


def test_race_free():
    race_free(sc.WORKLOADS["rodinia_streamcluster"])
