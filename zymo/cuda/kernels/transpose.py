"""numba's `transpose(a, b=None)`: `b[j, i] = a[i, j]` for two-dimensional device arrays,
through tiles of shared memory so that both the reads and the writes are coalesced."""
from __future__ import annotations

import functools

import numpy as np

from ... import cuda

TILE = 32          # a warp's width: one row of a tile is one coalesced access
ROWS = 8           # rows of a tile each block's threads cover per step


@functools.lru_cache(maxsize=None)
def _tiled(dtype: np.dtype):
    element = cuda.from_dtype(dtype)

    @cuda.jit
    def kernel(src, dst):
        # TILE + 1 columns: the column reads of the tile fall in different banks
        tile = cuda.shared.array((TILE, TILE + 1), element)
        x = cuda.blockIdx.x * TILE + cuda.threadIdx.x
        y0 = cuda.blockIdx.y * TILE
        for r in range(cuda.threadIdx.y, TILE, ROWS):
            if y0 + r < src.shape[0] and x < src.shape[1]:
                tile[r, cuda.threadIdx.x] = src[y0 + r, x]
        cuda.syncthreads()
        tx = cuda.blockIdx.y * TILE + cuda.threadIdx.x
        ty0 = cuda.blockIdx.x * TILE
        for r in range(cuda.threadIdx.y, TILE, ROWS):
            if ty0 + r < dst.shape[0] and tx < dst.shape[1]:
                dst[ty0 + r, tx] = tile[cuda.threadIdx.x, r]

    return kernel


@cuda.jit
def _elementwise(src, dst):
    # records: element by element (a record is copied field by field)
    x, y = cuda.grid(2)
    if y < src.shape[0] and x < src.shape[1]:
        dst[x, y] = src[y, x]


def transpose(a, b=None):
    """`b` (allocated when not given) holding the transpose of two-dimensional `a`."""
    if a.ndim != 2:
        raise ValueError(f"transpose takes a two-dimensional array, not {a.ndim}-dimensional")
    if b is None:
        b = cuda.device_array((a.shape[1], a.shape[0]), dtype=a.dtype)
    if tuple(b.shape) != (a.shape[1], a.shape[0]) or b.dtype != a.dtype:
        raise ValueError(f"transpose of a {a.shape} {a.dtype} array into a {b.shape} "
                         f"{b.dtype} one: b must be {a.shape[::-1]} {a.dtype}")
    blocks = ((a.shape[1] + TILE - 1) // TILE, (a.shape[0] + TILE - 1) // TILE)
    if a.dtype.names is None:
        _tiled(np.dtype(a.dtype))[blocks, (TILE, ROWS)](a, b)
    else:
        _elementwise[blocks, (TILE, TILE)](a, b)
    return b
