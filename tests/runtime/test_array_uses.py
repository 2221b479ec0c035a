"""Which arguments a kernel writes and reads (`Specialization.array_uses`), through views of
them too: the read-only check of NumPy arguments, the tape's copies, the evolution's output
comparison and the derivatives' aliasing checks all rely on it."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm


@zm.kernel
def fill_through_reshape(a, b):
    v = a.reshape(a.size)
    i = zm.grid(1)
    if i < v.shape[0]:
        v[i] = b[0] + i


@zm.kernel
def bits_through_view(a, out):
    bits = a.view(np.uint32)
    i = zm.grid(1)
    if i < bits.shape[0]:
        out[i] = bits[i]


@zm.kernel
def direct(a, b):
    i = zm.grid(1)
    if i < a.shape[0]:
        a[i] = b[i]


@pytest.mark.parametrize("kernel, args, expected", [
    (fill_through_reshape, (np.zeros((4, 4)), np.ones(1)), ({0}, {1})),
    (bits_through_view, (np.zeros(8, np.float32), np.zeros(8, np.uint32)), ({1}, {0})),
    (direct, (np.zeros(8), np.ones(8)), ({0}, {1})),
])
def test_uses_follow_views(kernel, args, expected):
    assert kernel.specialization_for(args).array_uses() == expected


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_a_read_only_array_written_through_a_view_is_refused(backend):
    a = np.zeros((4, 4))
    a.flags.writeable = False
    with pytest.raises(zm.LaunchError, match="read-only NumPy array"):
        fill_through_reshape.on(backend)[1, 32](a, np.ones(1))
    b = np.zeros((4, 4))
    fill_through_reshape.on(backend)[1, 32](b, np.ones(1))
    np.testing.assert_array_equal(b.ravel(), 1 + np.arange(16))
