"""DLPack through ctypes: read the tensor a producer (JAX, PyTorch, CuPy) hands out as a capsule,
and export `zm.DeviceArray` as one, so no C extension is needed on either side.

Structs follow dlpack.h (the unversioned `DLManagedTensor`, which every consumer still takes).
"""
from __future__ import annotations

import ctypes

import numpy as np

from ...diagnostics import LaunchError

CUDA, CUDA_HOST, CUDA_MANAGED = 2, 3, 13
GPU_DEVICE_TYPES = (CUDA, CUDA_MANAGED)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _Deleter)]

_api = ctypes.pythonapi
# prototypes of our own: `ctypes.pythonapi.X` objects are shared by every module of the process,
# and other libraries (JAX's jax.ffi) set their argtypes to something else
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", _api))
# The capsule destructor sees a capsule being freed: these take it as a plain address, never a
# py_object (which would touch its reference count). PYFUNCTYPE keeps the GIL held.
_raw = ctypes.PYFUNCTYPE
_capsule_is_valid = _raw(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_capsule_pointer = _raw(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))

_CODES = {0: "i", 1: "u", 2: "f", 6: "b"}          # DLDataTypeCode -> NumPy kind
_KINDS = {"i": 0, "u": 1, "f": 2, "b": 6}
_NAME = b"dltensor"


def read(value, stream: int | None = None):
    """(dtype, shape, element strides or None for C order, data pointer, (device type, id)) of
    an object with `__dlpack__`. The capsule is not consumed: its destructor gives the
    producer's reference back, while `value` itself keeps the memory alive."""
    capsule = value.__dlpack__() if stream is None else value.__dlpack__(stream=stream)
    address = _get_pointer(capsule, _NAME)
    if not address:
        raise LaunchError(f"{type(value).__name__}.__dlpack__ returned no DLPack tensor")
    tensor = DLManagedTensor.from_address(address).dl_tensor
    kind, bits, lanes = _CODES.get(tensor.dtype.code), tensor.dtype.bits, tensor.dtype.lanes
    if kind is None or lanes != 1:
        raise LaunchError(f"DLPack data type (code {tensor.dtype.code}, {bits} bits, {lanes} "
                          f"lanes) is not supported")
    dtype = np.dtype(bool) if kind == "b" else np.dtype(f"{kind}{bits // 8}")
    ndim = tensor.ndim
    shape = tuple(tensor.shape[k] for k in range(ndim))
    strides = tuple(tensor.strides[k] for k in range(ndim)) if tensor.strides else None
    data = (tensor.data or 0) + tensor.byte_offset
    device = (tensor.device.device_type, tensor.device.device_id)
    del capsule
    return dtype, shape, strides, data, device


# ---- export -------------------------------------------------------------------------------
_live: dict[int, tuple] = {}    # struct address -> what must outlive the consumer's use


@_Deleter
def _delete(managed) -> None:
    _live.pop(ctypes.addressof(managed.contents), None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule) -> None:
    # A consumer renames the capsule "used_dltensor" and calls the deleter itself; a capsule
    # still named "dltensor" was never consumed and still holds our tensor.
    if _capsule_is_valid(capsule, _NAME):
        _live.pop(_capsule_pointer(capsule, _NAME), None)


def export(owner, data: int, dtype: np.dtype, shape: tuple, device_id: int):
    """A "dltensor" capsule over C-contiguous device memory; `owner` stays alive until the
    consumer calls the deleter (or the capsule is dropped unconsumed)."""
    ndim = len(shape)
    shape_array = (ctypes.c_int64 * max(ndim, 1))(*shape)
    managed = DLManagedTensor()
    tensor = managed.dl_tensor
    tensor.data = data or None
    tensor.device = DLDevice(CUDA, device_id)
    tensor.ndim = ndim
    tensor.dtype = DLDataType(_KINDS[dtype.kind], dtype.itemsize * 8, 1)
    tensor.shape = ctypes.cast(shape_array, ctypes.POINTER(ctypes.c_int64))
    tensor.strides = None          # NULL: compact row-major
    tensor.byte_offset = 0
    managed.deleter = _delete
    address = ctypes.addressof(managed)
    _live[address] = (managed, shape_array, owner)
    destructor = ctypes.cast(_capsule_destructor, ctypes.c_void_p).value
    return _new_capsule(address, _NAME, destructor)
