"""Atomic read-modify-writes applied exactly, one after another in thread order.

Updates of distinct elements commute, so they run as one vectorised step. Where threads hit
the same element, the k-th update of every such element runs in round k; an element hit more
than `ROUNDS` times is scanned on its own with the combine function's `accumulate` (NumPy
ufuncs have one, and it is sequential), or one update at a time when there is none (CAS).
"""
from __future__ import annotations

import itertools

import numpy as np

ROUNDS = 32


def _combine(combine, dtype, old, operands):
    return np.asarray(combine(old, *operands)).astype(dtype, copy=False)


def apply(data: np.ndarray, index: tuple[np.ndarray, ...], address: np.ndarray,
          combine, operands: list[np.ndarray]) -> np.ndarray:
    """Update `data[index[k]] = combine(old, *operands[k])` for k in order; return the olds.

    `index` holds one vector per axis of `data`, `address` the matching flat element numbers.
    """
    count = len(address)
    dtype = data.dtype
    operands = [np.broadcast_to(np.asarray(o, dtype=dtype), (count,)) for o in operands]
    if count == 0:
        return np.zeros(0, dtype)
    order = np.argsort(address, kind="stable")
    ordered = address[order]
    starts = np.empty(count, bool)
    starts[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    if starts.all():  # every element updated once: the common, conflict-free case
        old = data[index]
        data[index] = _combine(combine, dtype, old, operands)
        return old
    first = np.flatnonzero(starts)
    lengths = np.diff(np.append(first, count))
    segment = np.cumsum(starts) - 1
    rank = np.arange(count) - first[segment]
    old_sorted = np.empty(count, dtype)
    heavy = lengths > ROUNDS
    light = np.flatnonzero(~heavy[segment])
    _rounds(data, index, combine, operands, order, light, rank, old_sorted)
    for start, length in zip(first[heavy], lengths[heavy]):
        positions = order[start:start + length]
        old_sorted[start:start + length] = _scan(data, index, combine, operands, positions)
    olds = np.empty(count, dtype)
    olds[order] = old_sorted
    return olds


def _rounds(data, index, combine, operands, order, light, rank, old_sorted) -> None:
    """Round k updates, for each lightly contended element, its k-th updater."""
    if len(light) == 0:
        return
    by_rank = light[np.argsort(rank[light], kind="stable")]
    bounds = np.append(0, np.cumsum(np.bincount(rank[light])))
    for begin, end in itertools.pairwise(bounds):
        sorted_positions = by_rank[begin:end]
        positions = order[sorted_positions]
        where = tuple(axis[positions] for axis in index)
        old = data[where]
        data[where] = _combine(combine, data.dtype, old, [o[positions] for o in operands])
        old_sorted[sorted_positions] = old


def _scan(data, index, combine, operands, positions) -> np.ndarray:
    """All updates of one heavily contended element, in order; returns their old values."""
    where = tuple(axis[positions[0]] for axis in index)
    dtype = data.dtype
    accumulate = getattr(combine, "accumulate", None)
    if accumulate is not None and len(operands) == 1:
        sequence = np.concatenate([np.asarray([data[where]], dtype), operands[0][positions]])
        values = np.asarray(accumulate(sequence, dtype=dtype))
        data[where] = values[-1]
        return values[:-1]
    olds = np.empty(len(positions), dtype)
    for k, position in enumerate(positions):
        olds[k] = data[where]
        data[where] = _combine(combine, dtype, olds[k], [o[position] for o in operands])
    return olds
