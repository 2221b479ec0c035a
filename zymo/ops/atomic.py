"""Atomic read-modify-write ops (`atomic.*`); each returns the old value."""
from __future__ import annotations

import numpy as np

from ..ir.operation import operand, result
from ..ir.traits import Atomic, OrderDependent, ReadsMemory, WritesMemory
from ..ir.types import bool_, i32
from .base import Op, require
from .memory import check_indices
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
    array = check_indices(types[0], types[1:-1])
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


class _KeepingNaN:
    """numba's float atomic max/min: a NaN operand changes nothing, and a NaN already in
    memory stays there (`nanmax`/`nanmin` replace it: `np.fmax`/`np.fmin`)."""

    def __init__(self, ufunc):
        self.ufunc = ufunc

    def __call__(self, old, value):
        return np.where(np.isnan(old), old, self.ufunc(old, value))

    def accumulate(self, sequence, dtype=None):
        if np.isnan(sequence[0]):    # the first is what memory held
            return np.full_like(sequence, sequence[0])
        return self.ufunc.accumulate(sequence, dtype=dtype)


class AtomicMax(AtomicRMW):
    """max(old, value); on floats a NaN operand is ignored and a NaN in memory kept (numba's
    `cuda.atomic.max`)."""

    name = "atomic.max"


interp_rule(AtomicMax, atomic_update(_KeepingNaN(np.fmax)))
lower_rule(AtomicMax, lowering.atomic("max"))
absent(ADJOINT, AtomicMax, "the adjoint of an atomic max would need the winning thread")
absent(JVP, AtomicMax, "the tangent of an atomic max would need the winning thread")


class AtomicMin(AtomicRMW):
    """min(old, value), with NaNs as in `atomic.max`."""

    name = "atomic.min"


interp_rule(AtomicMin, atomic_update(_KeepingNaN(np.fmin)))
lower_rule(AtomicMin, lowering.atomic("min"))
absent(ADJOINT, AtomicMin, "the adjoint of an atomic min would need the winning thread")
absent(JVP, AtomicMin, "the tangent of an atomic min would need the winning thread")


class AtomicExch(AtomicRMW):
    name = "atomic.exch"


interp_rule(AtomicExch, atomic_update(_Exchange()))
lower_rule(AtomicExch, lowering.atomic("exch"))
absent(ADJOINT, AtomicExch, "an exchange on differentiated data loses the overwritten value")
absent(JVP, AtomicExch, "the value and its tangent would not be exchanged atomically together")


class AtomicNanMax(AtomicRMW):
    """max(old, value) where a NaN, operand or in memory, counts as missing (numba's
    `cuda.atomic.nanmax`): the result is NaN only when both are."""

    name = "atomic.nanmax"


interp_rule(AtomicNanMax, atomic_update(np.fmax))
lower_rule(AtomicNanMax, lowering.atomic("nanmax"))
absent(ADJOINT, AtomicNanMax, "the adjoint of an atomic max would need the winning thread")
absent(JVP, AtomicNanMax, "the tangent of an atomic max would need the winning thread")


class AtomicNanMin(AtomicRMW):
    """min(old, value) with NaN as missing (numba's `cuda.atomic.nanmin`)."""

    name = "atomic.nanmin"


interp_rule(AtomicNanMin, atomic_update(np.fmin))
lower_rule(AtomicNanMin, lowering.atomic("nanmin"))
absent(ADJOINT, AtomicNanMin, "the adjoint of an atomic min would need the winning thread")
absent(JVP, AtomicNanMin, "the tangent of an atomic min would need the winning thread")


class IntegerRMW(AtomicRMW):
    """An atomic read-modify-write that only integers of 32 or 64 bits have (as in numba
    and CUDA); `signed`: whether signed integers have it too."""

    signed = True


def _integer_rmw_rule(op_cls):
    def rule(types, attrs):
        (dtype,) = _rmw_types(types, attrs)
        kinds = "integers" if op_cls.signed else "unsigned integers"
        require(dtype.is_int and dtype.bits in (32, 64)
                and (op_cls.signed or not dtype.is_signed),
                f"{op_cls.name} works on {kinds} of 32 or 64 bits, not {dtype}")
        return [dtype]

    return rule


class _Increment:
    """CUDA's atomicInc: old + 1, or 0 where old >= limit."""

    def __call__(self, old, limit):
        old = np.asarray(old)
        return np.where(old >= limit, old.dtype.type(0), old + old.dtype.type(1))


class _Decrement:
    """CUDA's atomicDec: old - 1, or the limit where old is 0 or above it."""

    def __call__(self, old, limit):
        old = np.asarray(old)
        return np.where((old == 0) | (old > limit), limit, old - old.dtype.type(1))


class AtomicInc(IntegerRMW):
    """old + 1, wrapping to 0 past `value` (CUDA's atomicInc, numba's `cuda.atomic.inc`)."""

    name = "atomic.inc"
    signed = False


class AtomicDec(IntegerRMW):
    """old - 1, wrapping to `value` below 0 or above `value` (CUDA's atomicDec)."""

    name = "atomic.dec"
    signed = False


class AtomicAnd(IntegerRMW):
    name = "atomic.and"


class AtomicOr(IntegerRMW):
    name = "atomic.or"


class AtomicXor(IntegerRMW):
    name = "atomic.xor"


for _cls, _combine, _kind in ((AtomicInc, _Increment(), "inc"), (AtomicDec, _Decrement(), "dec"),
                              (AtomicAnd, np.bitwise_and, "and"),
                              (AtomicOr, np.bitwise_or, "or"), (AtomicXor, np.bitwise_xor, "xor")):
    typing_rule(_cls, _integer_rmw_rule(_cls))
    interp_rule(_cls, atomic_update(_combine))
    lower_rule(_cls, lowering.atomic(_kind))
    absent(ADJOINT, _cls, f"{_cls.name} works on integers, which carry no derivative")
    absent(JVP, _cls, f"{_cls.name} works on integers, which carry no derivative")


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
    array = check_indices(types[0], types[1:-2])
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
