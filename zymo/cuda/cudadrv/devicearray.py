"""numba's device arrays: `DeviceNDArray` and the functions that make them.

Without a GPU (mode.py) a device array is a NumPy array in host memory (`HostDeviceNDArray`, a
subclass of `np.ndarray`): kernels on the CPU backend use it in place and NumPy reads it as it
is. On a GPU it is a view of device memory (`DeviceNDArray`, a subclass of zymo's DeviceArray,
so that launches read it as cheaply): slicing gives views of the same allocation, with strides.
"""
from __future__ import annotations

import contextlib
import sys
import weakref

import numpy as np

from ...runtime.cuda import arrays as zarrays
from ...runtime.cuda import launch as zlaunch
from .. import mode


def _as_stream_handle(stream):
    from ...runtime.cuda.streams import as_stream
    return as_stream(stream if stream else None)


def _normalize_shape(shape) -> tuple:
    return (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)


# ---- host memory (no GPU) ---------------------------------------------------------------------
class MemoryPointer:
    """numba's view of where an array's memory starts (`array.gpu_data`): `device_pointer`
    is the address (a host address where there is no GPU), `owner` what keeps it alive."""

    def __init__(self, address: int, size: int, owner):
        self.device_pointer, self.size, self.owner = address, size, owner

    def __eq__(self, other) -> bool:
        """The same memory: an array and its views of other dtypes (`a.view(np.int64)`)
        have equal `gpu_data`, as in numba, where they share the object."""
        return isinstance(other, MemoryPointer) and \
            (other.device_pointer, other.size) == (self.device_pointer, self.size)

    def __hash__(self) -> int:
        return hash((self.device_pointer, self.size))

    @property
    def device_ctypes_pointer(self):
        import ctypes
        return ctypes.c_void_p(self.device_pointer)


class HostDeviceNDArray(np.ndarray):
    """A device array where there is no GPU: host memory with numba's DeviceNDArray methods."""

    stream = 0    # numba's: the stream the array was made on (0: none), kept by its views
    zymo_by_reference = True   # a kernel naming one at module level sees later writes

    def __array_finalize__(self, obj):
        stream = getattr(obj, "stream", 0)
        if _has_stream(stream):
            self.stream = stream

    def copy_to_host(self, ary=None, stream=0):
        _refuse_negative_strides(self.strides)
        if ary is None:
            return np.array(self, copy=True, subok=False)
        np.copyto(_check_like(ary, self), self.view(np.ndarray))
        return ary

    def copy_to_device(self, ary, stream=0):
        source = np.asarray(ary)
        if source.shape != self.shape or source.dtype != self.dtype:
            raise ValueError(f"copy_to_device: {source.shape} {source.dtype} into "
                             f"{self.shape} {self.dtype}: shapes and dtypes must match")
        np.copyto(self.view(np.ndarray), source)

    @property
    def __cuda_array_interface__(self) -> dict:
        """numba's description of the array; the pointer is a host address (there is no GPU:
        the memory is the host's), which kernels taking raw pointers (CPointer) on the CPU
        backend and foreign functions compiled for the host read."""
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3,
                "strides": None if self.flags.c_contiguous else self.strides,
                "data": (self.ctypes.data if self.size else 0, not self.flags.writeable),
                "descr": self.dtype.descr, "stream": _interface_stream(self.stream)}

    def is_c_contiguous(self) -> bool:
        return bool(self.flags.c_contiguous)

    def is_f_contiguous(self) -> bool:
        return bool(self.flags.f_contiguous)

    def transpose(self, *axes):
        """numba's: a two-dimensional array's transpose is a new C-contiguous array (numba
        runs its transpose kernel), so its strides are numba's whatever view it is of; other
        ranks keep NumPy's strided view."""
        view = np.ndarray.transpose(self, *axes)
        if self.ndim != 2 or view.strides == self.strides:
            return view
        copy = np.asarray(view.view(np.ndarray), order="C").view(type(self))
        copy.stream = self.stream
        return copy

    @property
    def T(self):
        return self.transpose()

    @property
    def gpu_data(self) -> MemoryPointer:
        return MemoryPointer(self.ctypes.data if self.size else 0, self.nbytes, self)

    @property
    def device_ctypes_pointer(self):
        return self.gpu_data.device_ctypes_pointer

    def split(self, section, stream=0):
        flat = self.ravel()
        return [flat[i:i + section] for i in range(0, flat.size, section)]

    def bind(self, stream=0):
        view = self.view()
        view.stream = stream
        return view

    def get(self, stream=0):
        return self.copy_to_host(stream=stream)

    @property
    def alloc_size(self) -> int:
        return self.nbytes

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    def __repr__(self) -> str:
        return f"<zymo.cuda host DeviceNDArray shape={self.shape} dtype={self.dtype}>"


