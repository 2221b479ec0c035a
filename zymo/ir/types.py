"""IR types: scalars, arrays (with address space and layout) and function signatures."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class Type:
    """Base of every IR type; types are frozen values compared by content."""


@dataclass(frozen=True)
class Scalar(Type):
    name: str
    kind: str  # "f" float, "c" complex, "i" signed int, "u" unsigned int, "b" bool
    bits: int

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"zm.{self.name}"

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_complex(self) -> bool:
        return self.kind == "c"

    @property
    def part(self) -> "Scalar":
        """The float type of a complex type's real and imaginary parts."""
        return {"c64": f32, "c128": f64}[self.name]

    @property
    def is_int(self) -> bool:
        return self.kind in ("i", "u")

    @property
    def is_signed(self) -> bool:
        return self.kind == "i"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(_NUMPY_NAMES[self.name])

    @property
    def nbytes(self) -> int:
        return 1 if self.kind == "b" else self.bits // 8

    def __call__(self, value):
        """Outside kernels a type converts a Python number like a NumPy scalar type does."""
        return self.dtype.type(value)


f16 = Scalar("f16", "f", 16)
f32 = Scalar("f32", "f", 32)
f64 = Scalar("f64", "f", 64)
i8 = Scalar("i8", "i", 8)
i16 = Scalar("i16", "i", 16)
i32 = Scalar("i32", "i", 32)
i64 = Scalar("i64", "i", 64)
u8 = Scalar("u8", "u", 8)
u16 = Scalar("u16", "u", 16)
u32 = Scalar("u32", "u", 32)
u64 = Scalar("u64", "u", 64)
bool_ = Scalar("bool", "b", 1)
# complex values are (real, imaginary) pairs of f32 or f64, laid out as NumPy's complex64/128
c64 = Scalar("c64", "c", 64)
c128 = Scalar("c128", "c", 128)

SCALARS = (f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool_, c64, c128)
FLOATS = (f32, f64)
INTS = (i8, i16, i32, i64, u8, u16, u32, u64)
_NUMPY_NAMES = {
    "f16": "float16", "f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16",
    "i32": "int32", "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32",
    "u64": "uint64", "bool": "bool", "c64": "complex64", "c128": "complex128",
}
_BY_DTYPE = {np.dtype(v): s for s in SCALARS for k, v in _NUMPY_NAMES.items() if k == s.name}


@dataclass(frozen=True)
class Time(Scalar):
    """NumPy's datetime64[unit] (`delta` False) or timedelta64[unit]: an i64 count of `unit`s
    (NaT is the smallest i64), as numba keeps them. It is an i64 to every stage below the
    frontend (loads, stores, casts, argument slots: `name` is "i64"), a type of its own to
    the frontend, whose arithmetic follows NumPy's unit rules (frontend/datetimes.py)."""

    unit: str = "D"
    delta: bool = False

    def __str__(self) -> str:
        return str(self.dtype)

    def __repr__(self) -> str:
        return f"zm.{self.dtype}"

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(f"{'m8' if self.delta else 'M8'}[{self.unit}]")


def time_type(unit: str, delta: bool) -> Time:
    return Time("i64", "i", 64, unit, delta)


def is_time(t) -> bool:
    return isinstance(t, Time)


def scalar_of_dtype(dtype) -> Scalar:
    """The zymo scalar type of a NumPy dtype; KeyError when there is none."""
    dtype = np.dtype(dtype)
    found = _BY_DTYPE.get(dtype)
    if found is not None:
        return found
    if dtype.kind in "mM":
        unit, count = np.datetime_data(dtype)
        if unit != "generic" and count == 1:
            return time_type(unit, dtype.kind == "m")
    raise KeyError(dtype)


def complex_of(part: Scalar) -> Scalar:
    """The complex type whose parts are float type `part` (f16 parts widen to f32)."""
    return c128 if part.bits == 64 else c64


def int_of_width(bits: int, signed: bool = True) -> Scalar:
    return {(8, True): i8, (16, True): i16, (32, True): i32, (64, True): i64,
            (8, False): u8, (16, False): u16, (32, False): u32, (64, False): u64}[(bits, signed)]


SPACES = ("global", "shared", "local", "const")


@dataclass(frozen=True)
class Array(Type):
    """An n-d array view. `layout` "C" promises C-contiguity; "A" means any strides.

    Shared and local arrays carry their static `shape`; argument arrays have shape None.
    `small` promises fewer than 2**31 elements in C layout, so that every in-bounds element
    offset fits in i32 and the backends may do index arithmetic in 32 bits, as CUDA C's `int`
    does (launches decide it per argument; a type written by hand is not small).
    """

    dtype: Scalar
    ndim: int
    space: str = "global"
    layout: str = "C"
    shape: tuple[int, ...] | None = None
    small: bool = False
    align: int = 0

    @property
    def element_align(self) -> int:
        """The alignment in bytes each element's address has: `align` where the array is a
        field of a record array (a packed dtype, a complex field at a 4-byte offset), else
        the element's size."""
        return self.align or self.dtype.nbytes

    @property
    def narrow_offsets(self) -> bool:
        """Whether every in-bounds element offset fits in i32: small arguments, and arrays
        the kernel allocates (shared, local and constant memory are far below 2**31)."""
        return self.small or self.space != "global"

    def __str__(self) -> str:
        parts = [str(self.dtype), str(self.ndim)]
        if self.space != "global":
            parts.append(self.space)
        if self.layout != "C":
            parts.append(self.layout)
        if self.small:
            parts.append("small")
        if self.align:
            parts.append(f"align{self.align}")
        if self.shape is not None:
            parts.append("x".join(map(str, self.shape)))
        return "array<" + ", ".join(parts) + ">"


SMALL_ELEMENTS = 2**31


def is_small(size: int, c_contiguous: bool) -> bool:
    """Whether an array of `size` elements may be typed `small` (see `Array`)."""
    return c_contiguous and size < SMALL_ELEMENTS


def byte_span(origin: int, shape, strides, itemsize: int) -> tuple[int, int]:
    """The bytes [low, high) that the elements of an array at address `origin` with `shape`
    and byte `strides` occupy (negative strides reach below `origin`); empty for an empty
    array. Launches compare them to find arguments that may share memory."""
    if any(extent <= 0 for extent in shape):
        return origin, origin
    low = high = origin
    for extent, stride in zip(shape, strides):
        reach = (extent - 1) * stride
        if reach < 0:
            low += reach
        else:
            high += reach
    return low, high + itemsize


@dataclass(frozen=True)
class FunctionType(Type):
    inputs: tuple[Type, ...]
    outputs: tuple[Type, ...]

    def __str__(self) -> str:
        ins = ", ".join(map(str, self.inputs))
        outs = ", ".join(map(str, self.outputs))
        return f"({ins}) -> ({outs})"
