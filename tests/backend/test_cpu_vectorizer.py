"""Thread loops whose reads index a shared tile with a masked expression of the thread id
(`(i + n) % T` in a loop over n): LLVM 22's loop vectorizer read these as consecutive
addresses (tile[j, i + n], past the row's end), so the CPU backend gave wrong answers for a
race-free kernel. Checked against NumPy and the interpreter, for several tile widths and
block shapes, including the ones where a vector of lanes wraps inside a row."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm


def _rotating(width: int):
    @zm.kernel
    def rotating(a, out):
        i, j = zm.threadIdx.x, zm.threadIdx.y
        tile = zm.shared.array((width, width), zm.f64)
        tile[j, i] = a[j, i]
        zm.syncthreads()
        total = 0.0
        for n in range(width):
            total += tile[j, (i + n) % width] * (n + 1) + math.cos(tile[j, (i + 2 * n + 1) % width])
        out[j, i] = total
    return rotating


def _expected(a: np.ndarray) -> np.ndarray:
    width = a.shape[0]
    i = np.arange(width)[None, :]
    out = np.zeros_like(a)
    for n in range(width):
        out += np.take_along_axis(a, np.broadcast_to((i + n) % width, a.shape), 1) * (n + 1)
        out += np.cos(np.take_along_axis(a, np.broadcast_to((i + 2 * n + 1) % width, a.shape), 1))
    return out


@pytest.mark.parametrize("width", [2, 4, 8, 16])
@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_masked_tile_columns(width, backend):
    a = np.random.default_rng(width).standard_normal((width, width))
    out = np.zeros_like(a)
    _rotating(width).on(backend)[1, (width, width)](a, out)
    np.testing.assert_allclose(out, _expected(a), rtol=1e-12, atol=1e-12)


def test_the_transposed_tile_reads_kernel_matches_the_interpreter():
    """The kernel that showed it (tests/ad/test_transposed.py): the CPU's primal must be the
    interpreter's, or every CPU check of its derivative compares against wrong values."""
    from ad.test_transposed import T, rows_and_columns
    a = np.random.default_rng(1).standard_normal((3, 2, T, T))
    outs = []
    for backend in ("interp", "cpu"):
        out = np.zeros((3, T, T))
        rows_and_columns.on(backend)[3, (T, T)](a, out)
        outs.append(out)
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-13, atol=1e-13)
