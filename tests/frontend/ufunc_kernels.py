"""Kernels that call NumPy ufuncs on arrays (numba's `np.sin(x, out)`); module-level."""
from __future__ import annotations

import numpy as np

import zymo as zm


@zm.kernel
def sine(r, x):
    np.sin(x, r)


@zm.kernel
def add_rows(out, a, b):
    np.add(a, b, out=out)
    np.multiply(out, 2.0, out)


@zm.kernel
def row_exp(out, x):
    i = zm.grid(1)
    if i < x.shape[0]:
        np.exp(x[i, :], out[i, :])
        out[i, 0] = np.multiply(out[i, 0], np.float64(3.0))


@zm.kernel
def no_output(x):
    np.sin(x)


@zm.kernel
def mismatch(out, x):
    np.cos(x, out)


@zm.kernel
def builtin_pow(r, x, y):
    i = zm.grid(1)
    if i < r.size:
        r[i] = pow(x[i], y[i]) + pow(2, 3)


@zm.kernel
def nan_extrema(out, a, b):
    i = zm.grid(1)
    if i < a.size:
        out[i, 0] = np.maximum(a[i], b[i])
        out[i, 1] = np.minimum(a[i], b[i])
        out[i, 2] = np.fmax(a[i], b[i])
        out[i, 3] = np.fmin(a[i], b[i])
        out[i, 4] = np.logical_and(a[i] > 0, b[i] > 0)
        out[i, 5] = np.logical_or(a[i] > 0, b[i] > 0)
        out[i, 6] = np.logical_xor(a[i] > 0, b[i] > 0)
