"""Rodinia's breadth-first search as an evolution workload: `Kernel`, the frontier expansion
of the two kernels GEVO timed (`Kernel2`, which turns the next frontier into the current one,
is a few flag copies per node).

The graph is in compressed rows: node i's edges are edges[start[i] : start[i] + degree[i]].
One thread per node (blocks of 512, as Rodinia's): a node on the frontier (mask) leaves it
and gives each neighbour not yet visited the cost one more than its own and a place on the
next frontier (updating). Threads that reach one neighbour write it the same cost and flag.

Rodinia's graph generator, re-implemented: undirected, each node draws 1..5 (mean 3) random
partners and each edge is stored both ways, so the mean degree is 6 (GEVO's largest test,
graph1MW_6, is 1M nodes of mean degree 6; its others have 4096 and 65536 nodes). The state
launched is the level with the largest frontier of a search from node 0 (NumPy), on a fresh
graph per evaluation: 2^20 nodes; held out: 3 * 2^20 + 7. Error: GEVO compared the output
(each node's cost) byte for byte (`fuzzy: false`): the cost, frontier and next-frontier
arrays must match exactly.
"""
from __future__ import annotations

import functools

import numpy as np

import zymo as zm

from .rodinia_common import cdiv, exact, seeded_holdout
from .workloads import Workload

THREADS = 512
START, DEGREE, EDGES, MASK, UPDATING, VISITED, COST = range(7)


@zm.kernel
def bfs_expand(start, degree, edges, mask, updating, visited, cost):
    tid = zm.blockIdx.x * THREADS + zm.threadIdx.x
    if tid < start.shape[0] and mask[tid] != 0:
        mask[tid] = 0
        for i in range(start[tid], start[tid] + degree[tid]):
            nb = edges[i]
            if visited[nb] == 0:
                cost[nb] = cost[tid] + 1
                updating[nb] = 1


def graph(rng, n: int):
    """(start, degree, edges) of a random undirected graph of mean degree 6."""
    picks = rng.integers(1, 6, n)
    src = np.repeat(np.arange(n), picks)
    dst = rng.integers(0, n, src.size)
    # node i's row: the partners it drew (src is grouped by node already), then the nodes
    # that drew it, in the order they were drawn (a stable sort of dst alone)
    back = np.bincount(dst, minlength=n)
    degree = picks + back
    start = _offsets(degree)
    edges = np.empty(2 * src.size, np.int32)
    edges[start[src] + np.arange(src.size) - _offsets(picks)[src]] = dst
    order = np.argsort(dst, kind="stable")
    firsts = _offsets(back)
    to = dst[order]
    edges[start[to] + picks[to] + np.arange(src.size) - firsts[to]] = src[order]
    return start.astype(np.int32), degree.astype(np.int32), edges


def _offsets(counts) -> np.ndarray:
    """Where each group begins when groups of `counts` items are laid end to end."""
    out = np.zeros(len(counts), np.int64)
    out[1:] = np.cumsum(counts)[:-1]
    return out


def levels(start, degree, edges, source: int = 0) -> np.ndarray:
    """Each node's level from `source` (-1: unreached), by frontiers in NumPy."""
    n = start.size
    level = np.full(n, -1, np.int64)
    level[source] = 0
    frontier = np.array([source])
    d = 0
    while frontier.size:
        d += 1
        counts = degree[frontier]
        firsts = np.repeat(start[frontier] - np.cumsum(counts) + counts, counts)
        nbs = edges[firsts + np.arange(counts.sum())]
        level[nbs[level[nbs] < 0]] = d
        frontier = np.flatnonzero(level == d)     # each node once, in order
    return level


def inputs(rng, n: int = 1 << 20) -> list:
    start, degree, edges = graph(rng, n)
    level = levels(start, degree, edges)
    widest = int(np.bincount(level[level >= 0]).argmax())
    mask = (level == widest).astype(np.uint8)
    visited = ((level >= 0) & (level <= widest)).astype(np.uint8)
    cost = np.where(visited == 1, level, -1).astype(np.int32)
    return [start, degree, edges, mask, np.zeros(n, np.uint8), visited, cost]


def launch(args):
    return (cdiv(args[START].shape[0], THREADS),), (THREADS,)


def reference(args):
    """(mask, updating, cost) after the step."""
    start, degree, edges, mask, _, visited, cost = args
    frontier = np.flatnonzero(mask)
    counts = degree[frontier]
    firsts = np.repeat(start[frontier] - np.cumsum(counts) + counts, counts)
    nbs = edges[firsts + np.arange(counts.sum())]
    nbs = nbs[visited[nbs] == 0]
    updating = np.zeros_like(mask)
    updating[nbs] = 1
    new_cost = cost.copy()
    new_cost[nbs] = cost[frontier[0]] + 1 if frontier.size else 0
    return np.zeros_like(mask), updating, new_cost


WORKLOADS = {
    "rodinia_bfs": Workload(
        bfs_expand, launch, inputs, seeded_holdout(inputs, n=3 * (1 << 20) + 7),
        exact(MASK, UPDATING, COST), 0.0, functools.partial(inputs, n=700),
        describe="Rodinia bfs, the frontier expansion (Kernel) at the widest level of a 2^20-node "
                 "graph of mean degree 6 (held out: 3*2^20+7 nodes); error: exact"),
}
