"""numba's device-array views and array methods: the transpose of a view is a C-contiguous
copy with numba's strides."""
from __future__ import annotations

import numpy as np

from zymo import cuda


def test_transpose_of_a_view_is_contiguous():
    a = np.arange(120, dtype=np.int64).reshape((10, 12))
    t = cuda.to_device(a)[::2, ::2].T
    assert (t.shape, t.strides) == ((6, 5), (40, 8))
    np.testing.assert_array_equal(t.copy_to_host(), a[::2, ::2].T)
    assert cuda.to_device(a).transpose((0, 1)).strides == (96, 8)
    cube = cuda.to_device(np.arange(24.0).reshape(2, 3, 4))
    np.testing.assert_array_equal(cube.T.copy_to_host(), np.arange(24.0).reshape(2, 3, 4).T)
