"""Where arrays lie in the race detector's shadow memory: the detector sees memory by address.

Arrays whose bytes overlap (two views of one buffer, the same array passed twice, a float and
an int view of the same bytes) form one region with one `Shadow`, so each sees the others'
accesses. The shadow has a slot per `grain` bytes of the region, the grain being the largest
unit that every array of the region is aligned to (the gcd of item sizes, strides and
offsets): an element then covers whole slots, one in the common case, several where a wide
dtype views narrow bytes, and two accesses conflict exactly when their bytes overlap.

A region whose arrays cover little of its extent (a column of a large matrix) keeps slots only
for the bytes they can reach, found by binary search, rather than one per grain of the extent.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .races import Shadow

# a dense shadow may have this many slots per slot that some array reaches (plus SLACK)
DENSE_FACTOR, SLACK = 4, 4096


def byte_bounds(array: np.ndarray) -> tuple[int, int]:
    if hasattr(np, "byte_bounds"):
        return np.byte_bounds(array)
    return np.lib.array_utils.byte_bounds(array)


class Placement:
    """How one array's element indices map to slots of its region's shadow."""

    def __init__(self, shadow: Shadow, origin: int, strides: tuple[int, ...], span: int,
                 keys: np.ndarray | None, sharers: tuple[str, ...], c_order: bool):
        self.shadow = shadow
        self.origin = origin      # the slot of element 0
        self.strides = strides    # slots per index step, per axis
        self.span = span          # slots one element covers
        self.keys = keys          # a sparse region's reachable slots, sorted; None when dense
        self.sharers = sharers    # the other arrays of the region, by name
        # slot = the flat C-order element number: the caller's address is already the slot
        self.identity = c_order and origin == 0 and span == 1 and keys is None

    def slots(self, parts: Sequence[np.ndarray]) -> np.ndarray:
        """The first slot of each accessed element (`parts`: an index vector per axis)."""
        slot = np.full(len(parts[0]) if parts else 0, self.origin, np.int64)
        for part, stride in zip(parts, self.strides):
            slot += part * stride
        if self.keys is not None:
            slot = np.searchsorted(self.keys, slot)
        return slot

    def covered(self, first: np.ndarray) -> np.ndarray:
        """Every slot the elements starting at `first` cover, element by element (a sparse
        region keeps every slot an element covers, so those are consecutive there too)."""
        return (first[:, None] + np.arange(self.span)).ravel()


def place(arrays: Sequence[np.ndarray], names: Sequence[str], block_size: int,
          grain: int = 0) -> list[Placement | None]:
    """A placement per array, arrays that share bytes sharing one shadow (None: empty).
    `grain`: a unit the slots must divide (the item sizes of the views the kernel takes of
    these arrays, so that a view's elements cover whole slots too); 0: none."""
    placements: list[Placement | None] = [None] * len(arrays)
    for group in _overlapping_groups(arrays):
        members = [arrays[k] for k in group]
        for k, placement in zip(group, _place_region(members, [names[k] for k in group],
                                                     block_size, grain)):
            placements[k] = placement
    return placements


def place_view(base: Placement, base_data: np.ndarray, view: np.ndarray, base_name: str,
               name: str) -> Placement | None:
    """The placement of `view`, a NumPy view of `base_data` (placed at `base`), in the same
    shadow; None when its bytes do not fall on whole slots (the launch's grain was coarser)."""
    grain = base_data.itemsize // base.span
    offset = view.__array_interface__["data"][0] - base_data.__array_interface__["data"][0]
    if any(x % grain for x in (offset, view.itemsize, *view.strides)):
        return None
    sharers = tuple(dict.fromkeys(n for n in (*base.sharers, base_name) if n != name))
    return Placement(base.shadow, base.origin + offset // grain,
                     tuple(s // grain for s in view.strides), view.itemsize // grain,
                     base.keys, sharers, _c_order(view, grain))


def _overlapping_groups(arrays: Sequence[np.ndarray]) -> list[list[int]]:
    """Indices of the non-empty arrays, grouped so that arrays whose byte ranges overlap,
    directly or through others, are in one group."""
    spans = sorted((*byte_bounds(a), k) for k, a in enumerate(arrays) if a.size)
    groups: list[list[int]] = []
    end = None
    for low, high, k in spans:
        if end is None or low >= end:
            groups.append([])
            end = high
        groups[-1].append(k)
        end = max(end, high)
    return groups


def _place_region(members: list[np.ndarray], names: list[str], block_size: int,
                  grain: int = 0) -> list[Placement]:
    low = min(byte_bounds(a)[0] for a in members)
    high = max(byte_bounds(a)[1] for a in members)
    starts = [a.__array_interface__["data"][0] - low for a in members]
    for a, start in zip(members, starts):
        grain = math.gcd(grain, a.itemsize, start, *a.strides)
    reached = sum(a.size * (a.itemsize // grain) for a in members)
    extent = (high - low) // grain
    keys = None
    if extent > DENSE_FACTOR * reached + SLACK:
        keys = _reachable(members, starts, grain)
        extent = len(keys)
    shadow = Shadow(extent, block_size)
    distinct = tuple(dict.fromkeys(names))
    return [Placement(shadow, start // grain, tuple(s // grain for s in a.strides),
                      a.itemsize // grain, keys, tuple(n for n in distinct if n != name),
                      _c_order(a, grain))
            for a, start, name in zip(members, starts, names)]


def _c_order(array: np.ndarray, grain: int) -> bool:
    """Whether the array's slots are its flat C-order element numbers (given origin 0)."""
    if array.itemsize != grain:
        return False
    step = 1
    for extent, stride in zip(reversed(array.shape), reversed(array.strides)):
        if extent != 1 and stride != step * grain:
            return False
        step *= extent
    return True


def _reachable(members: list[np.ndarray], starts: list[int], grain: int) -> np.ndarray:
    """The sorted slots that some element of some member covers."""
    found = []
    for a, start in zip(members, starts):
        slot = np.full(a.shape, start // grain, np.int64)
        for axis, (extent, stride) in enumerate(zip(a.shape, a.strides)):
            step = np.arange(extent, dtype=np.int64) * (stride // grain)
            slot += step.reshape([-1 if k == axis else 1 for k in range(a.ndim)])
        found.append((slot.reshape(-1, 1) + np.arange(a.itemsize // grain)).ravel())
    return np.unique(np.concatenate(found))
