"""Byte ranges of launch arguments (zymo/runtime/aliasing.py), for NumPy and GPU arrays alike:
a view with negative strides reaches below its pointer."""
from __future__ import annotations

import numpy as np

from zymo.runtime import aliasing


class ForeignView:
    """A GPU array as another library describes it (no memory behind it: only addresses)."""

    def __init__(self, data: int, shape: tuple, strides: tuple, dtype=np.float32):
        self.__cuda_array_interface__ = {"shape": shape, "strides": strides,
                                         "typestr": np.dtype(dtype).str, "data": (data, False),
                                         "version": 3}


def test_a_reversed_view_reaches_below_its_pointer():
    # 10 floats from 0x1000 read backwards: the pointer is the last one, at 0x1024
    reversed_view = ForeignView(0x1024, (10,), (-4,))
    below = ForeignView(0x1000, (4,), (4,))          # the first 4 of those floats
    assert aliasing.layout(reversed_view).span == (0x1000, 0x1028)
    assert aliasing.overlapping([reversed_view, below])
    assert not aliasing.overlapping([reversed_view, ForeignView(0x1028, (4,), (4,))])


def test_numpy_ranges_and_folded_views():
    base = np.zeros(16, np.float32)
    assert aliasing.overlapping([base[::-1], base[:2]])
    assert not aliasing.overlapping([base[:8], base[8:]])
    folded = np.lib.stride_tricks.as_strided(base, shape=(4, 4), strides=(0, 4))
    assert aliasing.self_overlapping(folded) and not aliasing.self_overlapping(base[::2])
