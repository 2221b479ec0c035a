"""Array methods that give another array: the views `a.reshape(shape)`, `a.view(dtype)`,
`a.real`, `a.imag` (ops/views.py: the same memory, so writes through them change `a`), and
the copy `a.copy()` (a new thread-local array, as numba's copy is the thread's own).

They apply to arrays, to slices of them (a frontend `View`; `.real` and `.imag` of a slice stay
slices, of the parts array, and the others take the slice as an array first: `memory.subview`)
and to NumPy arrays the kernel captures (constant arrays).
"""
from __future__ import annotations

import ast

import numpy as np

from ..ir import types as T
from ..ir.types import Array
from ..ir.values import Value
from ..ops import memory, views
from .composites import is_array
from .convert import UserError, describe
from .intrinsics import HANDLERS, BoundIntrinsic, constant_array, parse_dtype
from .raising import raise_where
from .values import Obj, PyConst, Tup, View, Weak

METHODS = {"reshape": "ndarray.reshape", "view": "ndarray.view", "copy": "ndarray.copy"}
PARTS = ("real", "imag")
_NOT_CONTIGUOUS = ("copy it first, b = a.copy() (into a thread-local array), or pass a "
                   "C-contiguous array")


def attribute(lw, node, base, attr: str):
    """`base.attr` where it is one of the methods or parts above (else None)."""
    if attr not in METHODS and attr not in PARTS:
        return None
    if isinstance(base, Obj) and isinstance(base.obj, np.ndarray) and base.obj.dtype.names \
            is None:
        base = constant_array(lw, node, base.obj)
    if not (is_array(base) or isinstance(base, View)):
        return None
    if attr in METHODS:
        return Obj(BoundIntrinsic(METHODS[attr], base))
    return _part(lw, node, base, attr)


def _part(lw, node, base, attr: str):
    """`.real` or `.imag`: for a complex array a view of the parts (a slice of it: the same
    slice of the parts array); a real array is its own real part."""
    array = base.base if isinstance(base, View) else base
    if not array.type.dtype.is_complex:
        if attr == "real":
            return base
        raise UserError(node, f"the imaginary part of an array of {array.type.dtype} is not "
                              "an array in kernels (numba makes a new array of zeros)",
                        "use 0 where you read it")
    parts = lw.b.value(views.Part, array, part=attr)
    return View(parts, base.axes) if isinstance(base, View) else parts


def as_array(lw, node, value) -> Value:
    """An IR array for an array or a slice of one."""
    if not isinstance(value, View):
        return value
    steps, positions, extents = [], [], []
    for axis in value.axes:
        if axis[0] == "index":
            steps.append(0)
            positions.append(lw.materialize(axis[1], T.i64, node))
        else:
            _, start, step, extent = axis
            steps.append(step)
            positions.append(lw.materialize(start, T.i64, node))
            extents.append(lw.materialize(extent, T.i64, node))
    return lw.b.value(views.Subview, value.base, *positions, *extents, steps=tuple(steps))


def _contiguous(lw, node, value, what: str) -> Value:
    array = as_array(lw, node, value)
    if array.type.layout != "C":
        kind = "slice" if isinstance(value, View) else "array"
        raise UserError(node, f"{what} of a {kind} that may not be C-contiguous "
                              f"({array.type.layout} layout)", _NOT_CONTIGUOUS)
    return array


def _size(lw, node, array: Value):
    size = PyConst(1)
    for extent in lw.shape_of(array).items:
        size = lw.binary("mul", size, extent, node)
    return size


def _reshape(lw, node, args, kwargs):
    receiver, *given = args
    if kwargs:
        raise UserError(node, f"reshape() in a kernel takes no keywords ({', '.join(kwargs)})",
                        "pass the shape only: a.reshape((m, n)) or a.reshape(m, n)")
    if len(given) == 1 and isinstance(given[0], Tup):
        given = list(given[0].items)
    if not given:
        raise UserError(node, "reshape() needs a shape", "write a.reshape((m, n))")
    if len(given) > 4:
        raise UserError(node, f"arrays have 1 to 4 dimensions, not {len(given)}")
    for item in given:
        plain = item.value if isinstance(item, Weak) else item
        if not (isinstance(plain, PyConst) and type(plain.value) is int or
                isinstance(plain, Value) and not isinstance(plain.type, Array)
                and plain.type.is_int):
            raise UserError(node, f"a shape holds integers, not {describe(item)}",
                            "write a.reshape((m, n)) with integer extents")
    array = _contiguous(lw, node, receiver, "reshape()")
    size = _size(lw, node, array)
    # one extent may be -1: what the others leave of the size (NumPy's rule)
    known = PyConst(1)
    for item in given:
        unknown = lw.compare("lt", item, PyConst(0), node)
        known = lw.binary("mul", known, _choose(lw, node, unknown, PyConst(1), item), node)
    rest = lw.binary("floordiv", size, _choose(lw, node, lw.compare("eq", known, PyConst(0),
                                                                     node), PyConst(1), known),
                     node)
    extents = [_choose(lw, node, lw.compare("lt", item, PyConst(0), node), rest, item)
               for item in given]
    total = PyConst(1)
    for extent in extents:
        total = lw.binary("mul", total, extent, node)
    mismatch = lw.compare("ne", total, size, node)
    if isinstance(mismatch, PyConst):
        if mismatch.value:
            raise UserError(node, f"cannot reshape an array of size {size.value} into shape "
                                  f"{tuple(e.value for e in extents)}",
                            "give a shape with as many elements")
    else:
        raise_where(lw, mismatch, ValueError, ("total size of new array must be unchanged",))
    return lw.b.value(views.Reshape, array, *(lw.materialize(e, T.i64, node) for e in extents))


