"""What a Python expression denotes while a kernel is lowered, and the typing rules that join
two of them (weak Python scalars as in JAX, promotion of strong types)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import types as T
from ..ir.types import Array, Scalar
from ..ir.values import Value


@dataclass(frozen=True)
class PyConst:
    """A compile-time Python scalar (int, float, complex or bool). Numbers are weakly typed."""

    value: int | float | complex | bool

    @property
    def is_float(self) -> bool:
        return isinstance(self.value, float)


@dataclass(frozen=True)
class Weak:
    """A run-time scalar that is weakly typed (a Python number passed as an argument): held in
    its carrier type (f64 or i64) and converted to the type of whatever it meets."""

    value: Value

    @property
    def is_float(self) -> bool:
        return self.value.type.is_float  # type: ignore[union-attr]


@dataclass(frozen=True)
class Tup:
    items: tuple
    # a namedtuple's field names (items by name as well as by position); None: a plain tuple
    fields: tuple | None = None

    def field(self, name: str):
        return self.items[self.fields.index(name)] if self.fields and name in self.fields \
            else None


@dataclass(frozen=True)
class View:
    """A slice of an array inside a kernel (`a[i, :]`, `a[1:n]`, `a[::2]`): no IR of its own,
    its elements are the base array's at `start + k * step` on each sliced axis and at the
    fixed index on the others, so loads, stores and their derivatives are the base's.
    `axes` has one entry per base axis: ("index", value) or ("slice", start, step, extent),
    values being IR scalars and `step` a Python int."""

    base: Any
    axes: tuple

    @property
    def ndim(self) -> int:
        return sum(1 for axis in self.axes if axis[0] == "slice")

    def leaves(self) -> list:
        return [self.base] + [v for axis in self.axes for v in axis[1:]
                              if isinstance(v, Value)]

    def rebuild(self, leaves):
        base = next(leaves)
        axes = tuple(tuple(next(leaves) if isinstance(v, Value) else v for v in axis)
                     for axis in self.axes)
        return View(base, axes)

    def key(self):
        return ("view", self.base.type, tuple((axis[0],) + tuple(
            v if not isinstance(v, Value) else v.type for v in axis[1:]) for axis in self.axes))


@dataclass(frozen=True)
class Rec:
    """An array of records (a structured NumPy dtype) passed to a kernel: one strided array
    per field (`fields` is ((name, array value), ...)), `ndim` dimensions of records; a field
    that is itself an array of numbers, `('j', 'f4', (3, 2))`, has its `subshapes` entry's
    dimensions after those."""

    fields: tuple
    ndim: int = 1
    subshapes: tuple = ()

    def field(self, name: str):
        return dict(self.fields).get(name)

    def subshape(self, name: str) -> tuple:
        names = [n for n, _ in self.fields]
        return self.subshapes[names.index(name)] if self.subshapes else ()

    @property
    def first(self):
        return self.fields[0][1]

    def leaves(self) -> list:
        return [array for _, array in self.fields]

    def rebuild(self, leaves):
        return Rec(tuple((name, next(leaves)) for name, _ in self.fields), self.ndim,
                   self.subshapes)

    def key(self):
        return ("record", tuple((name, array.type) for name, array in self.fields), self.ndim,
                self.subshapes)


@dataclass(frozen=True)
class RecRef:
    """One record of a record array, `a[i]`, or one record passed to the kernel (`indices`
    empty: a one-record array's record 0): its fields are read and written by name."""

    rec: Rec
    indices: tuple

    def leaves(self) -> list:
        return self.rec.leaves() + list(self.indices)

    def rebuild(self, leaves):
        return RecRef(self.rec.rebuild(leaves), tuple(next(leaves) for _ in self.indices))

    def key(self):
        return ("recref", self.rec.key(), tuple(v.type for v in self.indices))


@dataclass(frozen=True)
class Obj:
    """A compile-time object: a module, an intrinsic, a device function, a type, a range."""

    obj: Any


@dataclass(frozen=True)
class Member:
    """A member of a Python enum (`enum.Enum`, `enum.IntEnum`; frontend/enums.py): its class,
    known at compile time, and its value (a constant, a run-time scalar or a tuple of them);
    `known` is the member itself where it is a compile-time constant."""

    cls: type
    value: Any
    known: Any = None

    @property
    def is_int(self) -> bool:
        """An IntEnum member: an int wherever a number is expected."""
        return issubclass(self.cls, int)


@dataclass(frozen=True)
class Choice:
    """An array variable assigned different arrays on different paths (`data = a if even else
    b`, a swap in a loop): `arrays[index]`, `index` an i32 known at run time. Statements that
    use it are lowered once per candidate (`Lowerer.versioned`), so every memory op in the IR
    still names one array and the analyses keep their precision."""

    index: Value
    arrays: tuple


def holds_array(value) -> bool:
    """An array IR value, or a Choice among arrays."""
    return isinstance(value, Choice) or isinstance(value, Value) and isinstance(value.type, Array)


@dataclass(frozen=True)
class Poison:
    """The value of an expression that already produced an error (suppresses follow-ups)."""


@dataclass(frozen=True)
class Undefined:
    name: str
    why: str


@dataclass(frozen=True)
class Unset:
    """A function's return value before any `return` ran on this path."""


def is_scalar_value(v: Any) -> bool:
    return isinstance(v, Value) and isinstance(v.type, Scalar)


def default_type(v: PyConst | Weak) -> Scalar:
    """The type a weak value takes when nothing else decides: f32, i32 (i64 if it must), bool."""
    if isinstance(v, Weak):
        return T.f32 if v.is_float else T.i32
    if isinstance(v.value, bool):
        return T.bool_
    if isinstance(v.value, float):
        return T.f32
    if isinstance(v.value, complex):   # f32's complex, as a float literal defaults to f32
        return T.c64
    return T.i32 if -2**31 <= v.value < 2**31 else T.i64


def carrier_type(is_float: bool) -> Scalar:
    return T.f64 if is_float else T.i64


def promote(a: Scalar, b: Scalar) -> Scalar:
    """The common type of two strong scalar types (no float widening beyond the operands)."""
    if a == b:
        return a
    if a.is_complex or b.is_complex or T.f16 in (a, b) and not (a.is_float and b.is_float):
        # NumPy's rules: complex64 with float64 or int32 is complex128; float16 with int8 is
        # float16, with int16 float32, with wider integers float64
        return T.scalar_of_dtype(np.promote_types(a.dtype, b.dtype))
    if a.is_bool:
        return b if not b.is_bool else a
    if b.is_bool:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            return a if a.bits >= b.bits else b
        return a if a.is_float else b
    if a.is_signed == b.is_signed:
        return a if a.bits >= b.bits else b
    signed, unsigned = (a, b) if a.is_signed else (b, a)
    if signed.bits > unsigned.bits:
        return signed
    return T.i64


def weak_join(weak_is_float: bool, strong: Scalar) -> Scalar:
    """The type of (weak value) op (strong value of type `strong`)."""
    if strong.is_complex:
        return strong
    if weak_is_float and not strong.is_float:
        return T.f64 if strong.bits == 64 else T.f32
    if strong.is_bool:
        return T.f32 if weak_is_float else T.i32
    return strong
