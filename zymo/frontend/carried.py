"""Values that cross a control-flow boundary (if results, loop-carried values, function
results): their abstract shape, how two shapes join, and flattening to IR leaves."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from ..ir import types as T
from ..ir.types import Array, Scalar
from ..ir.values import Value
from ..ops import arith
from .convert import UserError
from .values import (Choice, Member, Obj, Poison, PyConst, Tup, Unset, Weak, carrier_type,
                     promote, weak_join)


@dataclass(frozen=True)
class Leaf:
    type: Scalar
    weak: bool


@dataclass(frozen=True)
class Group:
    items: tuple
    fields: tuple | None = None   # a namedtuple's (a vector's x, y, z, w): kept across joins


@dataclass(frozen=True)
class Keep:
    """Must stay the same object on every path (arrays, compile-time objects)."""

    value: Any


@dataclass(frozen=True)
class Pick:
    """One of `arrays`, chosen at run time: carried as an i32 index (see values.Choice)."""

    arrays: tuple


@dataclass(frozen=True)
class Enumerated:
    """A member of enum `cls` (values.Member) whose value has shape `value`."""

    cls: type
    value: Any


@dataclass(frozen=True)
class Missing:
    """No value yet (a function's result before any return)."""


def same(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, PyConst) and isinstance(b, PyConst):
        return type(a.value) is type(b.value) and a.value == b.value
    if isinstance(a, Weak) and isinstance(b, Weak):
        return a.value is b.value
    if isinstance(a, Tup) and isinstance(b, Tup):
        return len(a.items) == len(b.items) and all(same(x, y) for x, y in zip(a.items, b.items))
    if isinstance(a, Obj) and isinstance(b, Obj):
        return a.obj is b.obj
    if isinstance(a, Choice) and isinstance(b, Choice):
        return a.index is b.index and a.arrays == b.arrays
    if isinstance(a, Member) and isinstance(b, Member):
        return a.cls is b.cls and same(a.value, b.value)
    return False


def abstract(v, name: str, node=None):
    if isinstance(v, PyConst):
        if isinstance(v.value, bool):
            return Leaf(T.bool_, False)
        return Leaf(carrier_type(isinstance(v.value, float)), True)
    if isinstance(v, Weak):
        return Leaf(v.value.type, True)
    if isinstance(v, Value):
        if isinstance(v.type, Array):
            return Keep(v)
        return Leaf(v.type, False)
    if isinstance(v, Tup):
        return Group(tuple(abstract(item, name, node) for item in v.items), v.fields)
    if isinstance(v, Unset):
        return Missing()
    if isinstance(v, Choice):
        return Pick(v.arrays)
    if isinstance(v, Member):
        return Enumerated(v.cls, abstract(v.value, name, node))
    return Keep(v)


def _arrays_of(v) -> tuple | None:
    """The arrays an array-valued frontend value may be, or None for anything else."""
    if isinstance(v, Value) and isinstance(v.type, Array):
        return (v,)
    if isinstance(v, Choice):
        return v.arrays
    return None


def _pick(arrays: tuple, more: tuple, name: str, node) -> Pick:
    union = arrays + tuple(a for a in more if all(a is not b for b in arrays))
    kinds = {a.type for a in union}
    if len(kinds) > 1:
        listed = " and ".join(sorted(str(k) for k in kinds))
        raise UserError(node, f"'{name}' holds arrays of different types ({listed}) on "
                              "different paths",
                        "an array variable may change between arrays of one type only")
    return Pick(union)


def join(shape, v, name: str, node=None):
    """The shape that holds both `shape` and the value `v`."""
    if isinstance(shape, Missing):
        return abstract(v, name, node)
    if isinstance(v, Unset):
        return shape
    if isinstance(shape, Enumerated) or isinstance(v, Member):
        return _join_members(shape, v, name, node)
    if isinstance(shape, Pick) or isinstance(shape, Keep) and _arrays_of(shape.value):
        known = shape.arrays if isinstance(shape, Pick) else (shape.value,)
        more = _arrays_of(v)
        if more is not None:
            return shape if isinstance(shape, Keep) and same(shape.value, v) else \
                _pick(known, more, name, node)
    if isinstance(shape, Keep):
        if same(shape.value, v):
            return shape
        what = "an array" if isinstance(shape.value, Value) else "a compile-time object"
        raise UserError(node, f"'{name}' holds {what} and is reassigned on one path only",
                        "assign arrays and functions once, outside if/for/while")
    if isinstance(shape, Group):
        if not (isinstance(v, Tup) and len(v.items) == len(shape.items)):
            raise UserError(node, f"'{name}' is a tuple of {len(shape.items)} on one path and "
                                  "something else on another",
                            "give it the same shape on all paths")
        return Group(tuple(join(s, item, name, node) for s, item in zip(shape.items, v.items)),
                     shape.fields if shape.fields == v.fields else None)
    other = abstract(v, name, node)
    if not isinstance(other, Leaf):
        raise UserError(node, f"'{name}' is a number on one path and not on another")
    if shape.type.is_bool != other.type.is_bool:
        if shape.type.is_bool and not other.weak or other.type.is_bool and not shape.weak:
            return Leaf(promote(shape.type, other.type), False)
    if shape.weak and other.weak:
        return Leaf(carrier_type(shape.type.is_float or other.type.is_float), True)
    if shape.weak:
        return Leaf(weak_join(shape.type.is_float, other.type), False)
    if other.weak:
        return Leaf(weak_join(other.type.is_float, shape.type), False)
    return Leaf(promote(shape.type, other.type), False)


def _join_members(shape, v, name: str, node):
    """Members of one enum stay members; IntEnum members meeting other ints become ints."""
    cls = shape.cls if isinstance(shape, Enumerated) else None
    if isinstance(v, Member) and v.cls is cls:
        return Enumerated(cls, join(shape.value, v.value, name, node))
    ints = (cls is None or issubclass(cls, int)) and \
        (not isinstance(v, Member) or v.is_int)
    if not ints:
        raise UserError(node, f"'{name}' holds a member of an enum on one path and something "
                              "else on another", "give it members of one enum on all paths")
    inner = shape.value if isinstance(shape, Enumerated) else shape
    return join(inner, v.value if isinstance(v, Member) else v, name, node)


def leaf_types(shape) -> list[Scalar]:
    if isinstance(shape, Leaf):
        return [shape.type]
    if isinstance(shape, Group):
        return [t for item in shape.items for t in leaf_types(item)]
    if isinstance(shape, Pick):
        return [T.i32]
    if isinstance(shape, Enumerated):
        return leaf_types(shape.value)
    return []


def flatten(lowerer, v, shape, node=None) -> list[Value]:
    """IR values for the leaves of `v` converted to `shape` (emitted at the builder)."""
    if isinstance(shape, Leaf):
        if isinstance(v, (Unset, Poison)):    # Poison: its error is reported already
            return [lowerer.constant(0, shape.type)]
        if isinstance(v, Weak):
            return [lowerer.cast(v.value, shape.type)]
        if isinstance(v, PyConst):
            return [lowerer.constant(v.value, shape.type)]
        return [lowerer.cast(v, shape.type)]
    if isinstance(shape, Group):
        items = v.items if isinstance(v, Tup) else [Unset()] * len(shape.items)
        return [leaf for s, item in zip(shape.items, items)
                for leaf in flatten(lowerer, item, s, node)]
    if isinstance(shape, Pick):
        return [_position(lowerer, v, shape.arrays)]
    if isinstance(shape, Enumerated):
        return flatten(lowerer, v.value if isinstance(v, Member) else v, shape.value, node)
    if isinstance(v, Member):   # an IntEnum member where an int is carried
        return flatten(lowerer, v.value, shape, node)
    return []


def _position(lowerer, v, arrays: tuple) -> Value:
    """The index in `arrays` of the array `v` stands for, as an i32."""
    def at(array) -> int:
        return next(k for k, a in enumerate(arrays) if a is array)

    if not isinstance(v, Choice):   # one array; Unset or Poison: never read, any index
        return lowerer.constant(at(v) if _arrays_of(v) else 0, T.i32)
    if all(a is b for a, b in zip(arrays, v.arrays)):
        return v.index
    # renumber: the choice's arrays[k] is at(arrays[k]) here
    position = lowerer.constant(at(v.arrays[0]), T.i32)
    for k, array in enumerate(v.arrays[1:], start=1):
        chosen = lowerer.b.value(arith.Cmp, v.index, lowerer.constant(k, T.i32), predicate="eq")
        position = lowerer.b.value(arith.Select, chosen, lowerer.constant(at(array), T.i32),
                                   position)
    return position


def rebuild(shape, leaves: Iterator[Value]):
    if isinstance(shape, Leaf):
        value = next(leaves)
        return Weak(value) if shape.weak else value
    if isinstance(shape, Group):
        return Tup(tuple(rebuild(item, leaves) for item in shape.items), shape.fields)
    if isinstance(shape, Missing):
        return Unset()
    if isinstance(shape, Pick):
        return Choice(next(leaves), shape.arrays)
    if isinstance(shape, Enumerated):
        return Member(shape.cls, rebuild(shape.value, leaves))
    return shape.value
