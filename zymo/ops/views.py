"""Array views: new arrays over the memory of another array (numba's `a[i:j]` as a value,
`a.reshape`, `a.view(dtype)`, `a.real`, `a.imag`).

A view allocates nothing and reads nothing: it computes where its elements lie in `base`'s
memory, so a store through it is a store into `base` (trait `Aliases`; the analyses that reason
about one array's memory follow a view back to its origin, `array_origin`).
The frontend uses these ops only where an array value is needed; indexing a slice in place
stays a frontend `View` whose accesses are the base array's own.

Forward mode through a slice or a reshape views each tangent array the same way (the tangent
memory then aliases as the primal's does). Reverse mode through a reshape views the shadow the
same way (`ad/shadows.py`), where the reshape is of a kernel argument at the top of the kernel
and every access to that memory goes through it (`ad/reverse.py` checks; the plan classes
accesses by their array's origin). Reverse mode through a slice taken as an array, and any
derivative through `view(dtype)` (a reinterpretation of bits) or `.real` / `.imag`, is a
compile error naming the line (`ad/activity.py` marks the view of a differentiated array as
differentiated, and the absences below are reported).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir as ll

from ..ir.operation import attr, operand, result
from ..ir.traits import Aliases, Pure, Speculatable
from ..ir.types import Array, Scalar
from ..ir.values import OpResult, Value
from .base import Op, require
from .mutations import mutable
from .registry import (ADJOINT, JVP, absent, adjoint_rule, interp_rule, jvp_rule, lower_rule,
                       typing_rule)
from .structural import FORWARD_VIEW, REVERSE_VIEW

_NO_DERIVATIVE = ("the derivative through an array view (a slice taken as an array, "
                  "reshape, view(dtype), .real, .imag) is not supported")
_NO_REVERSE = ("the reverse-mode derivative through a slice taken as an array is not "
               "supported; forward mode (zm.jvp) is, and reshape works in both modes")


def array_origin(array: Value) -> Value:
    """The array whose memory `array` is: `array` itself, or for a view (trait `Aliases`)
    the origin of the array it views."""
    while isinstance(array, OpResult) and array.owner.has_trait(Aliases):
        array = array.owner.operands[0]
    return array


def _array(t, what: str = "viewed value") -> Array:
    require(isinstance(t, Array), f"{what} must be an array, not {t}")
    return t


def _extents(types) -> None:
    for t in types:
        require(isinstance(t, Scalar) and t.is_int, f"an extent must be an integer, not {t}")


def _no_derivative(op_cls) -> None:
    absent(JVP, op_cls, _NO_DERIVATIVE)
    absent(ADJOINT, op_cls, _NO_DERIVATIVE)


def _forward_only(op_cls) -> None:
    jvp_rule(op_cls, FORWARD_VIEW)
    absent(ADJOINT, op_cls, _NO_REVERSE)


def _i64(ctx, op, values, start: int = 1) -> list:
    """The LLVM operands from `start` on, widened to i64 by their IR types."""
    return [ctx.index(v, op.operands[start + k].type) for k, v in enumerate(values)]


def _strides(ctx, array, ndim: int) -> list:
    return [ctx.builder.extract_value(array, [2, axis]) for axis in range(ndim)]


class Subview(Op):
    """%v = memory.subview(%base, %position..., %extent...) {steps}: the slice of `base` that
    a subscript such as `a[i, 2:n:3]` denotes, as an array. `steps` has one entry per axis of
    `base`: 0 where the axis is fixed at its position (the axis is dropped), else the slice's
    step; `position` holds one start index per axis of `base`, `extent` one count per slice."""

    name = "memory.subview"
    traits = (Pure, Speculatable, Aliases)
    base = operand()
    dims = operand(variadic=True)
    steps = attr()
    result = result()


def _subview_types(types, attrs):
    base = _array(types[0])
    steps = tuple(attrs["steps"])
    require(len(steps) == base.ndim, f"{len(steps)} steps for a {base.ndim}-d array")
    require(all(isinstance(s, int) for s in steps), f"slice steps must be ints, not {steps}")
    kept = [axis for axis, s in enumerate(steps) if s]
    require(kept, "a subview keeps at least one axis")
    require(len(types) == 1 + base.ndim + len(kept),
            f"a subview of a {base.ndim}-d array keeping {len(kept)} axes takes "
            f"{base.ndim + len(kept)} indices and extents, not {len(types) - 1}")
    _extents(types[1:])
    # one contiguous run of the last axis of a C array is C; anything else is strided
    contiguous = base.layout == "C" and kept == [base.ndim - 1] and steps[-1] == 1
    forward = all(s >= 0 for s in steps)   # narrow offsets need non-negative strides
    return [Array(base.dtype, len(kept), base.space, "C" if contiguous else "A", None,
                  base.small and forward, base.align)]


def _subview_interp(ctx, op, base, *dims):
    nd = len(op.steps)
    known = ctx.uniform_ints(dims) if base.parent is None else None
    if known is None:   # a position or extent differs between threads
        positions = [np.asarray(v, np.int64) for v in dims[:nd]]

        def translate(indices):
            given = iter(indices)
            return [position if step == 0 else position + next(given) * step
                    for position, step in zip(positions, op.steps)]

        shape = tuple(np.asarray(v, np.int64) for v in dims[nd:])
        return ctx.translated_view(op, base, shape, translate)
    extents = iter(known[nd:])
    index = []
    for position, step in zip(known[:nd], op.steps):
        if step == 0:
            index.append(position)
            continue
        count = next(extents)
        stop = position + step * count
        index.append(slice(position, None if stop < 0 else stop, step) if count else
                     slice(position, position))
    return ctx.view_array(op, base, lambda data, lead: data[(slice(None),) * lead +
                                                           tuple(index)])


def _subview_lower(ctx, op, base, *dims):
    b = ctx.builder
    nd = len(op.steps)
    positions, extents = _i64(ctx, op, dims[:nd]), _i64(ctx, op, dims[nd:], 1 + nd)
    strides = _strides(ctx, base, nd)
    offset = None
    for position, stride in zip(positions, strides):
        term = b.mul(position, stride)
        offset = term if offset is None else b.add(offset, term)
    element = ctx.memory_type(op.base.type.dtype)
    data = b.gep(b.extract_value(base, 0), [offset], source_etype=element)
    kept = [(stride, step) for stride, step in zip(strides, op.steps) if step]
    new_strides = [stride if step == 1 else b.mul(stride, ll.Constant(stride.type, step))
                   for stride, step in kept]
    return ctx.make_array(op.result.type, data, extents, new_strides)


typing_rule(Subview, _subview_types)
interp_rule(Subview, _subview_interp)
lower_rule(Subview, _subview_lower)
_forward_only(Subview)
mutable(Subview)


class Reshape(Op):
    """%v = memory.reshape(%base, %extent...): the C-contiguous array `base` with another shape
    of as many elements (the frontend checks the count)."""

    name = "memory.reshape"
    traits = (Pure, Speculatable, Aliases)
    base = operand()
    extents = operand(variadic=True)
    result = result()


def _reshape_types(types, attrs):
    base = _array(types[0])
    require(base.layout == "C", f"reshape of a non-contiguous array {base}")
    require(len(types) > 1, "reshape to at least one axis")
    _extents(types[1:])
    return [Array(base.dtype, len(types) - 1, base.space, "C", None, base.small, base.align)]


def _reshape_interp(ctx, op, base, *extents):
    size = int(np.prod(base.shape)) if base.parent is None else None
    known = ctx.uniform_ints(extents) if size is not None else None
    if known is None:   # a new extent differs between threads, or so does `base`
        shape = tuple(np.asarray(v, np.int64) for v in extents)
        count = np.prod(np.broadcast_arrays(*shape), axis=0)
        bad = np.broadcast_to(count != np.prod(np.broadcast_arrays(*base.shape), axis=0),
                              ctx.mask.shape) & ctx.mask
        if bad.any():
            raise ctx.error(op, "cannot reshape an array into a shape of another size")

        def translate(indices):
            flat = np.int64(0)
            for index, extent in zip(indices, shape):
                flat = flat * extent + index
            found = []
            for extent in reversed(base.shape):
                extent = np.maximum(extent, 1)
                found.append(flat % extent)
                flat = flat // extent
            return found[::-1]

        return ctx.translated_view(op, base, shape, translate)
    shape = tuple(known)
    if int(np.prod(shape)) != size:
        raise ctx.error(op, f"cannot reshape an array of size {size} into shape {shape}")

    def reshaped(data, lead):
        view = data.view()
        view.shape = data.shape[:lead] + shape   # raises rather than copy
        return view

    return ctx.view_array(op, base, reshaped)


def _reshape_lower(ctx, op, base, *extents):
    data = ctx.builder.extract_value(base, 0)
    return ctx.make_array(op.result.type, data, _i64(ctx, op, extents))


typing_rule(Reshape, _reshape_types)
interp_rule(Reshape, _reshape_interp)
lower_rule(Reshape, _reshape_lower)
jvp_rule(Reshape, FORWARD_VIEW)
adjoint_rule(Reshape, REVERSE_VIEW)
mutable(Reshape)


class Part(Op):
    """%v = memory.part(%base) {part = "real"}: the real or imaginary parts of the complex
    array `base`, an array of floats with `base`'s shape (strided: every other float)."""

    name = "memory.part"
    traits = (Pure, Speculatable, Aliases)
    base = operand()
    part = attr()
    result = result()


