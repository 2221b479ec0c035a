"""Rodinia's backprop as an evolution workload: `bpnn_layerforward`, the forward pass of the
input layer into the hidden one.

The network has n input units (plus the bias unit 0) and 16 hidden units (plus 1); the weights
are (n + 1) x 17, row i the weights of input unit i. One 16 x 16 thread block takes 16 input
units: thread (ty, tx) multiplies input unit 16 by + ty + 1 by its weight to hidden unit
tx + 1, the block sums its 16 products per hidden unit with a tree over ty in shared memory
(log2 16 rounds, a barrier each), writes the products and partial sums back over the weights,
as Rodinia does (nothing reads them after), and its thread tx = 0 of each row ty stores the
sum for hidden unit ty + 1 in `partial[by, ty]`; the host adds the blocks' sums.

Rodinia's inputs (`backprop 65536`, its run script): input units and weights uniform in
[0, 1). GEVO's Rodinia folder has no backprop profile, so the size is Rodinia's default:
65536 input units; held out: 2^20 + 2^14. Error: GEVO's default, per-element relative 1% on
the partial sums (the rewritten weights are not an output).
"""
from __future__ import annotations

import functools

import numpy as np

import zymo as zm

from .rodinia_common import GEVO_RELATIVE, relative_error, seeded_holdout
from .workloads import Workload

HID = 16
B = 16
INPUT, WEIGHTS, PARTIAL = range(3)


@zm.kernel
def layerforward(units, weights, partial):
    node = zm.shared.array(B, zm.f32)
    wm = zm.shared.array((B, B), zm.f32)
    by = zm.blockIdx.y
    tx = zm.threadIdx.x
    ty = zm.threadIdx.y
    row = B * by + ty + 1
    if tx == 0:
        node[ty] = units[row]
    zm.syncthreads()
    wm[ty, tx] = weights[row, tx + 1]
    zm.syncthreads()
    wm[ty, tx] = wm[ty, tx] * node[ty]
    zm.syncthreads()
    for i in range(1, 5):
        p = 1 << i
        if ty % p == 0:
            wm[ty, tx] = wm[ty, tx] + wm[ty + p // 2, tx]
        zm.syncthreads()
    weights[row, tx + 1] = wm[ty, tx]
    zm.syncthreads()
    if tx == 0:
        partial[by, ty] = wm[tx, ty]


def inputs(rng, n: int = 65536) -> list:
    units = rng.random(n + 1).astype(np.float32)
    weights = rng.random((n + 1, HID + 1)).astype(np.float32)
    return [units, weights, np.zeros((n // B, HID), np.float32)]


def launch(args):
    return (1, args[PARTIAL].shape[0]), (B, B)


def reference(args) -> np.ndarray:
    units = args[INPUT].astype(np.float64)[1:]
    w = args[WEIGHTS].astype(np.float64)[1:, 1:]
    return (units[:, None] * w).reshape(-1, B, HID).sum(axis=1)


WORKLOADS = {
    "rodinia_backprop": Workload(
        layerforward, launch, inputs, seeded_holdout(inputs, n=(1 << 20) + (1 << 14)),
        relative_error(PARTIAL), GEVO_RELATIVE, functools.partial(inputs, n=64),
        describe="Rodinia backprop, bpnn_layerforward, 65536 inputs x 16 hidden (held out: "
                 "2^20 + 2^14 inputs); error: per-element relative 1% on the partial sums"),
}
