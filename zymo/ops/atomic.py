"""Atomic read-modify-write ops (`atomic.*`); each returns the old value."""
from __future__ import annotations

import numpy as np

from ..ir.operation import operand, result
from ..ir.traits import Atomic, OrderDependent, ReadsMemory, WritesMemory
from ..ir.types import bool_, i32
from .base import Op, require
from .memory import _check_indices
from . import lowering
from .registry import (ADJOINT, JVP, absent, adjoint_rule, interp_rule, jvp_rule, lower_rule,
                       typing_rule)
from .structural import FORWARD_ATOMIC, REVERSE_ATOMIC_ADD, REVERSE_ATOMIC_SUB


def atomic_update(combine):
    """An interp rule: per active thread, in thread order, `array[i] = combine(old, operand)`,
    giving the old value. A ufunc `combine` lets the interpreter scan contended elements
    with its `accumulate`."""

    def rule(ctx, op, array, *rest):
        return ctx.atomic(op, array, rest[:-1], combine, rest[-1:])

    return rule


class _Exchange:
    """The combine function of an exchange; its `accumulate` is the sequence itself."""

    def __call__(self, old, value):
        return value

    @staticmethod
    def accumulate(sequence, dtype=None):
        return sequence


class AtomicRMW(Op):
    # the old value is whatever the threads before this one in the atomic order left
    traits = (Atomic, OrderDependent, ReadsMemory, WritesMemory)
    array = operand()
    indices = operand(variadic=True)
    value = operand()
    result = result()


def _rmw_types(types, attrs):
    array = _check_indices(types[0], types[1:-1])
    require(types[-1] == array.dtype,
            f"atomic operand is {types[-1]}, the array holds {array.dtype}")
    require(array.space in ("global", "shared"),
            f"atomics need global or shared memory, not {array.space}")
    return [array.dtype]


typing_rule(AtomicRMW, _rmw_types)


class AtomicAdd(AtomicRMW):
    name = "atomic.add"


interp_rule(AtomicAdd, atomic_update(np.add))
lower_rule(AtomicAdd, lowering.atomic("add"))
adjoint_rule(AtomicAdd, REVERSE_ATOMIC_ADD)   # d value += shadow[i]
jvp_rule(AtomicAdd, FORWARD_ATOMIC)   # tangent[i] += t value


class AtomicSub(AtomicRMW):
    name = "atomic.sub"


interp_rule(AtomicSub, atomic_update(np.subtract))
lower_rule(AtomicSub, lowering.atomic("sub"))
adjoint_rule(AtomicSub, REVERSE_ATOMIC_SUB)   # d value -= shadow[i]
jvp_rule(AtomicSub, FORWARD_ATOMIC)


class AtomicMax(AtomicRMW):
    name = "atomic.max"


interp_rule(AtomicMax, atomic_update(np.fmax))  # a NaN operand is ignored, as in arith.max
lower_rule(AtomicMax, lowering.atomic("max"))
absent(ADJOINT, AtomicMax, "the adjoint of an atomic max would need the winning thread")
absent(JVP, AtomicMax, "the tangent of an atomic max would need the winning thread")


class AtomicMin(AtomicRMW):
    name = "atomic.min"


interp_rule(AtomicMin, atomic_update(np.fmin))
lower_rule(AtomicMin, lowering.atomic("min"))
absent(ADJOINT, AtomicMin, "the adjoint of an atomic min would need the winning thread")
absent(JVP, AtomicMin, "the tangent of an atomic min would need the winning thread")


class AtomicExch(AtomicRMW):
    name = "atomic.exch"


interp_rule(AtomicExch, atomic_update(_Exchange()))
lower_rule(AtomicExch, lowering.atomic("exch"))
absent(ADJOINT, AtomicExch, "an exchange on differentiated data loses the overwritten value")
absent(JVP, AtomicExch, "the value and its tangent would not be exchanged atomically together")


class AtomicCas(Op):
    """old = array[i]; if old == expected: array[i] = new."""

    name = "atomic.cas"
    traits = (Atomic, OrderDependent, ReadsMemory, WritesMemory)
    array = operand()
    indices = operand(variadic=True)
    expected = operand()
    new = operand()
    result = result()


def _cas_types(types, attrs):
    array = _check_indices(types[0], types[1:-2])
    require(types[-1] == types[-2] == array.dtype,
            f"compare-and-swap operands are {types[-2]}, {types[-1]}; "
            f"the array holds {array.dtype}")
    require(array.dtype.is_int, f"compare-and-swap needs an integer array, not {array.dtype}")
    return [array.dtype]


