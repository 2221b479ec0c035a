"""Rodinia bfs: the expansion kernel on the CPU backend against NumPy, the generated graph is
undirected with mean degree 6, and the check is exact."""
import numpy as np

from rodinia_helpers import on_cpu, race_free
from bench.evolve import rodinia_bfs as bfs


def test_graph_is_undirected_with_mean_degree_six():
    start, degree, edges = bfs.graph(np.random.default_rng(0), 5000)
    pairs = {(i, int(e)) for i in range(5000) for e in edges[start[i]:start[i] + degree[i]]}
    assert all((b, a) in pairs for a, b in pairs)
    assert 5.5 < degree.mean() < 6.5


def test_expansion_matches_numpy():
    w = bfs.WORKLOADS["rodinia_bfs"]
    args = bfs.inputs(np.random.default_rng(3), n=2000)
    assert args[bfs.MASK].sum() > 10
    got = on_cpu(w, args)
    mask, updating, cost = bfs.reference(args)
    np.testing.assert_array_equal(got[bfs.MASK], mask)
    np.testing.assert_array_equal(got[bfs.UPDATING], updating)
    np.testing.assert_array_equal(got[bfs.COST], cost)
    assert w.check(got, got) == 0.0
    bad = list(got)
    bad[bfs.COST] = got[bfs.COST].copy()
    bad[bfs.COST][np.flatnonzero(updating)[0]] += 1
    assert w.check(got, bad) == float("inf")
    # the next level's costs are the search's
    level = bfs.levels(*args[:3])
    reached = got[bfs.UPDATING] == 1
    np.testing.assert_array_equal(got[bfs.COST][reached], level[reached])


def test_race_free():
    race_free(bfs.WORKLOADS["rodinia_bfs"])
