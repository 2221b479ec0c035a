"""Loads and stores of global memory with a cache hint (numba's `cuda.ldcg(a, i)`,
`cuda.stcs(a, i, v)`, CUDA's `__ldcg` / `__stcs`): PTX's `ld.global.cg`, `st.global.cs`, ...

The hint changes where the element is cached, never its value: the interpreter and the CPU
read and write as `memory.load` / `memory.store` do, and so do the derivatives (a hinted load's
cotangent accumulates into the shadow like a load's, a hinted store's adjoint is read from the
shadow like a store's). Only the NVPTX target emits the hinted instruction.
"""
from __future__ import annotations

from ..ir.operation import attr, operand, result
from ..ir.traits import ReadsMemory, WritesMemory
from ..ir.types import Array
from .base import Op, require
from .memory import check_indices
from .mutations import mutable
from .registry import adjoint_rule, interp_rule, jvp_rule, lower_rule, typing_rule
from .structural import FORWARD_LOAD, FORWARD_STORE, REVERSE_LOAD, REVERSE_STORE

# PTX's cache operators: loads cache at all levels (ca), in L2 only (cg), streaming (cs), last
# use (lu) or fetch again (cv, volatile); stores write back through L2 (cg), streaming (cs),
# write back (wb) or write through to memory (wt).
LOAD_HINTS = ("ca", "cg", "cs", "lu", "cv")
STORE_HINTS = ("cg", "cs", "wb", "wt")


def check_element(array, indices, hint: str, hints: tuple, what: str) -> Array:
    """The array type of a hinted access, which must be of global memory and hold integers or
    floats (the PTX instructions move bits of a width, `.b8` to `.b64`)."""
    require(hint in hints, f"{what} cache hint must be one of {', '.join(hints)}, not {hint!r}")
    check_indices(array, indices)
    require(array.space == "global", f"{what}{hint} accesses global memory, not {array.space}")
    dtype = array.dtype
    require(dtype.is_int or dtype.is_float,
            f"{what}{hint} requires an array of integer or float type, not {dtype}")
    return array


class CachedLoad(Op):
    """%v = memory.cached_load(%array, %i, %j) {hint = "cg"}: one element of global memory."""

    name = "memory.cached_load"
    traits = (ReadsMemory,)
    array = operand()
    indices = operand(variadic=True)
    hint = attr()
    result = result()


def _load_types(types, attrs):
    return [check_element(types[0], types[1:], attrs["hint"], LOAD_HINTS, "ld").dtype]


def _lower_load(ctx, op, array, *indices):
    ptr = ctx.element_pointer(op.array, array, list(op.indices), list(indices))
    return ctx.target.cached_load(ctx, op.array.type, ptr, op.hint)


typing_rule(CachedLoad, _load_types)
interp_rule(CachedLoad, lambda ctx, op, array, *indices: ctx.load(op, array, indices))
lower_rule(CachedLoad, _lower_load)
adjoint_rule(CachedLoad, REVERSE_LOAD)   # as a load: the cotangent accumulates into the shadow
jvp_rule(CachedLoad, FORWARD_LOAD)   # the tangent arrays are read with plain loads
mutable(CachedLoad)   # a read like any other: evolution may move, copy or delete it


class CachedStore(Op):
    """memory.cached_store(%array, %i, %j, %value) {hint = "cs"}"""

    name = "memory.cached_store"
    traits = (WritesMemory,)
    array = operand()
    indices = operand(variadic=True)
    value = operand()
    hint = attr()


def _store_types(types, attrs):
    array = check_element(types[0], types[1:-1], attrs["hint"], STORE_HINTS, "st")
    require(types[-1] == array.dtype, f"stored value is {types[-1]}, the array holds {array.dtype}")
    return []


def _lower_store(ctx, op, array, *rest):
    *indices, value = rest
    ptr = ctx.element_pointer(op.array, array, list(op.indices), indices)
    ctx.target.cached_store(ctx, op.array.type, ptr, value, op.hint)


typing_rule(CachedStore, _store_types)
interp_rule(CachedStore, lambda ctx, op, array, *rest: ctx.store(op, array, rest[:-1], rest[-1]))
lower_rule(CachedStore, _lower_store)
adjoint_rule(CachedStore, REVERSE_STORE)   # as a store: read the shadow, then zero it
jvp_rule(CachedStore, FORWARD_STORE)   # the tangents are stored with plain stores
mutable(CachedStore)   # a write like memory.store: every edit, the checks judge the variant
