"""The `Param` of a launch argument (a NumPy or GPU array, a NumPy scalar, a Python number) or
of a type given to `specialize`: here, below the kernels, since the CUDA launcher checks too."""
from __future__ import annotations

import enum

import numpy as np

from ...diagnostics import LaunchError
from ...ir import types as T
from ...ir.types import Array, Scalar, is_small
from ...lang.params import Param, Records
from .arrays import array_info, c_strides, gpu_array_param, is_gpu_array


def param_of_arg(value) -> Param:
    """How a launch argument is passed, from its Python/NumPy type."""
    if isinstance(value, enum.Enum):   # its value, the kernel knowing its class
        return Param("enum", type(value), (param_of_arg(value.value),))
    if isinstance(value, tuple):
        return Param("tuple", None, tuple(param_of_arg(item) for item in value),
                     getattr(value, "_fields", None))
    if is_record(value):
        scalar = isinstance(value, np.void)
        array = record_view(value) if scalar else value
        fields = record_fields(array)
        return Param("record", Records(array.ndim, scalar, _subshapes(array.dtype),
                                              array.dtype),
                     tuple(_field_param(field) for field in fields), array.dtype.names)
    if is_chars(value):
        return Param("chars", np.dtype(value.dtype), (param_of_arg(chars_view(value)),))
    if isinstance(value, np.ndarray):
        layout = "C" if value.flags.c_contiguous else "A"
        try:
            dtype = T.scalar_of_dtype(value.dtype)
        except KeyError:
            raise LaunchError(f"arrays of {value.dtype} are not supported") from None
        return Param("array", Array(dtype, value.ndim, "global", layout,
                                    small=is_small(value.size, layout == "C")))
    if isinstance(value, (bool, np.bool_)):
        return Param("value", T.bool_)
    if isinstance(value, np.generic):
        return Param("value", T.scalar_of_dtype(value.dtype))
    if isinstance(value, int):
        if not -2**63 <= value < 2**63:
            raise LaunchError(f"the integer argument {value} is beyond int64, the widest integer "
                              f"a kernel takes\nhint: pass it as a float, or as several int64 "
                              f"parts")
        # weakly typed, like a literal, where every integer type holds it; a value beyond
        # int32 is int64 outright, so that meeting an i32 it promotes instead of wrapping
        return Param("weak" if -2**31 <= value < 2**31 else "value", T.i64)
    if isinstance(value, float):
        return Param("weak", T.f64)
    if isinstance(value, complex):   # as numba: a Python complex is complex128
        return Param("value", T.c128)
    param = gpu_array_param(value)
    if param is not None:
        return param
    raise LaunchError(f"unsupported kernel argument of type {type(value).__name__}: pass NumPy "
                      f"arrays, GPU arrays, NumPy scalars or Python numbers")


# How far a raw pointer (numba's CPointer parameter) is taken to reach: its extent is unknown,
# so it is described as an array of this many bytes, which the launch's overlap checks see
# overlapping every other argument (no `noalias` is assumed for such a launch).
RAW_POINTER_BYTES = 1 << 40


