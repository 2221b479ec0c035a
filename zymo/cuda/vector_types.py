"""numba's CUDA vector types: `cuda.float32x4`, `cuda.int32x2`, ... for each integer and float
base type numba has and 1 to 4 elements, with the names of CUDA C's (`float4`, `int2`,
`ulonglong3`) as aliases of the same objects.

In kernels, `cuda.float32x4(a, b, c, d)` makes a vector whose elements are read as `v.x`,
`v.y`, `v.z`, `v.w`; numbers and smaller vectors of the same base type build bigger ones,
`float32x4(float32x2(a, b), c, d)` (the frontend's `frontend/vectors.py` lowers them).
`vector_types` maps each type's name to its numba-style type object.
"""
from __future__ import annotations

import numpy as np

from . import types as nt

BASE_NAMES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float32", "float64")
ATTR_NAMES = ("x", "y", "z", "w")

# CUDA C's element names, as wide as the C types are on this machine (`long` is 64 bits on
# Linux, 32 on Windows)
C_NAMES = {"char": np.byte, "short": np.short, "int": np.intc, "long": np.int_,
           "longlong": np.longlong, "uchar": np.ubyte, "ushort": np.ushort, "uint": np.uintc,
           "ulong": np.uint, "ulonglong": np.ulonglong, "float": np.single, "double": np.double}


class VectorConstructor:
    """What a kernel calls to make a vector (`cuda.float4(...)`, numba's user-facing object);
    `aliases` are its other names in `zymo.cuda`."""

    def __init__(self, name: str, base_type: nt.Number, count: int):
        self.__name__ = self.__qualname__ = name
        self.aliases: list[str] = []
        # read by the frontend (frontend/vectors.py): what the constructor makes
        self.zymo_vector = (name, base_type.zymo_type, count)

    def __call__(self, *args):
        raise RuntimeError(f"cuda.{self.__name__}(...) makes a vector inside kernels only")

    def __repr__(self) -> str:
        return f"<CUDA vector type {self.__name__}>"


class VectorType:
    """numba's type of a vector: `name` ("float32x4"), `base_type` (float32), `attr_names`
    ("x", "y", "z", "w"), `user_facing_object` (the constructor `cuda.float32x4`)."""

    def __init__(self, name: str, base_type: nt.Number, attr_names: tuple[str, ...],
                 user_facing_object: VectorConstructor):
        self.name = name
        self.base_type = base_type
        self.attr_names = attr_names
        self.user_facing_object = user_facing_object

    @property
    def num_elements(self) -> int:
        return len(self.attr_names)

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


def _build() -> dict[str, VectorType]:
    found = {}
    for base_name in BASE_NAMES:
        base = getattr(nt, base_name)
        for count in range(1, len(ATTR_NAMES) + 1):
            name = f"{base_name}x{count}"
            found[name] = VectorType(name, base, ATTR_NAMES[:count],
                                     VectorConstructor(name, base, count))
    for c_name, scalar in C_NAMES.items():
        base_name = np.dtype(scalar).name
        for count in range(1, len(ATTR_NAMES) + 1):
            found[f"{base_name}x{count}"].user_facing_object.aliases.append(f"{c_name}{count}")
    return found


vector_types: dict[str, VectorType] = _build()


def user_facing_names() -> dict[str, VectorConstructor]:
    """Every name `zymo.cuda` gives a vector type's constructor: its own and its aliases."""
    names = {}
    for vty in vector_types.values():
        names[vty.name] = vty.user_facing_object
        for alias in vty.user_facing_object.aliases:
            names[alias] = vty.user_facing_object
    return names
