"""GPU arrays: `zm.to_device` / `zm.DeviceArray`, and reading any GPU array a launch is given
(`__cuda_array_interface__`: CuPy, PyTorch, numba; DLPack: JAX, PyTorch) as a data pointer,
shape and strides counted in elements.

Nothing here imports cuda-bindings until memory is allocated, so dispatch (is this argument a
GPU array?) costs nothing on machines without CUDA.
"""
from __future__ import annotations

import sys
import weakref
from typing import NamedTuple

import numpy as np
from numpy.typing import DTypeLike

from ...diagnostics import LaunchError
from ...ir import types as T
from ...ir.types import Array, is_small
from ...lang.params import Param

# DLPack device types CUDA and CUDA managed (dlpack.py, imported only when used: it loads ctypes)
_DLPACK_CUDA, _DLPACK_GPU = 2, (2, 13)


class ArrayInfo(NamedTuple):
    """A GPU array as a launch sees it (strides in elements)."""

    dtype: np.dtype
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    data: int
    contiguous: bool


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a C-contiguous array of `shape`."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def is_c_contiguous(shape, strides) -> bool:
    """C-contiguous in NumPy's sense: strides of extent-1 axes and of empty arrays don't count."""
    if 0 in shape:
        return True
    step = 1
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != step:
            return False
        step *= extent
    return True


# ---- device memory and DeviceArray ---------------------------------------------------------
# device memory zymo's arrays hold now (what a leak check compares before and after)
LIVE = {"allocations": 0, "bytes": 0}


def _free(pointer: int, nbytes: int = 0) -> None:
    from . import driver
    LIVE["allocations"] -= 1
    LIVE["bytes"] -= nbytes
    if driver.ABANDONED:    # cuMemFree would wait for a kernel that never ends
        return
    try:
        driver.bindings().cuMemFree(pointer)
    except Exception:  # interpreter shutdown
        pass


class DeviceArray:
    """A C-contiguous array in GPU memory, for users without a GPU array library; interoperates
    through `__cuda_array_interface__` and DLPack."""

    __slots__ = ("shape", "dtype", "strides", "ndim", "size", "nbytes", "device", "data",
                 "_key", "_words", "__weakref__")

    def __init_subclass__(cls, **kwargs):
        # a subclass (zymo.cuda's views) keeps `_key` and `_words` as launches read them, its
        # `_key` starting with its class name: the compiled launcher checks the type by it
        super().__init_subclass__(**kwargs)
        KEYED_TYPES[cls.__name__] = cls

    def __init__(self, shape, dtype: DTypeLike = np.float32):
        from .driver import bindings, call, current_device
        shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        try:
            T.scalar_of_dtype(self.dtype)
        except KeyError:
            raise LaunchError(f"DeviceArray of {self.dtype} is not supported") from None
        self.shape, self.ndim = shape, len(shape)
        self.size = int(np.prod(shape, dtype=np.int64))
        self.nbytes = self.size * self.dtype.itemsize
        element_strides = c_strides(shape)
        self.strides = tuple(s * self.dtype.itemsize for s in element_strides)
        self.device = current_device()
        self.data = 0
        if self.nbytes:
            drv = bindings()
            self.data = int(call(drv.cuMemAlloc, self.nbytes, name="cuMemAlloc"))
            LIVE["allocations"] += 1
            LIVE["bytes"] += self.nbytes
            finalizer = weakref.finalize(self, _free, self.data, self.nbytes)
            finalizer.atexit = False   # the driver tears its memory down itself at exit
        # what a launch reads, computed once: the array never changes shape or address; the
        # key is a string because strings cache their hash (a launch hashes every key)
        small = "small" if is_small(self.size, True) else ""
        self._key = sys.intern(f"DeviceArray {dtype_key(self.dtype)}{self.ndim}{small}")
        self._words = (self.data, *shape, *element_strides)

    def copy_to_host(self, out: np.ndarray | None = None) -> np.ndarray:
        """The contents as a NumPy array (waits for work on the legacy default stream)."""
        from .driver import bindings, call
        if out is None:
            out = np.empty(self.shape, self.dtype)
        elif out.shape != self.shape or out.dtype != self.dtype or not out.flags.c_contiguous:
            raise ValueError(f"copy_to_host: `out` must be a C-contiguous {self.shape} "
                             f"{self.dtype} array")
        if self.nbytes:
            call(bindings().cuMemcpyDtoH, out.ctypes.data, self.data, self.nbytes,
                 name="cuMemcpyDtoH")
        return out

    def copy_from_host(self, array) -> "DeviceArray":
        """Overwrite the contents with `array` (same shape and dtype)."""
        from .driver import bindings, call
        host = np.asarray(array, dtype=self.dtype, order="C")   # 0-d stays 0-d
        if host.shape != self.shape:
            raise ValueError(f"copy_from_host: shape {host.shape}, expected {self.shape}")
        if self.nbytes:
            call(bindings().cuMemcpyHtoD, self.data, host.ctypes.data, self.nbytes,
                 name="cuMemcpyHtoD")
        return self

    def copy_from_device(self, other: "DeviceArray") -> "DeviceArray":
        """Overwrite the contents with `other`'s (same shape and dtype), on the GPU, in order
        with the work on the legacy default stream."""
        from .driver import bindings, call
        if other.shape != self.shape or other.dtype != self.dtype:
            raise ValueError(f"copy_from_device: {other.shape} {other.dtype}, expected "
                             f"{self.shape} {self.dtype}")
        if self.nbytes:
            call(bindings().cuMemcpyDtoDAsync, self.data, other.data, self.nbytes, 0,
                 name="cuMemcpyDtoDAsync")
        return self

    @property
    def __cuda_array_interface__(self) -> dict:
        # stream 1: the data was written on the legacy default stream
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.data, False),
                "strides": None, "version": 3, "stream": 1}

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_DLPACK_CUDA, self.device.ordinal)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("DeviceArray.__dlpack__ does not copy")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"DeviceArray lives on CUDA device {self.device.ordinal}")
        if stream not in (None, 1, 2, -1):
            _order_after_default_stream(stream)
        from . import dlpack
        return dlpack.export(self, self.data, self.dtype, self.shape, self.device.ordinal)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype})"


