"""Kernels written for numba.cuda, passed to zm.kernel unchanged (plain functions, `cuda.*` names).

numba is not a dependency, so `cuda` is a stand-in object: zymo resolves `cuda.<name>` by name,
never by looking inside it. Dtypes are NumPy's, which numba accepts too.
"""
from __future__ import annotations

import types

import numpy as np

import zymo as zm

from .case import Case, cdiv, f32, ints, wide

cuda = types.SimpleNamespace()  # stands for `from numba import cuda`

TPB = 128
NBINS = 16


def _saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = a * x[i] + y[i]


def _reverse_blocks(x, out):
    sh = cuda.shared.array(shape=TPB, dtype=np.float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * cuda.blockDim.x
    sh[t] = x[base + t]
    cuda.syncthreads()
    out[base + t] = sh[cuda.blockDim.x - 1 - t]


def _histogram(data, bins):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, data.shape[0], stride):
        cuda.atomic.add(bins, data[i] % NBINS, 1)


numba_saxpy = zm.kernel(_saxpy)
numba_reverse_blocks = zm.kernel(_reverse_blocks)
numba_histogram = zm.kernel(_histogram)


def _saxpy_args(rng):
    n = 1000
    return [0.5, f32(rng, n), f32(rng, n), np.zeros(n, np.float32)]


def _saxpy_ref(args):
    a, x, y, _ = args
    return {3: a * wide(x) + wide(y)}


def _reverse_args(rng):
    return [f32(rng, 4 * TPB), np.zeros(4 * TPB, np.float32)]


def _reverse_ref(args):
    return {1: args[0].reshape(-1, TPB)[:, ::-1].ravel()}


def _hist_args(rng):
    return [ints(rng, np.int64, 5000, low=-1000, high=1000), np.zeros(NBINS, np.int32)]


def _hist_ref(args):
    return {1: np.bincount(args[0] % NBINS, minlength=NBINS).astype(np.int32)}


CASES = [
    Case("numba_saxpy", numba_saxpy, cdiv(1000, TPB), TPB, _saxpy_args, _saxpy_ref,
         features=("numba", "scalar_arg"), differentiable=True),
    Case("numba_reverse_blocks", numba_reverse_blocks, 4, TPB, _reverse_args, _reverse_ref,
         features=("numba", "shared", "barrier", "keyword_args")),
    Case("numba_histogram", numba_histogram, 6, TPB, _hist_args, _hist_ref,
         features=("numba", "atomic", "gridsize", "mod", "negative")),
]
