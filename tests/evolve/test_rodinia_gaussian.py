"""Rodinia gaussian: Fan2 on the CPU backend against NumPy, the finished solution solves the
system, and the check rejects a variant that skips the update or the right-hand side."""
import numpy as np

from rodinia_helpers import on_cpu, race_free
from bench.evolve import rodinia_gaussian as g


def test_fan2_matches_numpy_and_solves_the_system():
    w = g.WORKLOADS["rodinia_gaussian"]
    for n, t in ((37, 0), (50, 5)):
        rng = np.random.default_rng(n)
        args = g.inputs(rng, n=n, t=t)
        got = on_cpu(w, args)
        a = args[g.A].astype(np.float64).reshape(n, n)
        b = args[g.B_].astype(np.float64)
        g.eliminate(a, b, t)
        np.testing.assert_allclose(got[g.A].reshape(n, n), a, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[g.B_], b, rtol=1e-5, atol=1e-5)
        a0, b0 = g.generate(np.random.default_rng(n), n)
        np.testing.assert_allclose(g.solution(got), np.linalg.solve(a0, b0), rtol=1e-2, atol=1e-4)
        assert w.check(got, got) == 0.0


def test_check_rejects_skipped_updates():
    w = g.WORKLOADS["rodinia_gaussian"]
    args = g.inputs(np.random.default_rng(4), n=40)
    expected = on_cpu(w, args)
    assert w.check(expected, args) > w.tolerance            # nothing done
    no_rhs = list(expected)
    no_rhs[g.B_] = args[g.B_]
    assert w.check(expected, no_rhs) > w.tolerance


def test_race_free():
    race_free(g.WORKLOADS["rodinia_gaussian"])