def dtype_key(dtype: np.dtype) -> str:
    """What tells `dtype` apart in a launch key: its one-letter code, or where that is shared
    (the units of datetime64/timedelta64) its full description."""
    return dtype.char if dtype.kind not in "mM" else dtype.str


# DeviceArray and its subclasses by name, the first word of their `_key`
KEYED_TYPES: dict[str, type] = {"DeviceArray": DeviceArray}


def _order_after_default_stream(stream: int) -> None:
    """Make the consumer's `stream` wait for what was queued on the legacy default stream."""
    from .driver import bindings, call
    from .streams import Event
    event = Event(timing=False).record(None)
    drv = bindings()
    call(drv.cuStreamWaitEvent, drv.CUstream(stream), event.handle, 0, name="cuStreamWaitEvent")


def to_device(array, dtype=None) -> DeviceArray:
    """A DeviceArray holding a copy of `array` (a NumPy array or anything np.asarray takes)."""
    host = np.asarray(array, dtype=dtype, order="C")   # 0-d stays 0-d
    if not host.dtype.isnative:                # GPUs are little-endian, like zymo's types
        host = host.astype(host.dtype.newbyteorder("="))
    return DeviceArray(host.shape, host.dtype).copy_from_host(host)


def device_array(shape, dtype: DTypeLike = np.float32) -> DeviceArray:
    """A zero-filled DeviceArray."""
    from .driver import bindings, call
    out = DeviceArray(shape, dtype)
    if out.nbytes:
        call(bindings().cuMemsetD8, out.data, 0, out.nbytes, name="cuMemsetD8")
    return out


# ---- reading any GPU array -----------------------------------------------------------------
def _module_type(module: str, name: str):
    loaded = sys.modules.get(module)
    return getattr(loaded, name, None) if loaded is not None else None


def _is_torch(kind: type) -> bool:
    tensor = _module_type("torch", "Tensor")
    return tensor is not None and issubclass(kind, tensor)


def _is_jax(kind: type) -> bool:
    array = _module_type("jax._src.array", "ArrayImpl")
    return array is not None and issubclass(kind, array)