def _interface_stream(stream):
    """The `stream` of numba's __cuda_array_interface__: None for an array made on no stream,
    else the stream's handle (an int)."""
    return int(stream) if _has_stream(stream) else None


def _has_stream(stream) -> bool:
    """numba's `stream != 0`: a Stream object (even the default stream's), or a non-zero
    handle."""
    return stream is not None and not (isinstance(stream, (int, np.integer)) and stream == 0)


def _refuse_negative_strides(strides) -> None:
    if any(s < 0 for s in strides):
        raise NotImplementedError(f"D->H copy not implemented for negative strides {strides} "
                                  f"(as in numba): copy the array with positive strides and "
                                  f"reverse it on the host, as array[::-1].copy_to_host()"
                                  f"[::-1]")


def _check_like(ary, like):
    if not isinstance(ary, np.ndarray) or ary.shape != like.shape or ary.dtype != like.dtype:
        raise ValueError(f"copy_to_host: `ary` must be a {like.shape} {like.dtype} NumPy array")
    return ary


# ---- device memory ----------------------------------------------------------------------------
class _DeviceArrayType(type):
    """`isinstance(a, DeviceNDArray)` holds for host device arrays too, as code written for
    numba checks it whichever memory the arrays are in."""

    def __instancecheck__(cls, obj) -> bool:
        return type.__instancecheck__(cls, obj) or isinstance(obj, HostDeviceNDArray)


