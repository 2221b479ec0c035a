"""Calls of foreign device functions (lang/foreign.py) and cffi's `ffi.from_buffer(array)`,
the pointer numba's kernels pass them."""
from __future__ import annotations

from dataclasses import dataclass


from ..ir.types import Array, i64
from ..ir.values import Value
from ..lang.foreign import ForeignFunction
from ..ops.foreign import ForeignCall
from .convert import UserError
from .intrinsics import cast_to, handler, parse_dtype
from .values import PyConst, Tup, View


def is_from_buffer(fn) -> bool:
    """`fn` is the `from_buffer` method of a cffi FFI object."""
    owner = getattr(fn, "__self__", None)
    return getattr(fn, "__name__", "") == "from_buffer" and \
        type(owner).__module__.split(".")[0] == "cffi"


def from_buffer(lw, node, args, kwargs):
    """`ffi.from_buffer(array)`: the address of the array's first element (of a slice's first
    element for a slice, `ffi.from_buffer(a[i:])`)."""
    if kwargs or len(args) != 1 or not (_is_array(args[0]) or isinstance(args[0], View)):
        raise UserError(node, "ffi.from_buffer takes one array in a kernel",
                        "pass an array or a slice of one: ffi.from_buffer(x), "
                        "ffi.from_buffer(x[i:])")
    return Pointer(*_first_element(lw, args[0]))


@dataclass(frozen=True)
class Pointer:
    """The address of `array[indices]`, which a foreign function receives."""

    array: Value
    indices: tuple


def _first_element(lw, value) -> tuple:
    if isinstance(value, View):
        indices = tuple(axis[1] for axis in value.axes)   # an index, or a slice's start
        return value.base, indices
    zero = lw.constant(0, i64)
    return value, (zero,) * value.type.ndim


def call(lw, node, callee: ForeignFunction, args, kwargs):
    if kwargs:
        raise UserError(node, f"{callee.symbol}() takes its arguments by position")
    if len(args) != len(callee.inputs):
        raise UserError(node, f"{callee.symbol}() takes {len(callee.inputs)} arguments "
                        f"({callee}), got {len(args)}")
    operands = []
    for k, (arg, declared) in enumerate(zip(args, callee.inputs)):
        if isinstance(declared, Array):
            pointer = arg if isinstance(arg, Pointer) else \
                Pointer(*_first_element(lw, arg)) if _is_array(arg) else None
            if pointer is None or pointer.array.type.dtype != declared.dtype:
                raise UserError(node, f"argument {k + 1} of {callee.symbol}() is a pointer to "
                                f"{declared.dtype}", f"pass an array of {declared.dtype} or "
                                "ffi.from_buffer(array)")
            operands += [pointer.array, *[cast_to(lw, node, i, i64) for i in pointer.indices]]
        else:
            if _is_array(arg) or isinstance(arg, (View, Pointer)):
                raise UserError(node, f"argument {k + 1} of {callee.symbol}() is a "
                                f"{declared}, not an array")
            operands.append(cast_to(lw, node, arg, declared))
    op = lw.b.create(ForeignCall, *operands, callee=callee)
    return op.results[0] if op.results else PyConst(0)


def _is_array(value) -> bool:
    return isinstance(value, Value) and isinstance(value.type, Array)


@handler("carray", "farray")
def carray(lw, node, args, kwargs):
    """numba's `carray(pointer, shape, dtype)` in a kernel: the elements at a pointer (a
    `CPointer` parameter, or `ffi.from_buffer(...)`) as an array of `shape`. One dimension
    (C and Fortran order then agree): a view of the pointer's elements."""
    dtype = kwargs.get("dtype", args[2] if len(args) > 2 else None)
    if len(args) < 2:
        raise UserError(node, "carray(pointer, shape, dtype) takes a pointer and a shape")
    pointer, shape = args[0], args[1]
    if _is_array(pointer):
        pointer = Pointer(*_first_element(lw, pointer))
    if not isinstance(pointer, Pointer) or pointer.array.type.ndim != 1:
        raise UserError(node, "carray takes a pointer: a CPointer parameter or "
                        "ffi.from_buffer(array) of a one-dimensional array")
    extents = shape.items if isinstance(shape, Tup) else (shape,)
    if len(extents) != 1:
        raise UserError(node, "carray/farray in a kernel make one-dimensional arrays",
                        "index the one-dimensional array with i * ncols + j")
    element = pointer.array.type.dtype
    if dtype is not None and parse_dtype(node, dtype) != element:
        raise UserError(node, f"carray of a pointer to {element} as "
                        f"{parse_dtype(node, dtype)}: zymo does not reinterpret memory",
                        f"pass dtype={element}")
    extent = cast_to(lw, node, extents[0], i64)
    return View(pointer.array, (("slice", pointer.indices[0], 1, extent),))