class _RawMemory:
    """Memory at a raw address, as an array interface of RAW_POINTER_BYTES."""

    def __init__(self, address: int, dtype: np.dtype):
        interface = {"shape": (RAW_POINTER_BYTES // dtype.itemsize,), "typestr": dtype.str,
                     "data": (address, False), "version": 3, "strides": None}
        self.__cuda_array_interface__ = self.__array_interface__ = interface


def pointer_argument(value, t: Array, backend: str):
    """The array a launch passes for `value`, an address given where the kernel takes a
    `CPointer` (a GPU address on "cuda", a host address on "cpu"): the launch takes it as
    an array argument of unknown extent."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise LaunchError(f"a CPointer({t.dtype}) parameter takes an address (an int), not "
                          f"{type(value).__name__}: pass e.g. "
                          f"array.__cuda_array_interface__['data'][0]")
    if backend not in ("cuda", "cpu"):
        raise LaunchError(f"raw pointers run on the GPU and the CPU backend, not {backend}: "
                          f"pass the array itself to a kernel typed {t.dtype}[::1]")
    memory = _RawMemory(int(value), t.dtype.dtype)
    return memory if backend == "cuda" else np.asarray(memory)


def is_record(value) -> bool:
    """An array of records (a structured dtype: in host or GPU memory) or one NumPy record."""
    if isinstance(value, (np.ndarray, np.void)):
        return value.dtype.names is not None
    dtype = getattr(value, "dtype", None)    # device arrays and CuPy's keep NumPy dtypes
    return isinstance(dtype, np.dtype) and dtype.names is not None and is_gpu_array(value)


class _FieldMemory:
    """One field of a record array in GPU memory, as a strided GPU array over the records'
    memory (it keeps the record array alive)."""

    def __init__(self, owner, data: int, shape: tuple, strides: tuple, dtype: np.dtype):
        self.owner, self.dtype, self.shape, self.strides = owner, dtype, shape, strides
        self.__cuda_array_interface__ = {"shape": shape, "typestr": dtype.str, "version": 3,
                                         "data": (data, False), "strides": strides}


class _GpuField:
    """A GPU field view as an array of strings (what chars_view takes)."""

    def __init__(self, view: "_FieldMemory", dtype: np.dtype):
        self.dtype = dtype
        self.__cuda_array_interface__ = dict(view.__cuda_array_interface__,
                                             typestr=dtype.str)
        self.owner = view


def _gpu_fields(array) -> list[tuple[str, object]]:
    """(name, strided view) of each field of a record array in GPU memory: the field's bytes
    at its offset in every record; a field that is an array of numbers adds its axes."""
    dtype = array.dtype
    info = array_info(array)
    record_strides = tuple(s * dtype.itemsize for s in info.strides)
    fields = []
    for name in dtype.names:
        field, offset = dtype.fields[name][:2]
        base = field.base if field.subdtype is not None else field
        inner, step = [], base.itemsize
        for extent in reversed(field.shape):
            inner.insert(0, step)
            step *= extent
        fields.append((name, _FieldMemory(array, info.data + offset, info.shape + field.shape,
                                          record_strides + tuple(inner), base)))
    return fields


class _RecordMemory:
    """The memory of one NumPy record as a one-record array interface, keeping its owner
    alive."""

    def __init__(self, record: np.void):
        self.owner = record.base if record.base is not None else record
        readonly = np.asarray(memoryview(record))   # the record's own bytes, not a copy
        self.__array_interface__ = {"shape": (1,), "typestr": "|V%d" % record.dtype.itemsize,
                                    "version": 3, "data": (readonly.ctypes.data, False)}


def record_view(record: np.void) -> np.ndarray:
    """A NumPy record (`a[0]` of a record array) as a one-record array over the same memory,
    so that a kernel writing its fields writes the record (as numba's record arguments do)."""
    return np.asarray(_RecordMemory(record)).view(record.dtype)


def _subshapes(dtype: np.dtype) -> tuple:
    """Each field's shape inside one record; a string field's characters are an axis."""
    shapes = []
    for name in dtype.names:
        field = dtype.fields[name][0]
        chars = field.kind in "SU" and field.subdtype is None
        shapes.append((field.itemsize // char_dtype(field).itemsize,) if chars else field.shape)
    return tuple(shapes)


def _field_param(field) -> Param:
    """A field's strided array, typed with the alignment its elements really have: a packed
    dtype or a complex field at a 4-byte offset is loaded and stored piecewise."""
    param = param_of_arg(field)
    natural = field.dtype.itemsize
    align = natural
    address = field.ctypes.data if isinstance(field, np.ndarray) else \
        field.__cuda_array_interface__["data"][0]
    for step in (address, *field.strides):
        while align > 1 and step % align:
            align //= 2
    if align != natural:
        t = param.type
        param = Param("array", Array(t.dtype, t.ndim, t.space, t.layout, small=t.small,
                                     align=align))
    return param


def record_fields(array) -> list[np.ndarray]:
    """An array of records (or one record) as one strided view per field (how a launch
    passes it); a field that is an array of numbers, `('j', 'f4', (3, 2))`, adds its
    dimensions after the records'."""
    if isinstance(array, np.void):
        array = record_view(array)
    views = dict(_gpu_fields(array)) if not isinstance(array, np.ndarray) else None
    fields = []
    for name in array.dtype.names:
        dtype = array.dtype.fields[name][0]
        base = dtype.base if dtype.subdtype is not None else dtype
        if base.names:
            raise LaunchError(f"field '{name}' of the record dtype {array.dtype} is itself a "
                              f"record; kernels read fields of numbers and arrays of numbers"
                              f"\nhint: flatten the nested record into the outer one")
        if base.kind in "SU" and dtype.subdtype is None:     # its characters, one axis more
            field = chars_view(array[name] if views is None else _GpuField(views[name], base))
            base = char_dtype(base)
        else:
            try:
                T.scalar_of_dtype(base)
            except KeyError:
                raise LaunchError(f"field '{name}' of the record dtype {array.dtype} is "
                                  f"{base}, which kernels do not take") from None
            field = array[name] if views is None else views[name]
        if any(s % base.itemsize for s in field.strides):
            raise LaunchError(f"field '{name}' ({base}) of the record dtype {array.dtype} is "
                              f"{array.dtype.itemsize} bytes apart from record to record, not a "
                              f"multiple of its size {base.itemsize}: kernels step through "
                              f"arrays in whole elements\nhint: make the dtype with "
                              f"np.dtype(..., align=True), or pad the record")
        fields.append(field)
    return fields


def is_chars(value) -> bool:
    """An array of NumPy strings: bytes (`S12`) or unicode (`U12`), in host or GPU memory."""
    dtype = getattr(value, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype.kind in "SU" and \
        (isinstance(value, np.ndarray) or is_gpu_array(value))


def char_dtype(dtype: np.dtype) -> np.dtype:
    """The type of one character of a string dtype: a byte, or a UCS-4 code point."""
    return np.dtype(np.uint8) if dtype.kind == "S" else np.dtype("<u4")


def chars_view(array):
    """An array of strings as an array of their characters, one axis more (the string's
    length, as NumPy lays them out: zero-padded), over the same memory."""
    char = char_dtype(array.dtype)
    length = array.dtype.itemsize // char.itemsize
    if isinstance(array, np.ndarray):
        return array[..., np.newaxis].view(char)
    interface = array.__cuda_array_interface__   # byte strides: a field's need not divide
    shape = tuple(interface["shape"])
    strides = interface.get("strides") or tuple(
        step * array.dtype.itemsize for step in c_strides(shape))
    return _FieldMemory(array, interface["data"][0], shape + (length,),
                        tuple(strides) + (char.itemsize,), char)


def flatten_arg(value) -> list:
    """The leaf arguments a launch passes for `value` (a tuple's items, a record array's
    fields, recursively; an enum member's value; anything else itself)."""
    if isinstance(value, enum.Enum):
        return flatten_arg(value.value)
    if isinstance(value, tuple):
        return [leaf for item in value for leaf in flatten_arg(item)]
    if is_record(value):
        return record_fields(value)
    if is_chars(value):
        return [chars_view(value)]
    return [value]


def is_composite(value) -> bool:
    return isinstance(value, (tuple, enum.Enum)) or is_record(value) or is_chars(value)


def param_of_spec(spec) -> Param:
    """A Param from a type given to `specialize` (or an example argument)."""
    if isinstance(spec, Param):
        return spec
    if isinstance(spec, Array):
        return Param("array", spec)
    if isinstance(spec, Scalar):
        return Param("value", spec)
    if spec is float:
        return Param("weak", T.f64)
    if spec is int:
        return Param("weak", T.i64)
    if isinstance(spec, tuple):
        return Param("tuple", None, tuple(param_of_spec(item) for item in spec),
                     getattr(spec, "_fields", None))
    if spec is complex:
        return Param("value", T.c128)
    return param_of_arg(spec)
