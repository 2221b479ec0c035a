"""Python enums in kernels, typed as numba types them: a member is its value with its class
kept at compile time (`values.Member`).

An `IntEnum` member is an int wherever a number is expected (arithmetic, comparisons with
numbers, casts, stores). An `Enum` member is not a number: members of one class compare with
`==`, `!=`, `is` and `is not` (by value, which for enum members is identity); comparing members
of different classes, or a member with a number, is rejected as numba does (`is` between
different classes is False). Members come from the class (`Color.red`, `Color["red"]`,
`Color(1)` with a constant), from kernel arguments (a launch passes the value: runtime/cuda/
arguments.py) and from device functions, which may take and return them.
"""
from __future__ import annotations

import enum

from ..ir.values import Value
from .convert import UserError, describe
from .values import Member, Obj, PyConst, Tup, Weak


def is_enum_class(obj) -> bool:
    return isinstance(obj, type) and issubclass(obj, enum.Enum)


def member(resolver, obj: enum.Enum, lw=None) -> Member:
    """The frontend value of the compile-time member `obj`."""
    return Member(type(obj), resolver.from_python(obj.value, lw), obj)


def plain(value):
    """An IntEnum member as its int; anything else as it is."""
    return value.value if isinstance(value, Member) and value.is_int else value


def attribute(lw, m: Member, attr: str, node):
    """`member.value`, `member.name` (of a compile-time member)."""
    if attr == "value":
        return m.value
    if attr == "name" and m.known is not None:
        return Obj(m.known.name)
    if attr == "name":
        raise UserError(node, f"the name of a run-time member of {m.cls.__name__} is not known "
                              "in the kernel", "compare the member with the class's members")
    raise UserError(node, f"a member of {m.cls.__name__} has no attribute '{attr}' in kernels",
                    "use .value")


def class_item(lw, cls: type, index, node) -> Member:
    """`Cls["name"]`: the member named by a constant string."""
    if isinstance(index, Obj) and isinstance(index.obj, str):
        try:
            return member(lw.resolver, cls[index.obj], lw)
        except KeyError:
            raise UserError(node, f"{cls.__name__} has no member '{index.obj}'",
                            f"its members are {', '.join(cls.__members__)}") from None
    raise UserError(node, f"index {cls.__name__} with a constant name, not {describe(index)}",
                    f'write {cls.__name__}["name"] or {cls.__name__}.name')


def class_call(lw, cls: type, args: list, node) -> Member:
    """`Cls(value)` with a constant value: the member holding it."""
    if len(args) == 1:
        value = _constant(args[0])
        if value is not None:
            try:
                return member(lw.resolver, cls(value), lw)
            except ValueError:
                raise UserError(node, f"{value!r} is not a value of {cls.__name__}") from None
    raise UserError(node, f"{cls.__name__}(...) takes one constant value in kernels",
                    f"pass the member itself, e.g. {cls.__name__}.{next(iter(cls.__members__))}")


def _constant(value):
    if isinstance(value, PyConst):
        return value.value
    if isinstance(value, Obj):
        return value.obj
    if isinstance(value, Tup) and all(isinstance(item, PyConst) for item in value.items):
        return tuple(item.value for item in value.items)
    return None


def compare(lw, predicate: str, a, b, node):
    """`a <predicate> b` where one of them is a member."""
    if isinstance(a, Member) and isinstance(b, Member) and a.cls is b.cls and not a.is_int:
        if predicate not in ("eq", "ne"):
            raise UserError(node, f"members of {a.cls.__name__} are not ordered",
                            "compare them with == or !=, or compare their .value")
        equal = _equal(lw, a.value, b.value, node)
        return equal if predicate == "eq" else lw.unary("not", equal, node)
    if isinstance(a, Member) and isinstance(b, Member) and a.cls is not b.cls \
            and not (a.is_int and b.is_int):
        raise UserError(node, f"cannot compare a member of {a.cls.__name__} with a member of "
                              f"{b.cls.__name__}",
                        "compare members of one enum, or compare their .value")
    for side in (a, b):
        if isinstance(side, Member) and not side.is_int:
            other = b if side is a else a
            raise UserError(node, f"cannot compare a member of {side.cls.__name__} with "
                                  f"{describe(other)}",
                            f"compare it with a member of {side.cls.__name__}, or compare "
                            f"its .value")
    return lw.compare(predicate, plain(a), plain(b), node)


def identity(lw, a, b, node, written: str = "is"):
    """`a is b`: members of one class are the same member where their values are equal;
    members of different classes never are; compile-time objects by identity."""
    if isinstance(a, Member) and isinstance(b, Member):
        if a.cls is not b.cls:
            return PyConst(False)
        return _equal(lw, a.value, b.value, node)
    if isinstance(a, Member) or isinstance(b, Member):
        return PyConst(False) if isinstance(a, (Obj, Member)) and isinstance(b, (Obj, Member)) \
            else _no_identity(written, node)
    if isinstance(a, Obj) and isinstance(b, Obj):
        return PyConst(a.obj is b.obj)
    return _no_identity(written, node)


def _no_identity(written: str, node):
    raise UserError(node, f"unsupported comparison {written}",
                    f"`{written}` compares enum members; compare numbers with == or !=")


def _equal(lw, x, y, node):
    """Whether two member values are equal (tuples item by item)."""
    if isinstance(x, Tup) and isinstance(y, Tup):
        if len(x.items) != len(y.items):
            return PyConst(False)
        result = PyConst(True)
        for p, q in zip(x.items, y.items):
            result = lw.binary("and", lw.to_bool(result), _equal(lw, p, q, node), node)
        return result
    if isinstance(x, Obj) and isinstance(y, Obj):
        return PyConst(x.obj == y.obj)
    return lw.compare("eq", x, y, node)


def select(lw, cond: Value, a: Member, b: Member, node) -> Member:
    """`a if cond else b` for members of one class."""
    if a.cls is not b.cls:
        if a.is_int and b.is_int:
            return None
        raise UserError(node, f"a member of {a.cls.__name__} on one path and of "
                              f"{b.cls.__name__} on the other", "give both paths one enum")
    if isinstance(a.value, Tup) or isinstance(b.value, Tup):
        raise UserError(node, "conditional members with tuple values", "use an if statement")
    x, y, _, weak = lw.unify_pair(a.value, b.value, node)
    from ..ops import arith
    value = lw.b.value(arith.Select, cond, x, y)
    return Member(a.cls, Weak(value) if weak else value)