def _is_cupy(kind: type) -> bool:
    ndarray = _module_type("cupy", "ndarray")
    return ndarray is not None and issubclass(kind, ndarray)


def _info_from_strides(dtype, shape, byte_strides, data) -> ArrayInfo:
    item = dtype.itemsize
    if byte_strides is None:
        strides = c_strides(shape)
    else:
        if any(s % item for s in byte_strides):
            raise LaunchError(f"GPU array strides {tuple(byte_strides)} are not multiples of "
                              f"its item size {item}")
        strides = tuple(s // item for s in byte_strides)
    return ArrayInfo(dtype, shape, strides, data, is_c_contiguous(shape, strides))


def _interface_info(interface: dict) -> ArrayInfo:
    if interface.get("mask") is not None:
        raise LaunchError("masked GPU arrays (__cuda_array_interface__ 'mask') are not supported")
    shape = tuple(interface["shape"])
    dtype = np.dtype(interface["typestr"])
    descr = interface.get("descr")
    if dtype.kind == "V" and descr and any(name for name, *_ in descr):   # named fields
        dtype = np.dtype(descr)
    return _info_from_strides(dtype, shape, interface.get("strides"),
                              interface["data"][0] or 0)


def array_info(value) -> ArrayInfo | None:
    """How a GPU array lies in memory; None when `value` is no GPU array."""
    kind = type(value)
    if kind is DeviceArray:
        return ArrayInfo(value.dtype, value.shape, c_strides(value.shape), value.data, True)
    if _is_torch(kind):
        if not value.is_cuda:
            return None
        try:
            dtype = np.dtype(str(value.dtype).removeprefix("torch."))
        except TypeError:
            raise LaunchError(f"tensors of {value.dtype} are not supported") from None
        shape, strides = tuple(value.shape), tuple(value.stride())
        return ArrayInfo(dtype, shape, strides, value.data_ptr(), value.is_contiguous())
    try:
        interface = value.__cuda_array_interface__
    except AttributeError:
        interface = None
    if interface is not None:
        return _interface_info(interface)
    device = getattr(value, "__dlpack_device__", None)
    if device is not None and hasattr(value, "__dlpack__") and \
            device()[0] in _DLPACK_GPU:
        from . import dlpack
        dtype, shape, strides, data, _ = dlpack.read(value)
        strides = c_strides(shape) if strides is None else strides
        return ArrayInfo(dtype, shape, strides, data, is_c_contiguous(shape, strides))
    return None


ALWAYS, NEVER, ASK = 1, 0, 2
_placement: dict[type, int] = {}


def _placement_of(kind: type) -> int:
    if issubclass(kind, DeviceArray) or _is_cupy(kind):
        return ALWAYS
    if issubclass(kind, (np.ndarray, np.generic, bool, int, float, complex, str)):
        return NEVER
    return ASK   # PyTorch tensors and unknown types: each object says where it lives


def is_gpu_array(value) -> bool:
    """Does `value` live on a GPU (so the launch goes to CUDA)? Decided per type where the
    type decides it, so dispatch stays cheap."""
    placement = _placement.get(type(value))
    if placement is None:
        placement = _placement[type(value)] = _placement_of(type(value))
    if placement != ASK:
        return placement == ALWAYS
    if _is_torch(type(value)):
        return value.is_cuda
    if hasattr(value, "__cuda_array_interface__"):
        return True
    device = getattr(value, "__dlpack_device__", None)
    try:
        return device is not None and device()[0] in _DLPACK_GPU
    except Exception:  # a producer that cannot say: not ours to take
        return False


def gpu_array_param(value) -> Param | None:
    """The kernel parameter a GPU array is passed as; None when `value` is no GPU array."""
    info = array_info(value)
    if info is None:
        return None
    try:
        scalar = T.scalar_of_dtype(info.dtype)
    except KeyError:
        raise LaunchError(f"GPU arrays of {info.dtype} are not supported") from None
    layout = "C" if info.contiguous else "A"
    return Param("array", Array(scalar, len(info.shape), "global", layout,
                                small=info_is_small(info)))


def info_is_small(info: ArrayInfo) -> bool:
    """Whether the array may be typed `small` (every element offset fits in i32)."""
    size = 1
    for extent in info.shape:
        size *= extent
    return is_small(size, info.contiguous)
