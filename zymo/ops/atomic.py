"""Atomic read-modify-write ops (`atomic.*`); each returns the old value."""
from __future__ import annotations

from ..ir.operation import operand, result
from ..ir.traits import Atomic, ReadsMemory, WritesMemory
from .base import Op, require
from .memory import _check_indices
from .registry import typing_rule


class AtomicRMW(Op):
    traits = (Atomic, ReadsMemory, WritesMemory)
    array = operand()
    indices = operand(variadic=True)
    value = operand()
    result = result()


def _rmw_types(types, attrs):
    array = _check_indices(types[0], types[1:-1])
    require(types[-1] == array.dtype, f"atomic operand is {types[-1]}, the array holds {array.dtype}")
    require(array.space in ("global", "shared"), f"atomics need global or shared memory, not {array.space}")
    return [array.dtype]


typing_rule(AtomicRMW, _rmw_types)


class AtomicAdd(AtomicRMW):
    name = "atomic.add"


class AtomicSub(AtomicRMW):
    name = "atomic.sub"


class AtomicMax(AtomicRMW):
    name = "atomic.max"


class AtomicMin(AtomicRMW):
    name = "atomic.min"


class AtomicExch(AtomicRMW):
    name = "atomic.exch"


class AtomicCas(Op):
    """old = array[i]; if old == expected: array[i] = new."""

    name = "atomic.cas"
    traits = (Atomic, ReadsMemory, WritesMemory)
    array = operand()
    indices = operand(variadic=True)
    expected = operand()
    new = operand()
    result = result()


def _cas_types(types, attrs):
    array = _check_indices(types[0], types[1:-2])
    require(types[-1] == types[-2] == array.dtype,
            f"compare-and-swap operands are {types[-2]}, {types[-1]}; the array holds {array.dtype}")
    require(array.dtype.is_int, f"compare-and-swap needs an integer array, not {array.dtype}")
    return [array.dtype]


typing_rule(AtomicCas, _cas_types)
