"""The NVPTX backend's type matrix on a GPU: atomics (native, CAS loops, 8/16-bit ones LLVM
widens) and warp shuffles (64-bit values in two halves, narrow ones widened) of every scalar
type, compared with the interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from backend import nvptx_kernels as K

pytestmark = pytest.mark.gpu
THREADS = 64


def _launch(kernel, backend: str, *args):
    """Run `kernel[1, THREADS]` on `backend`; the array arguments after the launch."""
    moved = [zm.to_device(a) if backend == "cuda" and isinstance(a, np.ndarray) else a
             for a in args]
    kernel.on(backend)[1, THREADS](*moved)
    return [m.copy_to_host() if backend == "cuda" else m for m, a in zip(moved, args)
            if isinstance(a, np.ndarray)]


def _same(kernel, make_args, arrays: int | None = None):
    """The first `arrays` array arguments (default: all) agree after CUDA and the interpreter."""
    gpu = _launch(kernel, "cuda", *make_args())
    cpu = _launch(kernel, "interp", *make_args())
    for got, want in list(zip(gpu, cpu))[:arrays]:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", K.ATOMIC_TYPES + K.NARROW_TYPES, ids=str)
def test_atomics(dtype):
    np_type = dtype.dtype.type
    start = np.array([1, 50, 2, 5, 0, 0, 0, 0], dtype.dtype)
    values = (np.arange(THREADS) % 7).astype(dtype.dtype)
    _same(K.atomics_per_thread, lambda: [start.copy(), values.copy()])
    _same(K.shared_atomics(dtype), lambda: [start.copy(), np_type(3)])
    _same(K.global_atomics, lambda: [start.copy(), np_type(3), np.zeros(5 * THREADS, dtype.dtype)],
          arrays=1)    # only `a`: the old values depend on the order of the threads


@pytest.mark.parametrize("dtype", K.SHUFFLE_TYPES, ids=str)
def test_shuffles(dtype):
    x = (np.arange(THREADS) * 7 % 5).astype(dtype.dtype)
    _same(K.shuffles, lambda: [x.copy(), np.zeros((4, THREADS), dtype.dtype)])