def _part_types(types, attrs):
    base = _array(types[0])
    require(base.dtype.is_complex, f"parts of a non-complex array {base}")
    require(attrs["part"] in ("real", "imag"), f"part must be real or imag, not {attrs['part']}")
    align = min(base.element_align, base.dtype.part.nbytes)
    return [Array(base.dtype.part, base.ndim, base.space, "A", base.shape, base.small,
                  align if align < base.dtype.part.nbytes else 0)]


def _part_interp(ctx, op, base):
    return ctx.view_array(op, base, lambda data, lead: getattr(data, op.part))


def _part_lower(ctx, op, base):
    b = ctx.builder
    t = op.base.type
    part = ctx.memory_type(t.dtype.part)
    index = ll.Constant(ll.IntType(64), 0 if op.part == "real" else 1)
    data = b.gep(b.extract_value(base, 0), [index], source_etype=part)
    two = ll.Constant(ll.IntType(64), 2)
    strides = [b.mul(stride, two) for stride in _strides(ctx, base, t.ndim)]
    shape = [ctx.dim(base, axis) for axis in range(t.ndim)]
    return ctx.make_array(op.result.type, data, shape, strides)


typing_rule(Part, _part_types)
interp_rule(Part, _part_interp)
lower_rule(Part, _part_lower)
_no_derivative(Part)
mutable(Part)


