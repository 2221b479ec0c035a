"""NumPy dtypes to numba's types (`zymo.cuda.types`) and back."""
from __future__ import annotations

import numpy as np

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
    raise TypeError(f"{nbtype!r} has no NumPy dtype: as_dtype takes number and record types")
