"""GPU array arguments without a GPU: typing of `__cuda_array_interface__` and DLPack objects,
byte strides to element strides, dispatch to the CUDA backend, argument slots, PTX versions."""
from __future__ import annotations

import gc
import struct

import numpy as np
import pytest

import zymo as zm
from zymo.diagnostics import LaunchError
from zymo.frontend import Param
from zymo.ir.types import Array
from zymo.runtime.cuda import arrays, dlpack, driver, launch
from zymo.runtime.kernel import _backend_of, param_of_arg


class FakeCAI:
    """What CuPy, PyTorch and numba hand out: a dict describing device memory."""

    def __init__(self, shape, typestr="<f4", strides=None, data=0x7F0000001000, version=3):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "strides": strides,
                                         "data": (data, False), "version": version}


class FakeDLPack:
    """A DLPack producer over (fake) CUDA memory."""

    def __init__(self, dtype, shape, data=0x7F0000002000):
        self.dtype, self.shape, self.data = np.dtype(dtype), shape, data

    def __dlpack_device__(self):
        return (dlpack.CUDA, 0)

    def __dlpack__(self, stream=None):
        return dlpack.export(self, self.data, self.dtype, self.shape, 0)


def test_contiguous_interface_array_is_c_layout():
    assert param_of_arg(FakeCAI((10,))).key() == ("array", Array(zm.f32, 1, "global", "C",
                                                                 small=True))
    assert param_of_arg(FakeCAI((4, 5), "<i8", strides=(40, 8))).key() == \
        ("array", Array(zm.i64, 2, "global", "C", small=True))


def test_arrays_of_2_31_elements_or_more_keep_64_bit_offsets():
    """Only arrays whose every element offset fits in i32 are typed small, and the launch
    key tells the two apart, so a large array never reuses a small array's plan."""
    big = FakeCAI((2**16, 2**15))
    assert param_of_arg(big).key() == ("array", Array(zm.f32, 2, "global", "C"))
    small = FakeCAI((2**16, 2**15 - 1))
    assert param_of_arg(small).type.small
    keys = []
    for value in (big, small):
        key, words = [], []
        launch._describe_other(value, key, words)
        keys.append(key[0])
    assert keys[0] != keys[1]


def test_strided_interface_array_is_any_layout_with_element_strides():
    transposed = FakeCAI((5, 4), "<f8", strides=(8, 40))
    assert param_of_arg(transposed).key() == ("array", Array(zm.f64, 2, "global", "A"))
    info = arrays.array_info(transposed)
    assert info.strides == (1, 5) and info.shape == (5, 4) and not info.contiguous
    key, words = [], []
    launch._describe_other(transposed, key, words)
    assert words == [0x7F0000001000, 5, 4, 1, 5]


def test_extent_one_axes_do_not_break_contiguity():
    assert arrays.array_info(FakeCAI((1, 6), strides=(999 * 4, 4))).contiguous
    assert arrays.array_info(FakeCAI((0, 3), strides=(4, 4))).contiguous


def test_unsupported_interface_arrays():
    with pytest.raises(LaunchError, match="not multiples of its item size"):
        param_of_arg(FakeCAI((4,), strides=(6,)))
    with pytest.raises(LaunchError, match="float128"):
        param_of_arg(FakeCAI((4,), "<f16"))
    assert param_of_arg(FakeCAI((4,), "<c16")).type.dtype == zm.c128   # complex is supported
    masked = FakeCAI((4,))
    masked.__cuda_array_interface__["mask"] = FakeCAI((4,), "|b1")
    with pytest.raises(LaunchError, match="masked"):
        param_of_arg(masked)


def test_dlpack_object_is_typed_and_its_capsule_released():
    producer = FakeDLPack(np.int32, (3, 7))
    assert param_of_arg(producer).key() == ("array", Array(zm.i32, 2, "global", "C", small=True))
    info = arrays.array_info(producer)
    assert (info.shape, info.strides, info.data) == ((3, 7), (7, 1), 0x7F0000002000)
    gc.collect()
    assert not dlpack._live, "an unconsumed capsule gives its tensor back"


