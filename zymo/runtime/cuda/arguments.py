"""The `Param` of a launch argument (a NumPy or GPU array, a NumPy scalar, a Python number) or
of a type given to `specialize`: here, below the kernels, since the CUDA launcher checks too."""
from __future__ import annotations

import numpy as np

from ...diagnostics import LaunchError
from ...ir import types as T
from ...ir.types import Array, Scalar, is_small
from ...lang.params import Param
from .arrays import gpu_array_param


def param_of_arg(value) -> Param:
    """How a launch argument is passed, from its Python/NumPy type."""
    if isinstance(value, tuple):
        return Param("tuple", None, tuple(param_of_arg(item) for item in value),
                     getattr(value, "_fields", None))
    if isinstance(value, np.ndarray) and value.dtype.names:
        return Param("record", None, tuple(param_of_arg(field) for field in
                                           record_fields(value)), value.dtype.names)
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


def record_fields(array: np.ndarray) -> list[np.ndarray]:
    """An array of records as one strided view per field (how a launch passes it)."""
    fields = []
    for name in array.dtype.names:
        dtype, offset = array.dtype.fields[name][:2]
        if dtype.names or dtype.subdtype is not None:
            raise LaunchError(f"field '{name}' of a record array is itself a record or an "
                              f"array ({dtype}); kernels read fields of numbers")
        if offset % dtype.itemsize or array.dtype.itemsize % dtype.itemsize:
            raise LaunchError(f"field '{name}' ({dtype}) of the record dtype {array.dtype} is "
                              f"not aligned to its size\nhint: make the dtype with "
                              f"np.dtype(..., align=True)")
        fields.append(array[name])
    return fields


def flatten_arg(value) -> list:
    """The leaf arguments a launch passes for `value` (a tuple's items, a record array's
    fields, recursively; anything else itself)."""
    if isinstance(value, tuple):
        return [leaf for item in value for leaf in flatten_arg(item)]
    if isinstance(value, np.ndarray) and value.dtype.names:
        return record_fields(value)
    return [value]


def is_composite(value) -> bool:
    return isinstance(value, tuple) or (isinstance(value, np.ndarray)
                                        and value.dtype.names is not None)


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
