"""Array memory: loads, stores, shapes and the allocation of shared, local and constant arrays."""
from __future__ import annotations

import numpy as np

from ..ir.operation import attr, operand, result
from ..ir.traits import (Allocates, Extent, Pure, ReadsMemory, Speculatable, ThreadVarying,
                         WritesMemory)
from ..ir.types import Array, Scalar, i64
from .base import Op, require
from . import lowering
from .adjoints import nondifferentiable
from .registry import (ADJOINT, absent, adjoint_rule, interp_rule, jvp_rule, lower_rule,
                       typing_rule)
from .registry import host_rule
from .structural import (FORWARD_ATOMIC, FORWARD_LOAD, FORWARD_STORE, REVERSE_LOAD,
                         REVERSE_STORE)


def check_indices(array, indices):
    require(isinstance(array, Array), f"indexed value must be an array, not {array}")
    require(len(indices) == array.ndim,
            f"{array.ndim}-d array indexed with {len(indices)} indices")
    for t in indices:
        require(isinstance(t, Scalar) and t.is_int, f"array index must be an integer, not {t}")
    return array


class Load(Op):
    """%v = memory.load(%array, %i, %j): one element."""

    name = "memory.load"
    traits = (ReadsMemory,)
    array = operand()
    indices = operand(variadic=True)
    result = result()


typing_rule(Load, lambda types, attrs: [check_indices(types[0], types[1:]).dtype])
interp_rule(Load, lambda ctx, op, array, *indices: ctx.load(op, array, indices))
lower_rule(Load, lowering.load)
adjoint_rule(Load, REVERSE_LOAD)   # accumulate into the shadow
jvp_rule(Load, FORWARD_LOAD)   # load the tangent arrays


class Store(Op):
    """memory.store(%array, %i, %j, %value)"""

    name = "memory.store"
    traits = (WritesMemory,)
    array = operand()
    indices = operand(variadic=True)
    value = operand()


def _store_types(types, attrs):
    array = check_indices(types[0], types[1:-1])
    require(types[-1] == array.dtype, f"stored value is {types[-1]}, the array holds {array.dtype}")
    return []


typing_rule(Store, _store_types)
interp_rule(Store, lambda ctx, op, array, *rest: ctx.store(op, array, rest[:-1], rest[-1]))
lower_rule(Store, lowering.store)
adjoint_rule(Store, REVERSE_STORE)   # read and zero the shadow
jvp_rule(Store, FORWARD_STORE)   # store the tangents


class Update(Op):
    """memory.update(%array, %i, %value): array[i] += value, where no other thread touches the
    element while the kernel runs (the adjoint of a read each thread owns, made by `zymo.ad`).

    `chained`: the update sits in a loop, each iteration updating another element; a
    read-modify-write then waits for the store before it (the compiler cannot see that the
    addresses differ), so a GPU does better with a relaxed atomic add, which needs no reply.
    Targets choose; the result is the same."""

    name = "memory.update"
    traits = (ReadsMemory, WritesMemory)
    array = operand()
    indices = operand(variadic=True)
    value = operand()
    chained = attr(default=False)


def _update_interp(ctx, op, array, *rest):
    old = ctx.load(op, array, rest[:-1])
    ctx.store(op, array, rest[:-1], old + rest[-1])


typing_rule(Update, _store_types)
interp_rule(Update, _update_interp)
lower_rule(Update, lowering.update)
absent(ADJOINT, Update, "made by the reverse transform, never differentiated again")
jvp_rule(Update, FORWARD_ATOMIC)   # forward over reverse: add tangents


class Dim(Op):
    """%n = memory.dim(%array) {axis = 0} : i64, the extent of one axis."""

    name = "memory.dim"
    traits = (Pure, Speculatable, Extent)
    array = operand()
    axis = attr()
    result = result()


def _dim_types(types, attrs):
    require(isinstance(types[0], Array), f"shape of a non-array {types[0]}")
    require(0 <= attrs["axis"] < types[0].ndim,
            f"axis {attrs['axis']} of a {types[0].ndim}-d array")
    return [i64]


typing_rule(Dim, _dim_types)
interp_rule(Dim, lambda ctx, op, array: np.asarray(array.shape[op.axis], np.int64))
lower_rule(Dim, lambda ctx, op, array: ctx.dim(array, op.axis))
nondifferentiable(Dim, "an array extent")
host_rule(Dim, lambda op, array: ("dim", array[1], op.axis) if array[0] == "arg" else None)


class Alloc(Op):
    """Allocation of an array with a static shape in one address space."""

    traits = (Allocates,)
    space = ""
    shape = attr()
    dtype = attr()
    result = result()


def _alloc_types(cls_space):
    def rule(types, attrs):
        shape = tuple(attrs["shape"])
        require(all(isinstance(n, int) and n >= 0 for n in shape), f"bad array shape {shape}")
        if cls_space == "shared" and shape == (0,):
            # numba's dynamic shared memory: as many elements as the launch's dynamic shared
            # bytes hold, known when the kernel runs (no static shape)
            return [Array(attrs["dtype"], 1, "shared", "C")]
        return [Array(attrs["dtype"], len(shape), cls_space, "C", shape)]

    return rule


class SharedAlloc(Alloc):
    """One array per block, shared by its threads (`zm.shared.array`)."""

    name = "memory.shared"


typing_rule(SharedAlloc, _alloc_types("shared"))
interp_rule(SharedAlloc, lambda ctx, op: ctx.shared_array(op))
lower_rule(SharedAlloc, lambda ctx, op: ctx.shared_array(op.result.type))
nondifferentiable(SharedAlloc, "an allocation (its shadow is made in the forward sweep)")


class LocalAlloc(Alloc):
    """One array per thread (`zm.local.array`)."""

    name = "memory.local"
    traits = (ThreadVarying,)


typing_rule(LocalAlloc, _alloc_types("local"))
interp_rule(LocalAlloc, lambda ctx, op: ctx.local_array(op))
lower_rule(LocalAlloc, lambda ctx, op: ctx.local_array(op.result.type))
nondifferentiable(LocalAlloc, "an allocation (its shadow is made in the forward sweep)")


class ConstArray(Op):
    """A read-only array whose contents are fixed at compile time (`zm.const.array_like`)."""

    name = "memory.const"
    traits = (Allocates, Pure)
    data = attr()
    result = result()


def _const_types(types, attrs):
    data = attrs["data"]
    require(isinstance(data, np.ndarray), "constant array data must be a NumPy array")
    from ..ir.types import scalar_of_dtype
    return [Array(scalar_of_dtype(data.dtype), data.ndim, "const", "C", tuple(data.shape))]


typing_rule(ConstArray, _const_types)
interp_rule(ConstArray, lambda ctx, op: ctx.const_array(op))
lower_rule(ConstArray, lambda ctx, op: ctx.const_array(op.result.type, op.data))
nondifferentiable(ConstArray, "compile-time data")
