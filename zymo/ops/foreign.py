"""Calls of foreign device functions (`func.foreign_call`): CUDA C or PTX the program is linked
with (`cuda.declare_device(name, sig, link=...)` in numba's dialect).

Nothing is known of what the callee does, so the op claims every effect a pass could move,
merge or drop wrongly: it reads and writes memory (through the pointers it is given, and
any other memory it reaches), orders memory like a fence, may print, and its result may
depend on other threads. It is not taken to synchronize threads: a callee that waits at a
barrier must be called where every thread of the block calls it, as in CUDA C. It has no
derivative: a kernel whose derivative would flow through it is a compile error naming the
call.
"""
from __future__ import annotations

import numpy as np

from ..ir.operation import attr, operand, result
from ..ir.traits import Fence, OrderDependent, Output, ReadsMemory, WritesMemory
from ..ir.types import Array, Scalar
from .base import Op, require
from .mutations import operands_only
from .registry import ADJOINT, JVP, absent, interp_rule, lower_rule, typing_rule


class ForeignCall(Op):
    """%r = func.foreign_call(%args) {callee = ForeignFunction}: calls `callee.symbol` with
    the callee's ABI. A pointer argument is an array followed by one index per axis: the
    address of that element (`ffi.from_buffer(a[i:])` is `a, i`; a whole array `a, 0`)."""

    name = "func.foreign_call"
    traits = (ReadsMemory, WritesMemory, Fence, Output, OrderDependent)
    args = operand(variadic=True)
    results_ = result(variadic=True)
    callee = attr()

    def arguments(self, values=None) -> list:
        """Per declared input: a value, or (array, indices) for a pointer (of `values`, the
        operands' counterparts in a lowering or the interpreter; default the operands)."""
        return _grouped(self.callee, list(self.operands if values is None else values),
                        [v.type for v in self.operands])


def _grouped(callee, values: list, types: list) -> list:
    grouped, k = [], 0
    for declared in callee.inputs:
        require(k < len(values), f"{callee.symbol} takes {len(callee.inputs)} arguments")
        if isinstance(declared, Array):
            rank = types[k].ndim if isinstance(types[k], Array) else 0
            grouped.append((values[k], values[k + 1:k + 1 + rank]))
            k += 1 + rank
        else:
            grouped.append(values[k])
            k += 1
    require(k == len(values), f"{callee.symbol} takes {len(callee.inputs)} arguments")
    return grouped


def _types(types, attrs):
    callee = attrs["callee"]
    for given, declared in zip(_grouped(callee, list(types), list(types)), callee.inputs):
        if isinstance(declared, Array):
            array, indices = given
            require(isinstance(array, Array) and array.dtype == declared.dtype,
                    f"{callee.symbol} takes a pointer to {declared.dtype}, got {array}")
            require(all(isinstance(t, Scalar) and t.is_int for t in indices),
                    "the element of a pointer argument is named by integers")
        else:
            require(given == declared, f"{callee.symbol} takes {declared}, got {given}")
    return [] if callee.output is None else [callee.output]


def _interp(ctx, op, *args):
    """Thread by thread, through the callee compiled for the host (ctypes)."""
    function = ctx.foreign_function(op.callee, op.loc)
    callee = op.callee
    out_dtype = callee.output.dtype if callee.output is not None else np.dtype(np.int8)
    mask = ctx.mask
    results = np.zeros(mask.shape, out_dtype)
    columns = [(a[0], [np.broadcast_to(np.asarray(i), mask.shape) for i in a[1]])
               if isinstance(t, Array) else np.broadcast_to(np.asarray(a), mask.shape)
               for a, t in zip(op.arguments(args), callee.inputs)]
    for thread in np.flatnonzero(mask):
        values = []
        for column, t in zip(columns, callee.inputs):
            if isinstance(t, Array):
                buffer, indices = column
                offset = sum(int(i[thread]) * s for i, s in zip(indices, buffer.strides))
                values.append(ctx.foreign_pointer(buffer, op) + offset * buffer.data.itemsize)
            else:
                values.append(t.dtype.type(column[thread]))
        if callee.abi == "c":
            returned = function(*values)
            if callee.output is not None:
                results[thread] = returned
        else:
            out = np.zeros(1, out_dtype)
            function(out.ctypes.data, *values)
            results[thread] = out[0]
    return results if callee.output is not None else None


def _lower(ctx, op, *args):
    callee = op.callee
    values = []
    for value, group, declared in zip(op.arguments(args), op.arguments(), callee.inputs):
        if isinstance(declared, Array):
            (array, indices), (array_value, index_values) = value, group
            pointer = ctx.element_pointer(array_value, array, list(index_values), list(indices))
            values.append(ctx.generic_pointer(pointer))
        else:
            values.append(ctx.to_memory(declared, value))
    out_type = ctx.memory_type(callee.output) if callee.output is not None else None
    result = ctx.call_foreign(callee, out_type, values)
    return [] if callee.output is None else [ctx.from_memory(callee.output, result)]


typing_rule(ForeignCall, _types)
interp_rule(ForeignCall, _interp)
lower_rule(ForeignCall, _lower)
operands_only(ForeignCall)   # evolution may feed it other values, never drop or move it
absent(ADJOINT, ForeignCall, "a foreign device function has no derivative zymo can know")
absent(JVP, ForeignCall, "a foreign device function has no derivative zymo can know")


def linked_sources(module) -> tuple:
    """What the program is linked with: the kernel's own `link` (numba's `cuda.jit(link=...)`)
    and the sources of every foreign function it calls, each once."""
    sources = list(module.kernel.attrs.get("link", ()))
    for func in module:
        for op in func.walk():
            if isinstance(op, ForeignCall):
                sources.extend(s for s in op.callee.link if s not in sources)
    return tuple(sources)
