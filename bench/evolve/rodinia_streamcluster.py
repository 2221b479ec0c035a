"""Rodinia's streamcluster as an evolution workload: `kernel_compute_cost`, the one kernel
GEVO timed, the gain of opening a candidate center in the local search (pgain).

Points have `dim` coordinates (stored dimension-major, coord[d, i], as Rodinia stores them
for coalescing), a weight, the center they are assigned to and its cost (weight times squared
distance). For a candidate point x, one thread per point i (blocks of 512) computes the cost
of serving i from x; if that is lower, i would switch (switch[i] = 1) and the saving goes to
its row's last slot, work[i, K]; otherwise the loss of closing i's center goes to the slot of
that center, work[i, center_table[assign[i]]]. The host sums the rows.

Rodinia's generator (the `none` input, GEVO's): points uniform in [0, 1)^dim, weight 1; the
state here is an assignment to K = 15 centers drawn among the points (GEVO ran with 10..20
centers) and a random candidate, fresh per evaluation. GEVO's tests: dim 16 and 256, 256 and
4467 points; fitness here: dim 256, 4467 points; held out: dim 100, 30011 points. Error:
GEVO's per-element relative 1% on the switch flags and the work rows.
"""
from __future__ import annotations

import functools

import numpy as np

import zymo as zm

from .rodinia_common import GEVO_RELATIVE, cdiv, relative_error, seeded_holdout
from .workloads import Workload

THREADS = 512
K = 15
COORD, WEIGHT, COST, ASSIGN, TABLE, SWITCH, WORK, X = range(8)


@zm.kernel
def compute_cost(coord, weight, cost, assign, center_table, switch, work, x):
    tid = zm.blockIdx.x * THREADS + zm.threadIdx.x
    if tid < weight.shape[0]:
        dist = zm.f32(0.0)
        for d in range(coord.shape[0]):
            diff = coord[d, tid] - coord[d, x]
            dist += diff * diff
        x_cost = dist * weight[tid]
        current = cost[tid]
        if x_cost < current:
            switch[tid] = 1
            work[tid, work.shape[1] - 1] += x_cost - current
        else:
            work[tid, center_table[assign[tid]]] += current - x_cost


def inputs(rng, dim: int = 256, n: int = 4467) -> list:
    coord = rng.random((dim, n)).astype(np.float32)
    weight = np.ones(n, np.float32)
    centers = rng.choice(n, K, replace=False)
    dist = ((coord[:, :, None] - coord[:, None, centers]) ** 2).sum(axis=0, dtype=np.float32)
    nearest = dist.argmin(axis=1)
    assign = centers[nearest].astype(np.int32)
    cost = (dist[np.arange(n), nearest] * weight).astype(np.float32)
    table = np.zeros(n, np.int32)
    table[centers] = np.arange(K, dtype=np.int32)
    x = np.int32(rng.integers(0, n))
    return [coord, weight, cost, assign, table, np.zeros(n, np.uint8),
            np.zeros((n, K + 1), np.float32), x]


def launch(args):
    return (cdiv(args[WEIGHT].shape[0], THREADS),), (THREADS,)


def reference(args):
    """(switch, work) in float64."""
    coord, weight, cost, assign, table, switch, work, x = args
    c = coord.astype(np.float64)
    x_cost = ((c - c[:, [int(x)]]) ** 2).sum(axis=0) * weight
    gain = x_cost < cost
    out = np.zeros(work.shape)
    rows = np.arange(weight.size)
    out[rows[gain], K] = (x_cost - cost)[gain]
    out[rows[~gain], table[assign[~gain]]] = (cost - x_cost)[~gain]
    return gain.astype(np.uint8), out


WORKLOADS = {
    "rodinia_streamcluster": Workload(
        compute_cost, launch, inputs, seeded_holdout(inputs, dim=100, n=30011),
        relative_error(SWITCH, WORK), GEVO_RELATIVE, functools.partial(inputs, dim=5, n=600),
        describe="Rodinia streamcluster, kernel_compute_cost, 4467 points of dim 256 (held out: "
                 "30011 of dim 100); error: per-element relative 1%"),
}
