"""zymo.cuda on a GPU, numba's behaviours around launches: no host-copy warning (and no copy)
for managed and mapped memory, the CUDA array interface's streams produced and synchronized
when consumed, ufunc reductions in device memory, gufunc casts and shapes with device arrays,
and negative-strided copies refused."""
from unittest.mock import patch

import warnings

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def quiet():
    from zymo.cuda.tests.support import override_config
    with override_config("CUDA_LOW_OCCUPANCY_WARNINGS", 0):
        yield


def test_managed_and_mapped_arrays_launch_in_place(cuda):
    from zymo.cuda.core.errors import NumbaPerformanceWarning
    from zymo.cuda.tests.support import override_config

    def make():
        @cuda.jit
        def fill(x):
            i = cuda.grid(1)
            if i < x.size:
                x[i] = 2 * i
        return fill

    with override_config("CUDA_WARN_ON_IMPLICIT_COPY", 1):
        for alloc in (cuda.managed_array, cuda.mapped_array):
            x = alloc(64, np.float32)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                make()[1, 64](x)
            cuda.synchronize()
            np.testing.assert_array_equal(np.asarray(x), 2 * np.arange(64))
        host = np.zeros(64, np.float32)
        with pytest.warns(NumbaPerformanceWarning, match="Host array used in CUDA kernel"):
            make()[1, 64](host)
        np.testing.assert_array_equal(host, 2 * np.arange(64))


def test_interface_streams_produced_and_synchronized(cuda):
    from zymo.cuda.testing import ForeignArray
    Stream = cuda.cudadrv.driver.Stream
    s = cuda.stream()
    d = cuda.to_device(np.arange(32, dtype=np.float32), stream=s)
    assert d.__cuda_array_interface__["stream"] == int(s.handle) != 0
    assert cuda.device_array(4).__cuda_array_interface__["stream"] is None
    assert cuda.managed_array(4, stream=s).__cuda_array_interface__["stream"] == int(s.handle)
    imported = cuda.as_cuda_array(ForeignArray(d))
    assert imported.stream.external and int(imported.stream.handle) == int(s.handle)

    @cuda.jit
    def double(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] *= 2

    with patch.object(Stream, "synchronize", return_value=None) as sync:
        double[1, 32](ForeignArray(d))
        assert sync.call_count == 1
        double[1, 32](ForeignArray(cuda.device_array(8)))
        assert sync.call_count == 1
    np.testing.assert_array_equal(d.copy_to_host(), 2 * np.arange(32))
    with pytest.raises(NotImplementedError, match="negative strides"):
        d[::-1].copy_to_host()


def test_reduce_and_gufuncs_on_device_arrays(cuda):
    @cuda.vectorize(["int32(int32, int32)", "float64(float64, float64)"])
    def add(a, b):
        return a + b

    for n in (1, 2, 7, 1025, 100_001):
        x = np.arange(n, dtype=np.int32) % 13
        d = cuda.to_device(x)
        assert add.reduce(d) == x.sum() and add.reduce(x) == x.sum()
        np.testing.assert_array_equal(d.copy_to_host(), x)
    m = np.arange(35.0).reshape(7, 5)
    got = add.reduce(cuda.to_device(m))
    assert type(got) is cuda.DeviceNDArray
    np.testing.assert_allclose(got.copy_to_host(), m.sum(0))

    @cuda.guvectorize(["void(int32[:], int32[:], int32[:])"], "(n),()->(n)")
    def shift(x, y, res):
        for i in range(x.shape[0]):
            res[i] = x[i] + y[0]

    rows = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = shift(cuda.to_device(rows), cuda.to_device(np.array([1, 2, 3], np.int32)))
    np.testing.assert_array_equal(out.copy_to_host(), rows + np.array([[1], [2], [3]]))
    with pytest.raises(TypeError, match="does not support"):
        shift(cuda.to_device(rows.astype(np.int64)), np.int32(1))
