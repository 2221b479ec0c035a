"""Thread geometry of a batch: consecutive blocks whose threads run together as one vector.

A batch holds `nblocks` whole blocks; its threads are laid out block-major and, within a block,
by linear thread id (x fastest), so a warp (32 consecutive linear ids) is a contiguous slice.
Every per-thread value of the interpreter is a NumPy vector in this order. The vectors here
are computed on first use (most kernels need only a few) from per-block patterns, which is
much cheaper than dividing a vector of every thread id.
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

AXES = ("x", "y", "z")
WARP = 32


def _coords(linear, extent: tuple[int, int, int]) -> dict[str, np.ndarray]:
    """x, y, z of linear ids over a box of `extent` (x fastest), as i32."""
    x, y, _ = extent
    return {"x": (linear % x).astype(np.int32),
            "y": (linear // x % y).astype(np.int32),
            "z": (linear // (x * y)).astype(np.int32)}


class Batch:
    """The geometry of blocks `first_block .. first_block + nblocks - 1` of a launch."""

    def __init__(self, grid: tuple[int, int, int], block: tuple[int, int, int],
                 first_block: int, nblocks: int):
        self.grid = grid
        self.block = block
        self.block_size = block[0] * block[1] * block[2]
        self.nblocks = nblocks
        self.first_block = first_block
        self.n = nblocks * self.block_size
        self.ntid = {axis: np.int32(extent) for axis, extent in zip(AXES, block)}
        self.nctaid = {axis: np.int32(extent) for axis, extent in zip(AXES, grid)}

    def _per_thread(self, pattern: np.ndarray) -> np.ndarray:
        """A per-block pattern (one entry per linear thread id) repeated for every block."""
        return np.tile(pattern, self.nblocks)

    def _per_block(self, values: np.ndarray) -> np.ndarray:
        """One value per block of the batch, given to each of its threads."""
        return np.repeat(values, self.block_size)

    @cached_property
    def _linear(self) -> np.ndarray:
        return np.arange(self.block_size, dtype=np.int64)

    @cached_property
    def tid(self) -> dict[str, np.ndarray]:
        return {k: self._per_thread(v) for k, v in _coords(self._linear, self.block).items()}

    @cached_property
    def ctaid(self) -> dict[str, np.ndarray]:
        blocks = np.arange(self.first_block, self.first_block + self.nblocks, dtype=np.int64)
        return {k: self._per_block(v) for k, v in _coords(blocks, self.grid).items()}

    @cached_property
    def laneid(self) -> np.ndarray:
        return self._per_thread((self._linear % WARP).astype(np.int32))

    @cached_property
    def block_in_batch(self) -> np.ndarray:
        return self._per_block(np.arange(self.nblocks, dtype=np.int64))

    @cached_property
    def thread_in_batch(self) -> np.ndarray:
        return np.arange(self.n, dtype=np.int64)

    @cached_property
    def global_id(self) -> np.ndarray:
        """A launch-wide thread id: orders threads for atomics, names them in reports."""
        return self.thread_in_batch + self.first_block * self.block_size

    @cached_property
    def block_first_id(self) -> np.ndarray:
        """The global id of thread 0 of each thread's block."""
        firsts = (self.first_block + np.arange(self.nblocks, dtype=np.int64)) * self.block_size
        return self._per_block(firsts)

    @cached_property
    def warp_start(self) -> np.ndarray:
        """The batch position of lane 0 of each thread's warp."""
        return self.thread_in_batch - self.laneid

    @cached_property
    def warp_size(self) -> np.ndarray:
        """How many lanes each thread's warp has (the last warp of a block may be partial)."""
        lane = self._linear % WARP
        return self._per_thread(np.minimum(WARP, self.block_size - (self._linear - lane)))

    @cached_property
    def warp_first(self) -> np.ndarray:
        """The batch position of each warp's lane 0, warp by warp."""
        return np.flatnonzero(self.laneid == 0)

    @cached_property
    def warp_of(self) -> np.ndarray:
        """The number of each thread's warp within the batch."""
        return np.cumsum(self.laneid == 0) - 1

    def describe(self, global_id: int) -> str:
        """`block (bx, by, bz), thread (tx, ty, tz)` of a launch-wide thread id."""
        return describe_thread(self.grid, self.block, global_id)


def describe_thread(grid, block, global_id: int) -> str:
    size = block[0] * block[1] * block[2]
    block_linear, linear = divmod(int(global_id), size)
    b = {k: int(v) for k, v in _coords(np.int64(block_linear), grid).items()}
    t = {k: int(v) for k, v in _coords(np.int64(linear), block).items()}
    return (f"block ({b['x']}, {b['y']}, {b['z']}), "
            f"thread ({t['x']}, {t['y']}, {t['z']})")
