"""numba's `typeof(value)`: the numba type (zymo.cuda.types) a value is passed to a kernel as."""
from __future__ import annotations

import numpy as np

from .. import types


def typeof(value, purpose=None) -> types.Type:
    """Python bool/int/float/complex: boolean, int64, float64, complex128; NumPy scalars: their
    type; NumPy and device arrays: `Array(dtype, ndim, layout)` (layout "C", "F" or "A"), or
    a Record array; None: none."""
    if value is None:
        return types.none
    if isinstance(value, (bool, np.bool_)):
        return types.boolean
    if isinstance(value, int):
        return types.int64
    if isinstance(value, float):
        return types.float64
    if isinstance(value, complex):
        return types.complex128
    if isinstance(value, np.generic):
        return types.from_dtype(value.dtype)
    if isinstance(value, np.ndarray) or hasattr(value, "__cuda_array_interface__"):
        from ..np.numpy_support import from_dtype
        array = value if isinstance(value, np.ndarray) else np.empty(0, value.dtype)
        flags = value.flags if isinstance(value, np.ndarray) else None
        layout = "A"
        if flags is not None:
            layout = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
        return types.Array(from_dtype(array.dtype), value.ndim, layout)
    from ..extending import typeof_registered
    registered = typeof_registered(value)
    if registered is not None:
        return registered
    raise ValueError(f"no numba type for a value of type {type(value).__name__}: kernels take "
                     f"numbers, NumPy scalars and arrays, device arrays")
