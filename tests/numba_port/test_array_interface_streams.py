"""numba's CUDA array interface as zymo.cuda produces and consumes it without a GPU: the stream
named in produced arrays' interfaces, imported (and synchronized) when consumed, by
as_cuda_array, kernel launches and ufuncs; masked arrays and negative-strided copies refused."""
from __future__ import annotations

from unittest.mock import call, patch

import numpy as np
import pytest

from zymo import cuda
from zymo.cuda.testing import ForeignArray
from zymo.cuda.tests.support import override_config

Stream = cuda.cudadrv.driver.Stream


@pytest.fixture(autouse=True)
def quiet():
    with override_config("CUDA_LOW_OCCUPANCY_WARNINGS", 0):
        yield


def test_produced_interfaces_name_their_stream():
    assert cuda.device_array(4).__cuda_array_interface__["stream"] is None
    assert cuda.mapped_array(4).__cuda_array_interface__["stream"] is None
    s, t = cuda.stream(), cuda.stream()
    assert int(s.handle) not in (0, 1, 2) and int(s.handle) != int(t.handle)
    for make in (cuda.device_array, cuda.mapped_array, cuda.managed_array):
        a = make(10, stream=s)
        assert a.__cuda_array_interface__["stream"] == int(s.handle)
        assert a[2:].__cuda_array_interface__["stream"] == int(s.handle)   # views keep it
    d = cuda.to_device(np.arange(3.0), stream=t)
    assert d.__cuda_array_interface__["stream"] == int(t.handle)
    assert d.bind(s).__cuda_array_interface__["stream"] == int(s.handle)


def test_consuming_an_interface_imports_and_synchronizes_its_stream():
    s = cuda.stream()
    named = ForeignArray(cuda.device_array(10, stream=s))
    plain = ForeignArray(cuda.device_array(10))
    with patch.object(Stream, "synchronize", return_value=None) as sync:
        imported = cuda.as_cuda_array(named)
        assert sync.call_count == 1
        assert cuda.as_cuda_array(plain).stream == 0
        assert sync.call_count == 1
        cuda.as_cuda_array(named, sync=False)
        with override_config("CUDA_ARRAY_INTERFACE_SYNC", False):
            cuda.as_cuda_array(named)
        assert sync.call_count == 1
    assert imported.stream.external and int(imported.stream.handle) == int(s.handle)


def test_launch_with_foreign_arrays_synchronizes_and_runs():
    @cuda.jit
    def add_one(x, y):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = x[i] + 1

    s1, s2 = cuda.stream(), cuda.stream()
    x = cuda.to_device(np.arange(10.0), stream=s1)
    y = cuda.device_array(10, stream=s2)
    with patch.object(Stream, "synchronize", return_value=None) as sync:
        add_one[1, 16](ForeignArray(x), ForeignArray(y))
        sync.assert_has_calls([call(), call()])
        assert sync.call_count == 2
        with override_config("CUDA_ARRAY_INTERFACE_SYNC", False):
            add_one[1, 16](ForeignArray(x), ForeignArray(y))
        assert sync.call_count == 2
        add_one[1, 16](ForeignArray(cuda.device_array(10)), ForeignArray(cuda.device_array(10)))
        assert sync.call_count == 2
    np.testing.assert_array_equal(y.copy_to_host(), np.arange(10.0) + 1)
    empty = cuda.device_array(0)
    assert empty.__cuda_array_interface__["data"][0] == 0
    add_one[1, 10](ForeignArray(empty), ForeignArray(empty))


def test_ufuncs_take_and_give_foreign_arrays():
    @cuda.vectorize(["f8(f8, f8)"])
    def vadd(a, b):
        return a + b

    @cuda.guvectorize(["(f8, f8, f8[:])"], "(),()->()")
    def gadd(a, b, out):
        out[0] = a + b

    h = np.linspace(0, 1, 10)
    for f in (vadd, gadd):
        out = f(ForeignArray(cuda.to_device(h)), np.float64(6))
        np.testing.assert_array_equal(out.copy_to_host(), h + 6)
        returned = f(h, np.float64(7), out=ForeignArray(cuda.device_array(h.shape)))
        np.testing.assert_array_equal(returned.copy_to_host(), h + 7)


def test_masked_arrays_and_negative_strided_copies_are_refused():
    d = cuda.to_device(np.arange(10.0))
    desc = dict(d.__cuda_array_interface__, mask=cuda.to_device(np.ones(10, bool)))
    with pytest.raises(NotImplementedError, match="Masked arrays are not supported"):
        cuda.from_cuda_array_interface(desc)
    with pytest.raises(NotImplementedError, match="D->H copy not implemented for negative "
                                                  "strides"):
        d[::-1].copy_to_host()
    np.testing.assert_array_equal(d[::2].copy_to_host(), np.arange(0.0, 10.0, 2))
