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
    if spec is complex:
        return Param("value", T.c128)
    return param_of_arg(spec)