def test_dlpack_read_sees_what_export_wrote():
    dtype, shape, strides, data, device = dlpack.read(FakeDLPack(np.float16, (2, 3, 4)))
    assert (dtype, shape, strides, data, device) == (np.dtype(np.float16), (2, 3, 4), None,
                                                     0x7F0000002000, (dlpack.CUDA, 0))


def test_gpu_arrays_dispatch_to_cuda_and_numpy_to_the_cpu(monkeypatch):
    monkeypatch.delenv("ZYMO_BACKEND", raising=False)
    assert _backend_of([1.0, FakeCAI((3,))]) == "cuda"
    assert _backend_of([FakeDLPack(np.float32, (3,))]) == "cuda"
    assert _backend_of([1.0, np.zeros(3)]) == "cpu"
    assert not arrays.is_gpu_array(np.zeros(3)) and not arrays.is_gpu_array(2)


@zm.kernel
def add_one(x):
    i = zm.grid(1)
    if i < x.shape[0]:
        x[i] += 1.0


def test_numpy_array_on_cuda_is_copied_to_the_gpu():
    """numba's behaviour: a NumPy array given to a CUDA launch is copied in and back (checked
    on a GPU in tests/gpu/test_numba_api.py); without one, the copy is what fails."""
    if driver.is_available():
        pytest.skip("a GPU is present: tests/gpu checks the copies")
    with pytest.raises(driver.CudaError):
        add_one.on("cuda")[1, 32](np.zeros(4, np.float32))


def test_launch_configurations_are_reused():
    assert add_one[4, 256] is add_one[4, 256]
    assert add_one[4, 256] is not add_one[4, 128]
    assert add_one[[4], [256]].grid == (4, 1, 1)   # unhashable: built each time, still fine
    with pytest.raises(LaunchError, match="negative"):
        add_one[1, 1, 0, -5]


def test_argument_slots():
    params = [Param("value", zm.f32), Param("array", Array(zm.f32, 2)),
              Param("value", zm.bool_), Param("weak", zm.i64)]
    layout = launch.slot_format(params)
    assert layout == "<f4xQqqqq?7xq"
    assert struct.calcsize(layout) == 8 * 8   # one 8-byte slot per .entry parameter


def test_ptx_version_is_capped_to_what_the_driver_takes():
    ptx = "//\n.version 8.7\n.target sm_90\n"
    assert driver.cap_ptx_version(ptx, (8, 5)) == "//\n.version 8.5\n.target sm_90\n"
    assert driver.cap_ptx_version(ptx, (9, 0)) == ptx
    assert driver.max_ptx_isa((12, 4)) == (8, 4)
    assert driver.max_ptx_isa((12, 7)) == (8, 5)      # no 12.7: the release before it
    assert driver.max_ptx_isa((99, 0)) == driver.max_ptx_isa((13, 1))


def test_cuda_errors_pickle():
    import pickle
    error = pickle.loads(pickle.dumps(driver.CudaError("cuX failed", 700)))
    assert isinstance(error, zm.KernelRuntimeError) and error.code == 700


@zm.kernel
def mixed(a, flag, n, grid2d):
    i, j = zm.grid(2)
    if flag and i < grid2d.shape[0] and j < grid2d.shape[1]:
        grid2d[i, j] = a * n


def test_argument_slots_match_the_nvptx_abi():
    from zymo.backend import nvptx
    spec = mixed.specialize(np.float32(1), True, 3, np.zeros((2, 2), np.float64))
    compiled = nvptx.compile(spec.optimized, arch="sm_90")
    layout = launch.slot_format(spec.params)
    assert struct.calcsize(layout) == 8 * len(compiled.params)
    sizes = [struct.calcsize("<" + code) for code in _slot_codes(layout)]
    assert sizes == [param.dtype.itemsize for param in compiled.params]


def _slot_codes(layout: str) -> list[str]:
    """The value code of each slot, padding dropped ("<f4xq" -> ["f", "q"])."""
    return [code for code in layout[1:].replace("7x", "").replace("6x", "")
            .replace("4x", "") if code != "x"]
