"""CUDA's vector types in kernels (numba's `cuda.float32x4(a, b, c, d)`, `cuda.int2(v)`).

A vector has no IR of its own: it is a namedtuple whose fields are `x`, `y`, `z`, `w` (as
many as it has elements), each a value of the vector's base type. Its fields are read as a
namedtuple's (`v.x`), and it crosses device-function calls, branches and loops as tuples do.

The constructor is any object carrying `zymo_vector = (name, base Scalar, element count)`
(`zymo.cuda.vector_types` makes numba's). It takes numbers and vectors of its base type whose
elements add up to its count, in order: `float32x4(float32x2(a, b), c, d)`.
"""
from __future__ import annotations

from ..ir.types import Scalar
from ..ir.values import Value
from .convert import UserError, describe
from .values import PyConst, Tup, Weak

FIELDS = ("x", "y", "z", "w")


def spec_of(obj) -> tuple | None:
    """(name, base type, count) of a vector type's constructor, or None for anything else."""
    try:
        spec = getattr(obj, "zymo_vector", None)
    except Exception:   # an object whose attributes fail is simply not a vector type
        return None
    if isinstance(spec, tuple) and len(spec) == 3 and isinstance(spec[1], Scalar):
        return spec
    return None


def is_vector(value) -> bool:
    return isinstance(value, Tup) and 1 <= len(value.items) <= len(FIELDS) and \
        value.fields == FIELDS[:len(value.items)]


def construct(lw, node, spec: tuple, args, kwargs) -> Tup:
    """The vector `name(*args)`: its elements are the numbers and the vectors' elements in
    `args`, in order, each converted to the base type."""
    from .intrinsics import cast_to
    name, base, count = spec
    if kwargs:
        raise UserError(node, f"{name}() takes its elements by position, not "
                              f"{', '.join(kwargs)}=")
    spelled = base.dtype.name   # numba's name of the base type: float32, uint8
    elements = []
    for arg in args:
        if is_vector(arg):
            if not all(isinstance(item, Value) and item.type == base for item in arg.items):
                raise UserError(node, f"{name}() takes {spelled} vectors and numbers; this "
                                      f"vector's elements are not {spelled}",
                                f"convert its elements: {name}(" +
                                ", ".join(f"cuda.{spelled}(v.{f})" for f in arg.fields) +
                                ", ...)")
            elements.extend(arg.items)
        elif isinstance(arg, (PyConst, Weak)) or \
                isinstance(arg, Value) and isinstance(arg.type, Scalar):
            elements.append(arg)
        else:
            raise UserError(node, f"{name}() takes numbers and {spelled} vectors, not "
                                  f"{describe(arg)}")
    if len(elements) != count:
        example = ", ".join(FIELDS[:count])
        raise UserError(node, f"{name} has {count} element{'s' * (count > 1)}, the arguments "
                              f"give {len(elements)}",
                        f"pass numbers and vectors that add up to {count}, e.g. {name}({example})")
    return Tup(tuple(cast_to(lw, node, e, base) for e in elements), FIELDS[:count])
