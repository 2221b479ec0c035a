"""Rodinia b+tree: findK on the CPU backend answers every query as a binary search does, on
trees of one, two and three levels."""
import numpy as np

from rodinia_helpers import on_cpu, race_free
from bench.evolve import rodinia_btree as bt


def test_find_k_matches_a_binary_search():
    w = bt.WORKLOADS["rodinia_btree"]
    for n, height in ((150, 0), (3000, 1), (40000, 2)):
        rng = np.random.default_rng(n)
        args = bt.inputs(rng, n=n, queries=64)
        assert int(args[bt.HEIGHT]) == height
        keys = np.unique(np.random.default_rng(n).integers(0, 4 * n, int(n * 1.2)))[:n]
        got = on_cpu(w, args)
        want = bt.reference(args, keys)
        assert (want >= 0).sum() > 40
        np.testing.assert_array_equal(got[bt.ANS], want)
        assert w.check(got, got) == 0.0


def test_race_free():
    race_free(bt.WORKLOADS["rodinia_btree"])