def _choose(lw, node, cond, if_true, if_false):
    """`if_true if cond else if_false` on integers, folded when `cond` is known."""
    if isinstance(cond, PyConst):
        return if_true if cond.value else if_false
    from ..ops import arith
    x = lw.materialize(if_true, T.i64, node)
    y = lw.materialize(if_false, T.i64, node)
    return lw.b.value(arith.Select, cond, x, y)


def _view(lw, node, args, kwargs):
    receiver, *given = args
    if "dtype" in kwargs:
        given = [*given, kwargs.pop("dtype")]
    if kwargs or len(given) != 1:
        raise UserError(node, "view() in a kernel takes one dtype", "write a.view(np.int32)")
    dtype = parse_dtype(node, given[0])
    source = (receiver.base if isinstance(receiver, View) else receiver).type.dtype
    if dtype == source:
        return receiver   # the same elements
    if dtype.nbytes == source.nbytes:
        return lw.b.value(views.Bitcast, as_array(lw, node, receiver), dtype=dtype)
    array = _contiguous(lw, node, receiver, f"view({dtype}) of {source} elements")
    last = lw.shape_of(array).items[-1]
    nbytes = lw.binary("mul", last, PyConst(source.nbytes), node)
    uneven = lw.compare("ne", lw.binary("mod", nbytes, PyConst(dtype.nbytes), node),
                        PyConst(0), node)
    message = ("When changing to a larger dtype, its size must be a divisor of the total size "
               "in bytes of the last axis of the array.")
    if isinstance(uneven, PyConst):
        if uneven.value:
            raise UserError(node, f"the {nbytes.value} bytes of the last axis do not divide "
                                  f"into {dtype} elements", "view a slice that does")
    else:
        raise_where(lw, uneven, ValueError, (message,))
    return lw.b.value(views.Bitcast, array, dtype=dtype)


_PREFIX = "$copy_"


def _copy(lw, node, args, kwargs):
    receiver, *given = args
    if given or kwargs:
        raise UserError(node, "copy() in a kernel takes no arguments", "write b = a.copy()")
    if isinstance(receiver, View):
        extents = [axis[3] for axis in receiver.axes if axis[0] == "slice"]
        dtype = receiver.base.type.dtype
    else:
        extents = list(lw.shape_of(receiver).items)
        dtype = receiver.type.dtype
    if not all(isinstance(e, PyConst) for e in extents):
        raise UserError(node, "copy() in a kernel makes a thread-local array, whose shape must "
                              "be known at compile time",
                        "copy from a local, shared or constant array or a slice of literal "
                        "extent, or allocate cuda.local.array(n, dtype) and fill it in a loop")
    shape = tuple(e.value for e in extents)
    copy = lw.b.value(memory.LocalAlloc, shape=shape, dtype=dtype)
    counters = [f"i{d}" for d in range(len(shape))]
    index = ", ".join(counters)
    lines = []
    for depth, (counter, extent) in enumerate(zip(counters, shape)):
        lines.append("    " * depth + f"for {counter} in range({extent}):")
    lines.append("    " * len(shape) + f"b[{index}] = a[{index}]")
    _lower_template(lw, node, "\n".join(lines), {"a": receiver, "b": copy})
    return copy


def _lower_template(lw, node, source: str, bound: dict) -> None:
    """Lower the statements `source` at `node`, its names those of `bound` (and `range`)."""
    import builtins
    stmts = ast.parse(source).body
    for child in ast.walk(ast.Module(body=stmts, type_ignores=[])):
        if isinstance(child, ast.Name):
            child.id = _PREFIX + child.id
        if isinstance(child, (ast.expr, ast.stmt)):
            ast.copy_location(child, node)
            child.end_lineno = node.end_lineno
            child.end_col_offset = node.end_col_offset
    bound = {"range": Obj(builtins.range), **bound}
    names = {_PREFIX + n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name)}
    saved = {name: lw.env[name] for name in names if name in lw.env}
    lw.env.update({_PREFIX + name: value for name, value in bound.items()})
    try:
        lw.visit_block(stmts)
    finally:
        for name in names:
            lw.env.pop(name, None)
        lw.env.update(saved)


HANDLERS["ndarray.reshape"] = _reshape
HANDLERS["ndarray.view"] = _view
HANDLERS["ndarray.copy"] = _copy
