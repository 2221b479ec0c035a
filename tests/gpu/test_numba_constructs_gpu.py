"""On a GPU: captured device arrays are passed by reference (numba's global semantics: writes
made after the kernel compiled are seen), tuple and namedtuple arguments with device arrays."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import zymo as zm

pytestmark = pytest.mark.gpu
Pair = namedtuple("Pair", "a b")


def test_captured_device_array_by_reference():
    table = zm.to_device(np.arange(5, dtype=np.float32))

    @zm.kernel
    def read_table(out):
        i = zm.grid(1)
        if i < out.shape[0]:
            out[i] = table[i]

    out = zm.device_array(5, np.float32)
    read_table[1, 32](out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(5))
    table.copy_from_host(np.full(5, 7.0, np.float32))   # seen by the compiled kernel
    read_table[1, 32](out)
    np.testing.assert_array_equal(out.copy_to_host(), np.full(5, 7.0))


def test_namedtuple_of_device_arrays():
    @zm.kernel
    def add(p, out):
        i = zm.grid(1)
        if i < out.shape[0]:
            out[i] = p.a[i] + p[1][i]

    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    out = zm.device_array(8, np.float32)
    add[1, 32](Pair(zm.to_device(a), zm.to_device(b)), out)
    np.testing.assert_array_equal(out.copy_to_host(), a + b)