class DeviceNDArray(zarrays.DeviceArray, metaclass=_DeviceArrayType):
    """A view of device memory: `data` points at its first element, strides in bytes."""

    __slots__ = ("_owner", "stream")

    @classmethod
    def _view(cls, owner, data: int, shape, strides, dtype, stream=0) -> "DeviceNDArray":
        self = object.__new__(cls)
        self.dtype, self.shape, self.ndim = np.dtype(dtype), tuple(shape), len(shape)
        self.strides = tuple(int(s) for s in strides)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.nbytes = self.size * self.dtype.itemsize
        self.device = owner.device
        self.data, self._owner, self.stream = int(data), owner, stream
        item = self.dtype.itemsize
        element = tuple(s // item for s in self.strides)
        contiguous = zarrays.is_c_contiguous(self.shape, element)
        small = "small" if zarrays.is_small(self.size, contiguous) else ""
        # interned, as DeviceArray's: the compiled launcher compares keys by identity
        self._key = sys.intern(f"DeviceNDArray {zarrays.dtype_key(self.dtype)}{self.ndim}"
                               f"{'C' if contiguous else 'A'}{small}")
        self._words = (self.data, *self.shape, *element)
        return self

    @classmethod
    def allocate(cls, shape, dtype, strides=None, stream=0) -> "DeviceNDArray":
        shape, dtype = _normalize_shape(shape), np.dtype(dtype)
        if strides is None:
            strides = tuple(s * dtype.itemsize for s in zarrays.c_strides(shape))
        extent = _extent(shape, strides, dtype.itemsize)
        owner = zarrays.DeviceArray((extent,), np.uint8)
        return cls._view(owner, owner.data, shape, strides, dtype, stream)

    # -- what numba's DeviceNDArray has -------------------------------------------------------
    @property
    def __cuda_array_interface__(self) -> dict:
        contiguous = self.is_c_contiguous()
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.data, False),
                "strides": None if contiguous else self.strides, "version": 3,
                "descr": self.dtype.descr, "stream": _interface_stream(self.stream)}

    def is_c_contiguous(self) -> bool:
        return zarrays.is_c_contiguous(self.shape, [s // self.dtype.itemsize
                                                    for s in self.strides])

    def is_f_contiguous(self) -> bool:
        return zarrays.is_c_contiguous(self.shape[::-1], [s // self.dtype.itemsize
                                                          for s in self.strides[::-1]])

    def _span(self) -> tuple[int, int]:
        """[low, high) byte offsets from `data` that the view touches."""
        low = sum(min(0, (n - 1) * s) for n, s in zip(self.shape, self.strides) if n)
        high = sum(max(0, (n - 1) * s) for n, s in zip(self.shape, self.strides) if n)
        return low, high + self.dtype.itemsize

    @property
    def gpu_data(self) -> MemoryPointer:
        return MemoryPointer(self.data, self.nbytes, self._owner)

    @property
    def device_ctypes_pointer(self):
        return self.gpu_data.device_ctypes_pointer

    def copy_to_host(self, ary=None, stream=0):
        from ...runtime.cuda.driver import bindings, call, synchronize
        _refuse_negative_strides(self.strides)
        out = np.empty(self.shape, self.dtype) if ary is None else _check_like(ary, self)
        if not self.size:
            return out
        drv = bindings()
        if self.is_c_contiguous() and out.flags.c_contiguous:
            host, target = out, None
        else:     # the bytes the view spans, then NumPy's strided view of them
            low, high = self._span()
            host = np.empty(high - low, np.uint8)
            target = np.ndarray(self.shape, self.dtype, host, -low, self.strides)
        nbytes = host.nbytes
        source = self.data + (0 if target is None else self._span()[0])
        if stream:
            call(drv.cuMemcpyDtoHAsync, host.ctypes.data, source, nbytes,
                 _as_stream_handle(stream), name="cuMemcpyDtoHAsync")
            if target is not None:
                call(drv.cuStreamSynchronize, _as_stream_handle(stream),
                     name="cuStreamSynchronize")
        else:
            synchronize()
            call(drv.cuMemcpyDtoH, host.ctypes.data, source, nbytes, name="cuMemcpyDtoH")
        if target is not None:
            out[...] = target
        return out

    def copy_to_device(self, ary, stream=0):
        from ...runtime.cuda.driver import bindings, call
        if not self.size:
            return
        drv = bindings()
        if zarrays.is_gpu_array(ary):
            info = zarrays.array_info(ary)
            if info.shape != self.shape or info.dtype != self.dtype:
                raise ValueError(f"copy_to_device: {info.shape} {info.dtype} into "
                                 f"{self.shape} {self.dtype}")
            if not (info.contiguous and self.is_c_contiguous()):
                raise ValueError("copy_to_device between devices arrays needs both "
                                 "C-contiguous")
            call(drv.cuMemcpyDtoDAsync, self.data, info.data, self.nbytes,
                 _as_stream_handle(stream), name="cuMemcpyDtoDAsync")
            return
        source = np.asarray(np.broadcast_to(np.asarray(ary, self.dtype), self.shape), order="C")
        if self.is_c_contiguous():
            host, offset = source, 0
        else:     # read-modify-write of the bytes the view spans
            low, high = self._span()
            host = np.empty(high - low, np.uint8)
            call(drv.cuMemcpyDtoH, host.ctypes.data, self.data + low, host.nbytes,
                 name="cuMemcpyDtoH")
            np.ndarray(self.shape, self.dtype, host, -low, self.strides)[...] = source
            offset = low
        if stream:
            call(drv.cuMemcpyHtoDAsync, self.data + offset, host.ctypes.data, host.nbytes,
                 _as_stream_handle(stream), name="cuMemcpyHtoDAsync")
            call(drv.cuStreamSynchronize, _as_stream_handle(stream), name="cuStreamSynchronize")
        else:
            call(drv.cuMemcpyHtoD, self.data + offset, host.ctypes.data, host.nbytes,
                 name="cuMemcpyHtoD")

    def copy_from_host(self, array):
        self.copy_to_device(array)
        return self

    def get(self, stream=0):
        return self.copy_to_host(stream=stream)

    def __array__(self, dtype=None, copy=None):
        host = self.copy_to_host()
        return host if dtype is None else host.astype(dtype)

    def __getitem__(self, index):
        view = self._index(index)
        if isinstance(view, DeviceNDArray) and view.ndim == 0:
            return view.copy_to_host()[()]
        return view

    def __setitem__(self, index, value):
        view = self._index(index)
        view.copy_to_device(value)

    def _index(self, index) -> "DeviceNDArray":
        """The view `self[index]` (basic indexing only), computed on a NumPy stand-in whose
        byte offsets are the view's."""
        low, high = self._span()
        probe = np.ndarray(self.shape, self.dtype, np.empty(max(high - low, 0), np.uint8)
                           if high > low else None, -low if high > low else 0, self.strides) \
            if self.size else np.empty(self.shape, self.dtype)
        where = index if isinstance(index, tuple) else (index,)
        if Ellipsis not in where:    # a full integer index gives a 0-d view, not a copy
            where = (*where, Ellipsis)
        picked = probe[where]
        if picked.size and probe.size and not np.shares_memory(picked, probe):
            raise IndexError("device arrays take basic indexing (ints, slices): a view, "
                             "never a copy")
        offset = (picked.__array_interface__["data"][0] - probe.__array_interface__["data"][0]) \
            if probe.size and picked.size else 0
        return DeviceNDArray._view(self._owner, self.data + offset, picked.shape,
                                   picked.strides, self.dtype, self.stream)

    def reshape(self, *newshape, order="C"):
        shape = _normalize_shape(newshape[0] if len(newshape) == 1 else newshape)
        if -1 in shape:
            known = int(np.prod([n for n in shape if n != -1]))
            shape = tuple(self.size // known if n == -1 else n for n in shape)
        if int(np.prod(shape)) != self.size:
            raise ValueError(f"cannot reshape a device array of size {self.size} into {shape}")
        if order != "C" or not self.is_c_contiguous():
            raise NotImplementedError("device arrays reshape C-contiguous arrays in C order")
        strides = tuple(s * self.dtype.itemsize for s in zarrays.c_strides(shape))
        return DeviceNDArray._view(self._owner, self.data, shape, strides, self.dtype,
                                   self.stream)

    def ravel(self, order="C", stream=0):
        return self.reshape(self.size, order=order)

    def split(self, section, stream=0):
        flat = self.ravel()
        return [flat[i:i + section] for i in range(0, self.size, section)]

    def view(self, dtype):
        dtype = np.dtype(dtype)
        if not self.is_c_contiguous() or (self.shape and self.shape[-1] * self.dtype.itemsize
                                          % dtype.itemsize):
            raise ValueError("view(dtype) needs a C-contiguous array whose last axis divides")
        shape = (*self.shape[:-1], self.shape[-1] * self.dtype.itemsize // dtype.itemsize) \
            if self.shape else ()
        strides = tuple(s * dtype.itemsize for s in zarrays.c_strides(shape))
        return DeviceNDArray._view(self._owner, self.data, shape, strides, dtype, self.stream)

    @property
    def T(self):
        return self.transpose()

    def transpose(self, axes=None):
        """numba's: a two-dimensional array's transpose is a new C-contiguous array made by
        the transpose kernel (numba's strides, whatever view it is taken of); other ranks
        get a strided view (numba has none)."""
        axes = tuple(reversed(range(self.ndim))) if axes is None else tuple(axes)
        if sorted(axes) != list(range(self.ndim)):
            raise ValueError(f"axes {axes} do not permute the {self.ndim} axes of the array")
        if axes == tuple(range(self.ndim)):
            return self
        if self.ndim == 2:
            from ..kernels.transpose import transpose
            return transpose(self)
        return DeviceNDArray._view(self._owner, self.data, [self.shape[a] for a in axes],
                                   [self.strides[a] for a in axes], self.dtype, self.stream)

    def bind(self, stream=0):
        return DeviceNDArray._view(self._owner, self.data, self.shape, self.strides,
                                   self.dtype, stream)

    @property
    def alloc_size(self) -> int:
        return self._owner.nbytes

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d device array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<zymo.cuda DeviceNDArray shape={self.shape} dtype={self.dtype}>"


def _extent(shape, strides, item: int) -> int:
    if 0 in shape:
        return 0
    return sum((n - 1) * abs(s) for n, s in zip(shape, strides)) + item


# ---- the functions that make device arrays ----------------------------------------------------
def _host(shape, dtype, strides=None, order="C", stream=0) -> HostDeviceNDArray:
    shape = _normalize_shape(shape)
    if strides is not None:
        dtype = np.dtype(dtype)
        extent = _extent(shape, strides, dtype.itemsize)
        base = np.zeros(extent, np.uint8)
        out = np.ndarray(shape, dtype, base, 0, strides).view(HostDeviceNDArray)
    else:
        out = np.zeros(shape, dtype, order=order).view(HostDeviceNDArray)
    if _has_stream(stream):
        out.stream = stream
    return out


def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
    """An uninitialized device array (numba's `cuda.device_array`)."""
    dtype = np.dtype(dtype)
    if not mode.on_gpu():
        return _host(shape, dtype, strides, order, stream)
    shape = _normalize_shape(shape)
    if strides is None and order == "F":
        strides = tuple(s * dtype.itemsize for s in
                        reversed(zarrays.c_strides(tuple(reversed(shape)))))
    return DeviceNDArray.allocate(shape, dtype, strides, stream)


def device_array_like(ary, stream=0):
    """A device array of `ary`'s shape, dtype and layout (C or Fortran order kept)."""
    order = "F" if _is_f_only(ary) else "C"
    return device_array(np.shape(ary), _dtype_of(ary), order=order, stream=stream)


def from_array_like(ary, stream=0, gpu_data=None):
    """numba's: an uninitialized device array shaped like `ary` (its strides kept)."""
    return device_array_like(ary, stream=stream)


def _dtype_of(ary):
    return np.dtype(ary.dtype) if hasattr(ary, "dtype") else np.asarray(ary).dtype


def _is_f_only(ary) -> bool:
    if isinstance(ary, DeviceNDArray):
        return ary.is_f_contiguous() and not ary.is_c_contiguous()
    flags = getattr(ary, "flags", None)
    return bool(flags is not None and flags.f_contiguous and not flags.c_contiguous)


def to_device(obj, stream=0, copy=True, to=None):
    """A device array holding a copy of `obj` (numba's `cuda.to_device`); with `to`, copy into
    that device array instead; `copy=False` allocates without copying."""
    if to is not None:
        to.copy_to_device(obj, stream=stream)
        return to
    if is_cuda_array(obj) and not isinstance(obj, np.ndarray):
        return as_cuda_array(obj)
    host = np.asarray(obj)
    if not host.dtype.isnative:
        host = host.astype(host.dtype.newbyteorder("="))
    out = device_array_like(host, stream=stream)
    if copy:
        out.copy_to_device(host, stream=stream)
    return out


def auto_device(obj, stream=0, copy=True, user_explicit=False):
    """numba's: `(device array, converted)`: a device array as it is (`converted` False), else a
    copy of the contiguous host data `obj` (a number or sequence too) on the device."""
    if is_device_array(obj) or (is_cuda_array(obj) and not isinstance(obj, np.ndarray)):
        return as_cuda_array(obj), False
    host = np.asarray(obj)
    if host.ndim and not (host.flags.c_contiguous or host.flags.f_contiguous):
        raise ValueError("auto_device: the array is not contiguous; copy it first "
                         "(np.ascontiguousarray)")
    return to_device(host, stream=stream, copy=copy), True


def _host_array(shape, dtype, strides=None, order="C"):
    shape = _normalize_shape(shape)
    dtype = np.dtype(dtype)
    if strides is not None:
        base = np.empty(_extent(shape, strides, dtype.itemsize), np.uint8)
        return np.ndarray(shape, dtype, base, 0, strides)
    return np.empty(shape, dtype, order=order)


def warn_if_host_copy(kernel, args) -> None:
    """Where there is no GPU, numba's CUDA_WARN_ON_IMPLICIT_COPY warning for a launch given
    host memory a GPU launch would copy in and back (NumPy and pinned arrays; not device,
    mapped or managed arrays), so that code is told what costs it time on a GPU."""
    for value in args:
        if isinstance(value, np.ndarray) and not isinstance(value, HostDeviceNDArray) \
                and not hasattr(value, "__cuda_array_interface__"):
            zlaunch.warn_host_copy(kernel, stacklevel=3)
            return


def pinned_array(shape, dtype=np.float64, strides=None, order="C"):
    """A host array for fast copies (numba's page-locked memory; zymo gives ordinary host
    memory: copies are correct, not overlapped with kernels)."""
    return _host_array(shape, dtype, strides, order)


def pinned_array_like(ary):
    return pinned_array(np.shape(ary), _dtype_of(ary), order="F" if _is_f_only(ary) else "C")


def mapped_array(shape, dtype=np.float64, strides=None, order="C", stream=0, portable=False,
                 wc=False):
    """Host memory kernels read and write directly. Without a GPU, a host device array; on a
    GPU, managed memory (the host and the device both address it)."""
    if not mode.on_gpu():
        return _host(shape, dtype, strides, order, stream)
    return _managed(shape, dtype, strides, order, stream)


def mapped_array_like(ary, stream=0, portable=False, wc=False):
    return mapped_array(np.shape(ary), _dtype_of(ary), order="F" if _is_f_only(ary) else "C",
                        stream=stream, portable=portable, wc=wc)


def managed_array(shape, dtype=np.float64, strides=None, order="C", stream=0,
                  attach_global=True):
    """Memory the host and the device both address (CUDA managed memory on a GPU)."""
    if not mode.on_gpu():
        return _host(shape, dtype, strides, order, stream)
    return _managed(shape, dtype, strides, order, stream)


class ManagedNDArray(np.ndarray):
    """A host view of managed memory that launches take as a GPU array."""

    stream = 0    # as HostDeviceNDArray's

    __array_finalize__ = HostDeviceNDArray.__array_finalize__

    @property
    def __cuda_array_interface__(self) -> dict:
        contiguous = self.flags.c_contiguous
        return {"shape": self.shape, "typestr": self.dtype.str,
                "data": (self.__array_interface__["data"][0], False),
                "strides": None if contiguous else self.strides, "version": 3,
                "stream": _interface_stream(self.stream)}

    def copy_to_host(self, ary=None, stream=0):
        from ...runtime.cuda.driver import synchronize
        synchronize()
        if ary is None:
            return np.array(self, copy=True, subok=False)
        np.copyto(_check_like(ary, self), self.view(np.ndarray))
        return ary


def _managed(shape, dtype, strides, order, stream=0):
    from ...runtime.cuda.driver import bindings, call, current_device
    shape, dtype = _normalize_shape(shape), np.dtype(dtype)
    if strides is None:
        strides = tuple(s * dtype.itemsize for s in zarrays.c_strides(shape)) if order == "C" \
            else tuple(s * dtype.itemsize for s in
                       reversed(zarrays.c_strides(tuple(reversed(shape)))))
    nbytes = max(_extent(shape, strides, dtype.itemsize), 1)
    current_device()
    drv = bindings()
    pointer = int(call(drv.cuMemAllocManaged, nbytes,
                       int(drv.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL), name="cuMemAllocManaged"))
    import ctypes
    buffer = (ctypes.c_uint8 * nbytes).from_address(pointer)
    out = np.ndarray(shape, dtype, buffer, 0, strides).view(ManagedNDArray)
    if _has_stream(stream):
        out.stream = stream
    zarrays.LIVE["allocations"] += 1
    zarrays.LIVE["bytes"] += nbytes
    weakref.finalize(buffer, zarrays._free, pointer, nbytes)
    return out


@contextlib.contextmanager
def pinned(*arylist):
    """numba's `cuda.pinned(*arrays)`: page-locks the arrays within it. zymo copies from
    ordinary host memory, so nothing needs doing: the copies are correct either way."""
    yield


@contextlib.contextmanager
def mapped(*arylist, **kws):
    """numba's `cuda.mapped(*arrays)`: yields device arrays standing for the host arrays;
    what kernels write is copied back when the block ends."""
    devices = [to_device(a) for a in arylist]
    try:
        yield devices[0] if len(devices) == 1 else devices
    finally:
        for host, device in zip(arylist, devices):
            if device is not host:
                device.copy_to_host(host)


# ---- GPU arrays of any library ----------------------------------------------------------------
def is_cuda_array(obj) -> bool:
    """Whether `obj` is a device array: it exposes `__cuda_array_interface__` (and, without a
    GPU, zymo.cuda's host device arrays)."""
    if isinstance(obj, HostDeviceNDArray):
        return True
    return hasattr(obj, "__cuda_array_interface__")


def is_device_array(obj) -> bool:
    return isinstance(obj, (DeviceNDArray, HostDeviceNDArray))


def as_cuda_array(obj, sync=True):
    """A device array viewing the memory of `obj` (anything with `__cuda_array_interface__`),
    without copying."""
    if isinstance(obj, (DeviceNDArray, HostDeviceNDArray)):
        return obj
    if not is_cuda_array(obj):
        raise TypeError("as_cuda_array: the object has no __cuda_array_interface__")
    return from_cuda_array_interface(obj.__cuda_array_interface__, owner=obj, sync=sync)


def from_cuda_array_interface(desc, owner=None, sync=True):
    """A device array viewing the memory `desc` (a `__cuda_array_interface__` dict) names."""
    if desc.get("version", 0) >= 1 and desc.get("mask") is not None:
        raise NotImplementedError("Masked arrays are not supported (__cuda_array_interface__ "
                                  "'mask'): pass the data and the mask as two arrays")
    stream = _imported_stream(desc, sync)
    shape, dtype = tuple(desc["shape"]), np.dtype(desc["typestr"])
    strides = desc.get("strides") or tuple(s * dtype.itemsize for s in zarrays.c_strides(shape))
    pointer = desc["data"][0] or 0
    if not mode.on_gpu():    # host memory: a NumPy view of it
        import ctypes
        size = _extent(shape, strides, dtype.itemsize)
        buffer = (ctypes.c_uint8 * max(size, 1)).from_address(pointer) if pointer else \
            np.empty(0, np.uint8)
        view = np.ndarray(shape, dtype, buffer, 0, strides).view(HostDeviceNDArray)
        view._owner = owner
        if _has_stream(stream):
            view.stream = stream
        return view
    keeper = _Borrowed(owner)
    return DeviceNDArray._view(keeper, pointer, shape, strides, dtype, stream)


def _imported_stream(desc, sync: bool):
    """The stream an interface names (an external stream; 0 for none), synchronized first
    when `sync` and config.CUDA_ARRAY_INTERFACE_SYNC say so: the producer may still be
    writing the memory on it."""
    handle = desc.get("stream")
    if handle is None:
        return 0
    from ..core import config
    from .driver import external_stream
    stream = external_stream(handle)
    if sync and config.CUDA_ARRAY_INTERFACE_SYNC:
        stream.synchronize()
    return stream


def _is_foreign(value) -> bool:
    """Whether `value` is an array of another library (it has a __cuda_array_interface__ and
    is none of zymo's arrays)."""
    if isinstance(value, (np.ndarray, zarrays.DeviceArray)):
        return False
    try:
        return getattr(value, "__cuda_array_interface__", None) is not None
    except RuntimeError:   # (a PyTorch tensor that requires grad refuses to export itself)
        return False


def foreign_arrays_for_launch(args, stream):
    """A launch's arguments as numba takes other libraries' arrays: the stream each one's
    interface names is synchronized first (CUDA_ARRAY_INTERFACE_SYNC), and without a GPU they
    are viewed as host device arrays (their memory is host memory there). On a GPU the
    launch reads them as they are, and a legacy-default-stream array (stream 1) given to a
    launch on that stream needs no wait: the stream orders the two."""
    if not mode.on_gpu():
        return import_foreign_arrays(args)
    from ..core import config
    if config.CUDA_ARRAY_INTERFACE_SYNC:
        from .driver import external_stream
        legacy = _is_legacy_stream(stream)
        for value in args:
            if _is_foreign(value):
                handle = value.__cuda_array_interface__.get("stream")
                if handle is not None and not (handle == 1 and legacy):
                    external_stream(handle).synchronize()
    return args


def _is_legacy_stream(stream) -> bool:
    if stream is None:
        return True
    try:
        return int(stream) in (0, 1)
    except TypeError:
        return False


def import_foreign_arrays(args) -> list:
    """numba's treatment of other libraries' arrays given to a launch or a ufunc: each is
    viewed as a device array through its __cuda_array_interface__, which synchronizes the
    stream the interface names (CUDA_ARRAY_INTERFACE_SYNC)."""
    return [as_cuda_array(a) if _is_foreign(a) else a for a in args]


class _Borrowed:
    """The owner of memory another library allocated: kept alive with the views."""

    def __init__(self, owner):
        from ...runtime.cuda.driver import current_device
        self.owner, self.device = owner, current_device()
        self.nbytes = 0


def require_context(fn):
    return fn
