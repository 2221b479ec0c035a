"""Values that cross a control-flow boundary (if results, loop-carried values, function
results): their abstract shape, how two shapes join, and flattening to IR leaves."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from ..ir import types as T
from ..ir.types import Array, Scalar
from ..ir.values import Value
from .convert import UserError
from .values import Obj, Poison, PyConst, Tup, Unset, Weak, carrier_type, promote, weak_join


@dataclass(frozen=True)
class Leaf:
    type: Scalar
    weak: bool


@dataclass(frozen=True)
class Group:
    items: tuple


@dataclass(frozen=True)
class Keep:
    """Must stay the same object on every path (arrays, compile-time objects)."""

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
        return Group(tuple(abstract(item, name, node) for item in v.items))
    if isinstance(v, Unset):
        return Missing()
    return Keep(v)


def join(shape, v, name: str, node=None):
    """The shape that holds both `shape` and the value `v`."""
    if isinstance(shape, Missing):
        return abstract(v, name, node)
    if isinstance(v, Unset):
        return shape
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
        return Group(tuple(join(s, item, name, node) for s, item in zip(shape.items, v.items)))
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


def leaf_types(shape) -> list[Scalar]:
    if isinstance(shape, Leaf):
        return [shape.type]
    if isinstance(shape, Group):
        return [t for item in shape.items for t in leaf_types(item)]
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
    return []


def rebuild(shape, leaves: Iterator[Value]):
    if isinstance(shape, Leaf):
        value = next(leaves)
        return Weak(value) if shape.weak else value
    if isinstance(shape, Group):
        return Tup(tuple(rebuild(item, leaves) for item in shape.items))
    if isinstance(shape, Missing):
        return Unset()
    return shape.value
