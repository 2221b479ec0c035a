"""Rodinia's b+tree as an evolution workload: `findK`, the point queries (GEVO timed it with
`findRangeK`, the range queries, which walk the tree the same way twice).

The tree is an array of nodes, the root first; node v has ORDER + 1 key slots and as many
child (or, in a leaf, record) indices. An inner node's slot s holds the smallest key under its
child s; unused slots hold INT32_MAX. One block per query, one thread per slot: on each of the
`height` inner levels, the thread whose slot brackets the query (keys[s] <= q < keys[s + 1])
moves the block's current node to its child (Rodinia's offset / currKnode pair, a barrier
after each); at the leaf, the thread whose key equals the query writes its record's value.

Rodinia's inputs (GEVO's test: mil.txt, a million keys, and command.txt's queries): a tree is
bulk-loaded here from 2^20 distinct random keys, leaves and inner nodes three quarters full
(ORDER 256), records the keys' values; 10000 queries, nine in ten of them keys of the tree,
fresh per evaluation. Held out: 3 * 10^6 keys, 50000 queries. Error: record values are ids, not
measurements; GEVO's 1% relative on them would let a query answer a neighbouring record, so
the answers must match exactly.
"""
from __future__ import annotations

import functools

import numpy as np

import zymo as zm

from .rodinia_common import exact, seeded_holdout
from .workloads import Workload

ORDER = 256
FILL = 3 * ORDER // 4
NONE = np.iinfo(np.int32).max
KEYS, INDICES, RECORDS, CURR, OFFSET, QUERIES, ANS, HEIGHT = range(8)


@zm.kernel
def find_k(keys, indices, records, curr, offset, queries, ans, height):
    bid = zm.blockIdx.x
    t = zm.threadIdx.x
    q = queries[bid]
    for level in range(height):
        node = curr[bid]
        if keys[node, t] <= q and keys[node, t + 1] > q:
            if indices[node, t] < keys.shape[0]:
                offset[bid] = indices[node, t]
        zm.syncthreads()
        if t == 0:
            curr[bid] = offset[bid]
        zm.syncthreads()
    leaf = curr[bid]
    if keys[leaf, t] == q:
        ans[bid] = records[indices[leaf, t]]


def build(sorted_keys: np.ndarray):
    """(keys, indices, height) of a bulk-loaded tree over `sorted_keys` (record i is key i)."""
    levels = []
    firsts = sorted_keys
    idx = np.arange(sorted_keys.size)
    while True:
        count = -(-firsts.size // FILL)
        k = np.full((count, ORDER + 1), NONE, np.int64)
        c = np.full((count, ORDER + 1), -1, np.int64)
        slot = np.arange(firsts.size)
        k[slot // FILL, slot % FILL] = firsts
        c[slot // FILL, slot % FILL] = idx
        levels.append((k, c))
        if count == 1:
            break
        firsts = k[:, 0]
        idx = np.arange(count)
    levels.reverse()                       # root first; number the nodes level by level
    base = np.cumsum([0] + [k.shape[0] for k, _ in levels])
    keys = np.concatenate([k for k, _ in levels])
    indices = np.concatenate([np.where(c >= 0, c + (base[d + 1] if d + 1 < len(levels) else 0),
                                       -1) for d, (_, c) in enumerate(levels)])
    return keys.astype(np.int32), indices.astype(np.int32), len(levels) - 1


def inputs(rng, n: int = 1 << 20, queries: int = 10000) -> list:
    keys_sorted = np.unique(rng.integers(0, 4 * n, int(n * 1.2)))[:n]
    keys, indices, height = build(keys_sorted)
    records = rng.integers(0, 1 << 30, keys_sorted.size).astype(np.int32)
    hit = rng.random(queries) < 0.9
    q = np.where(hit, rng.choice(keys_sorted, queries), rng.integers(0, 4 * n, queries))
    return [keys, indices, records, np.zeros(queries, np.int32), np.zeros(queries, np.int32),
            q.astype(np.int32), np.full(queries, -1, np.int32), np.int32(height)]


def launch(args):
    return (args[QUERIES].shape[0],), (ORDER,)


def reference(args, sorted_keys) -> np.ndarray:
    """Each query's record value (-1: no such key), by binary search."""
    q = args[QUERIES]
    pos = np.clip(np.searchsorted(sorted_keys, q), 0, sorted_keys.size - 1)
    return np.where(sorted_keys[pos] == q, args[RECORDS][pos], -1).astype(np.int32)


WORKLOADS = {
    "rodinia_btree": Workload(
        find_k, launch, inputs, seeded_holdout(inputs, n=3_000_000, queries=50000),
        exact(ANS), 0.0, functools.partial(inputs, n=3000, queries=40),
        describe="Rodinia b+tree, findK: 10000 queries on a 2^20-key tree of order 256 (held "
                 "out: 3*10^6 keys, 50000 queries); error: exact"),
}
