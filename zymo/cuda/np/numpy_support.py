"""NumPy dtypes to numba's types (`zymo.cuda.types`) and back."""
from __future__ import annotations

import numpy as np

from ...lang.intrinsics import Intrinsic
from .. import types

numpy_version = tuple(int(part) for part in np.__version__.split(".")[:2])


def from_dtype(dtype) -> types.Type:
    """The numba type of a NumPy dtype: a number type, or a `Record` for a structured dtype."""
    dtype = np.dtype(dtype)
    if dtype.names:
        return types.Record(dtype)
    return types.from_dtype(dtype)


def as_dtype(nbtype) -> np.dtype:
    """The NumPy dtype of a numba number or record type."""
    if isinstance(nbtype, (types.Number, types.Record)):
        return nbtype.dtype
    if isinstance(nbtype, type) and issubclass(nbtype, np.generic):
        return np.dtype(nbtype)
    from ..extending import model_of
    model = model_of(nbtype)
    if model is not None and hasattr(model, "dtype"):   # an extension type's StructModel
        return model.dtype()
    raise TypeError(f"{nbtype!r} has no NumPy dtype: as_dtype takes number and record types")


class _PointerArray(Intrinsic):
    """numba's `carray` / `farray`: the memory at a pointer as an array of `shape` (C or
    Fortran order), on the host (a NumPy view) and in kernels (zymo/frontend/foreign.py)."""

    def __init__(self, order: str):
        super().__init__("carray" if order == "C" else "farray")
        self.order = order

    def __call__(self, ptr, shape, dtype=None):
        import ctypes
        if isinstance(ptr, int):
            address = ptr
        elif isinstance(ptr, ctypes._Pointer):
            address = ctypes.cast(ptr, ctypes.c_void_p).value or 0
            if dtype is None:
                dtype = np.ctypeslib.as_array(ptr, (1,)).dtype
        else:
            raise TypeError(f"{self.path}: a pointer is an int address or a ctypes pointer, "
                            f"not {type(ptr).__name__}")
        if dtype is None:
            raise TypeError(f"{self.path}(address, shape): give dtype=")
        dtype = as_dtype(dtype) if not isinstance(dtype, (np.dtype, str)) else np.dtype(dtype)
        shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)
        size = int(np.prod(shape)) * dtype.itemsize
        memory = (ctypes.c_uint8 * max(size, 1)).from_address(address)
        return np.ndarray(shape, dtype, memory, order=self.order)


carray = _PointerArray("C")
farray = _PointerArray("F")
