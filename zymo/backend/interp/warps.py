"""Warp-level exchange for the interpreter: shuffles and votes within each warp of a batch.

Warps are contiguous slices of the batch (see `threads.Batch`), so a thread's lane `k` sits at
`warp_start + k`; the last warp of a block is partial when the block size is not a multiple
of 32, and its missing lanes do not exist.
"""
from __future__ import annotations

import numpy as np

from .threads import Batch


def shuffle(batch: Batch, value, source_lane) -> np.ndarray:
    """Each thread's copy of `value` from lane `source_lane` of its warp; a thread whose source
    lane lies outside its warp keeps its own value (as PTX does for shfl.down/up)."""
    value = np.asarray(value)
    if value.ndim == 0:
        return value  # the same in every lane
    source = np.asarray(source_lane).astype(np.int64)
    inside = (source >= 0) & (source < batch.warp_size)
    position = np.where(inside, batch.warp_start + source, batch.thread_in_batch)
    return value[position]


def ballot(batch: Batch, active: np.ndarray, predicate) -> np.ndarray:
    """Per thread, the u32 bit mask of the lanes of its warp that are active and whose
    predicate holds (bit k = lane k)."""
    voting = np.asarray(active & np.asarray(predicate, bool))
    voting = np.broadcast_to(voting, (batch.n,))
    bits = np.where(voting, np.left_shift(np.uint32(1), batch.laneid.astype(np.uint32)),
                    np.uint32(0)).astype(np.uint32)
    per_warp = np.bitwise_or.reduceat(bits, batch.warp_first)
    return per_warp[batch.warp_of]
