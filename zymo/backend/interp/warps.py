"""Warp-level exchange for the interpreter: shuffles and votes within each warp of a batch.

Warps are contiguous slices of the batch (see `threads.Batch`), so a thread's lane `k` sits at
`warp_start + k`; the last warp of a block is partial when the block size is not a multiple
of 32, and its missing lanes do not exist.
"""
from __future__ import annotations

import numpy as np

from .threads import WARP, Batch


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


def undefined_call(batch: Batch, active: np.ndarray, live: np.ndarray, mask,
                   source_lane=None) -> tuple[int, str] | None:
    """The first calling thread (batch position) whose `*_sync(mask, ...)` CUDA leaves
    undefined, and why; None when every call is defined. `active`: the threads making the call;
    `live`: those that have not exited (a lane that exited may be named in a mask);
    `source_lane`: for a shuffle, the lane each thread reads."""
    mask = np.broadcast_to(np.asarray(mask).astype(np.uint32), (batch.n,))
    lane = batch.laneid.astype(np.uint32)
    own = np.left_shift(np.uint32(1), lane)
    calling = _per_warp_bits(batch, active, own)
    waiting = mask & _per_warp_bits(batch, live & ~active, own)
    lanes = np.arange(WARP, dtype=np.int64)
    member_at = batch.warp_start[:, None] + lanes
    exists = lanes < batch.warp_size[:, None]
    member_at = np.where(exists, member_at, batch.thread_in_batch[:, None])
    named = ((mask[:, None] >> lanes.astype(np.uint32)) & 1).astype(bool)
    differs = named & exists & active[member_at] & (mask[member_at] != mask[:, None])
    reads = np.zeros(batch.n, bool)
    if source_lane is not None:
        source = np.broadcast_to(np.asarray(source_lane).astype(np.int64), (batch.n,))
        inside = (source >= 0) & (source < batch.warp_size)
        bit = np.left_shift(np.uint32(1), np.clip(source, 0, WARP - 1).astype(np.uint32))
        reads = inside & ((mask & calling & bit) == 0)
    for bad, why in (
            ((mask & own) == 0, lambda t: f"its own lane {lane[t]} is not in the mask "
                                          f"{mask[t]:#010x}"),
            (waiting != 0, lambda t: f"the mask {mask[t]:#010x} names lane "
                                     f"{_lowest(waiting[t])}, which has not exited but does "
                                     "not make this call (it took another branch)"),
            (differs.any(axis=1), lambda t: f"lane {int(np.argmax(differs[t]))} makes the call "
                                            "with another mask, "
                                            f"{mask[member_at[t, np.argmax(differs[t])]]:#010x} "
                                            f"instead of {mask[t]:#010x}"),
            (reads, lambda t: f"it reads lane {int(source[t])}, which is not in the mask "
                              f"{mask[t]:#010x} or does not make the call")):
        hit = np.flatnonzero(active & bad)
        if hit.size:
            return int(hit[0]), why(int(hit[0]))
    return None


def _per_warp_bits(batch: Batch, which: np.ndarray, own: np.ndarray) -> np.ndarray:
    bits = np.where(np.broadcast_to(which, (batch.n,)), own, np.uint32(0)).astype(np.uint32)
    return np.bitwise_or.reduceat(bits, batch.warp_first)[batch.warp_of]


def _lowest(bits) -> int:
    bits = int(bits)
    return (bits & -bits).bit_length() - 1


def ballot(batch: Batch, active: np.ndarray, predicate) -> np.ndarray:
    """Per thread, the u32 bit mask of the lanes of its warp that are active and whose
    predicate holds (bit k = lane k)."""
    voting = np.asarray(active & np.asarray(predicate, bool))
    voting = np.broadcast_to(voting, (batch.n,))
    bits = np.where(voting, np.left_shift(np.uint32(1), batch.laneid.astype(np.uint32)),
                    np.uint32(0)).astype(np.uint32)
    per_warp = np.bitwise_or.reduceat(bits, batch.warp_first)
    return per_warp[batch.warp_of]


def equal_lanes(batch: Batch, active: np.ndarray, value) -> np.ndarray:
    """Per thread, the u32 bit mask of the active lanes of its warp whose `value` has the same
    bits as the thread's own (floats compare as bits, as `match.sync` does)."""
    value = np.asarray(value)
    bits = np.broadcast_to(value.view(np.dtype(f"u{value.dtype.itemsize}")), (batch.n,))
    lanes = np.arange(WARP, dtype=np.int64)
    exists = lanes < batch.warp_size[:, None]
    member_at = np.where(exists, batch.warp_start[:, None] + lanes, batch.thread_in_batch[:, None])
    equal = exists & np.broadcast_to(active, (batch.n,))[member_at] & \
        (bits[member_at] == bits[:, None])
    weights = np.left_shift(np.uint32(1), lanes.astype(np.uint32))
    return np.bitwise_or.reduce(np.where(equal, weights, np.uint32(0)), axis=1).astype(np.uint32)