class Bitcast(Op):
    """%v = memory.bitcast(%base) {dtype}: the bytes of the C-contiguous array `base` read as
    elements of `dtype`; the last axis has its extent scaled by the ratio of the item sizes
    (the frontend checks that its bytes divide evenly)."""

    name = "memory.bitcast"
    traits = (Pure, Speculatable, Aliases)
    base = operand()
    dtype = attr()
    result = result()


def _bitcast_types(types, attrs):
    base = _array(types[0])
    dtype = attrs["dtype"]
    require(isinstance(dtype, Scalar), f"view dtype must be a scalar type, not {dtype}")
    if dtype.nbytes != base.dtype.nbytes:
        require(base.layout == "C", f"view of a non-contiguous array {base} as {dtype}")
    shape = None
    if base.shape is not None:
        shape = base.shape[:-1] + (base.shape[-1] * base.dtype.nbytes // dtype.nbytes,)
    # each element lies at a multiple of the old item size from an aligned start
    align = min(base.element_align, dtype.nbytes)
    return [Array(dtype, base.ndim, base.space, base.layout, shape,
                  base.small and dtype.nbytes >= base.dtype.nbytes,
                  align if align < dtype.nbytes else 0)]


def _bitcast_interp(ctx, op, base):
    dtype = op.dtype.dtype
    if dtype.itemsize != base.data.dtype.itemsize and base.parent is None:
        last = base.shape[-1] * base.data.dtype.itemsize
        if last % dtype.itemsize:
            raise ctx.error(op, f"cannot view the {last} bytes of the last axis as {dtype}")
    return ctx.view_array(op, base, lambda data, lead: data.view(dtype))


def _bitcast_lower(ctx, op, base):
    b = ctx.builder
    t, new = op.base.type, op.result.type
    shape = [ctx.dim(base, axis) for axis in range(t.ndim)]
    old_size, new_size = t.dtype.nbytes, new.dtype.nbytes
    if old_size != new_size:
        last = b.mul(shape[-1], ll.Constant(ll.IntType(64), old_size))
        shape[-1] = b.udiv(last, ll.Constant(ll.IntType(64), new_size))
        return ctx.make_array(new, b.extract_value(base, 0), shape)
    return ctx.make_array(new, b.extract_value(base, 0), shape, _strides(ctx, base, t.ndim))


typing_rule(Bitcast, _bitcast_types)
interp_rule(Bitcast, _bitcast_interp)
lower_rule(Bitcast, _bitcast_lower)
_no_derivative(Bitcast)
mutable(Bitcast)