typing_rule(AtomicCas, _cas_types)
interp_rule(AtomicCas, lambda ctx, op, array, *rest: ctx.atomic(
    op, array, rest[:-2], lambda old, expected, new: np.where(old == expected, new, old),
    rest[-2:]))
lower_rule(AtomicCas, lowering.atomic_cas)
absent(ADJOINT, AtomicCas, "compare-and-swap works on integers, which carry no derivative")
absent(JVP, AtomicCas, "compare-and-swap works on integers, which carry no derivative")


class Accumulate(Op):
    """array[i] += value, atomically, with no result: the adjoint of a read (`zymo/ad`).

    The target may combine the lanes of a warp that add to one address into one atomic (the
    GPU does, when the whole warp is active); the sum is the same either way."""

    name = "atomic.accumulate"
    traits = (Atomic, ReadsMemory, WritesMemory)
    array = operand()
    indices = operand(variadic=True)
    value = operand()


def _accumulate_types(types, attrs):
    _rmw_types(types, attrs)
    require(types[-1].is_float, f"accumulate adds floats, not {types[-1]}")
    return []


typing_rule(Accumulate, _accumulate_types)
def _accumulate_interp(ctx, op, array, *rest):
    ctx.atomic(op, array, rest[:-1], np.add, rest[-1:])


interp_rule(Accumulate, _accumulate_interp)
lower_rule(Accumulate, lowering.accumulate)
absent(ADJOINT, Accumulate, "made by the reverse transform, never differentiated again")
jvp_rule(Accumulate, FORWARD_ATOMIC)   # forward over reverse


class AccumulateInTile(Op):
    """array[i] += value, atomically, with no result, where every lane of a warp adds to one
    element per iteration of a loop and each iteration's element differs (the weights of a
    dense layer, `zymo/ad/private.py`). Where `whole` holds (the whole warp runs the loop), a
    GPU defers the sum over the lanes: each lane leaves its value, pre-summed with the lane
    16 apart, in row `slot` of the warp's rows of `tile`, the index in `keys`, and when
    `flush` holds (the last row of a chunk of 32 iterations, or the loop's last) lane r sums
    row r and makes the one atomic of its iteration: 16 loads and adds per lane per 32
    iterations instead of a shuffle tree per iteration. Elsewhere, and on targets without
    warps, it is `atomic.accumulate`. `warp` is the warp's number in its block (`tile_warps`
    of them have rows; `whole` is false for the others)."""

    name = "atomic.accumulate_in_tile"
    traits = (Atomic, ReadsMemory, WritesMemory)
    array = operand()
    indices = operand(variadic=True)
    value = operand()
    tile = operand()
    keys = operand()
    warp = operand()
    slot = operand()
    flush = operand()
    whole = operand()

    plain = Accumulate       # what forward mode makes of its tangents (`forward_atomic`)


TILE_COLUMNS = 16     # a row: lanes r and r + 16 summed by one shuffle
TILE_STRIDE = TILE_COLUMNS + 1   # padded, so that lane r reading row r hits bank r + m
TILE_BYTES = 8 * 32 * TILE_STRIDE * 4   # the tile's shared memory (8 warps of float32 rows)


def tile_warps(dtype) -> int:
    """Warps of a block with rows in a tile of `dtype` (the first 256 threads for float32,
    128 for float64); the block's other warps take the plain path."""
    return TILE_BYTES // (32 * TILE_STRIDE * dtype.bits // 8)


def _tile_types(types, attrs):
    *head, tile, keys, warp, slot, flush, whole = types
    _accumulate_types(head, attrs)
    require(tile.space == "shared" and tile.dtype == head[-1] and keys.space == "shared"
            and keys.dtype == i32, "the tile and its keys are shared arrays")
    require(warp == slot == i32 and flush == whole == bool_,
            "warp and slot are i32, flush and whole are bool")
    return []


typing_rule(AccumulateInTile, _tile_types)
interp_rule(AccumulateInTile, lambda ctx, op, array, *rest: ctx.atomic(
    op, array, rest[:-7], np.add, rest[-7:-6]))
lower_rule(AccumulateInTile, lowering.accumulate_in_tile)
absent(ADJOINT, AccumulateInTile, "made by the reverse transform, never differentiated again")
jvp_rule(AccumulateInTile, FORWARD_ATOMIC)   # forward over reverse
