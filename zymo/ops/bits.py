"""Bit counting (numba's `cuda.popc`, `cuda.clz`, `cuda.ffs`, `cuda.brev`): LLVM's ctpop,
ctlz, cttz and bitreverse, on the GPU one instruction each (popc, clz, brev; ffs from bfind).

Counts are i32 whatever the operand's width, as CUDA's `__popc`/`__popcll` return int; brev
keeps the operand's type. None is differentiable.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir as ll

from ..ir.types import i32
from .adjoints import nondifferentiable
from .base import Unary, require, scalar
from .registry import interp_rule, lower_rule, typing_rule


class PopCount(Unary):
    """The number of set bits."""

    name = "bits.popc"


class LeadingZeros(Unary):
    """The number of zero bits above the highest set bit (the width for 0)."""

    name = "bits.clz"


class FirstSet(Unary):
    """The 1-based position of the lowest set bit, 0 for 0."""

    name = "bits.ffs"


class BitReverse(Unary):
    """The bits in reverse order."""

    name = "bits.brev"


def _int_operand(types, attrs):
    t = scalar(types[0])
    require(t.is_int, f"bit counting takes an integer, not {t}")
    return t


typing_rule(PopCount, lambda types, attrs: (_int_operand(types, attrs), [i32])[1])
typing_rule(LeadingZeros, lambda types, attrs: (_int_operand(types, attrs), [i32])[1])
typing_rule(FirstSet, lambda types, attrs: (_int_operand(types, attrs), [i32])[1])
typing_rule(BitReverse, lambda types, attrs: [_int_operand(types, attrs)])


def _unsigned(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _popc(ctx, op, x):
    return np.bitwise_count(_unsigned(x)).astype(np.int32)


def _clz(ctx, op, x):
    u = _unsigned(x).astype(np.uint64)
    bits = np.asarray(x).dtype.itemsize * 8
    length = np.zeros(u.shape, np.int32)     # bit length, by halving
    for shift in (32, 16, 8, 4, 2, 1):
        big = u >= (np.uint64(1) << np.uint64(shift))
        length = length + np.where(big, shift, 0).astype(np.int32)
        u = np.where(big, u >> np.uint64(shift), u)
    length = length + (u > 0).astype(np.int32)
    return (bits - length).astype(np.int32)


def _ffs(ctx, op, x):
    u = _unsigned(x).astype(np.uint64)
    lowest = u & (~u + np.uint64(1))          # the lowest set bit alone
    return np.where(u == 0, 0, _clz_position(lowest) + 1).astype(np.int32)


def _clz_position(power: np.ndarray) -> np.ndarray:
    """log2 of powers of two (0 for 0)."""
    position = np.zeros(power.shape, np.int32)
    for shift in (32, 16, 8, 4, 2, 1):
        big = power >= (np.uint64(1) << np.uint64(shift))
        position = position + np.where(big, shift, 0).astype(np.int32)
        power = np.where(big, power >> np.uint64(shift), power)
    return position


def _brev(ctx, op, x):
    u = _unsigned(x)
    bits = u.dtype.itemsize * 8
    out = np.zeros(u.shape, np.uint64)
    wide = u.astype(np.uint64)
    for k in range(bits):
        out |= ((wide >> np.uint64(k)) & np.uint64(1)) << np.uint64(bits - 1 - k)
    return out.astype(u.dtype).view(np.asarray(x).dtype)


interp_rule(PopCount, _popc)
interp_rule(LeadingZeros, _clz)
interp_rule(FirstSet, _ffs)
interp_rule(BitReverse, _brev)


def _to_i32(ctx, value: ll.Value) -> ll.Value:
    width = value.type.width
    if width > 32:
        return ctx.builder.trunc(value, ll.IntType(32))
    if width < 32:
        return ctx.builder.zext(value, ll.IntType(32))
    return value


def _lower_popc(ctx, op, x):
    return _to_i32(ctx, ctx.call_intrinsic("llvm.ctpop", x.type, [x]))


def _lower_clz(ctx, op, x):
    false = ll.Constant(ll.IntType(1), 0)      # defined at 0: the width
    return _to_i32(ctx, ctx.call_intrinsic("llvm.ctlz", x.type, [x, false]))


def _lower_ffs(ctx, op, x):
    b = ctx.builder
    trailing = _to_i32(ctx, ctx.call_intrinsic("llvm.cttz", x.type,
                                               [x, ll.Constant(ll.IntType(1), 0)]))
    zero = b.icmp_unsigned("==", x, ll.Constant(x.type, 0))
    return b.select(zero, ll.Constant(ll.IntType(32), 0),
                    b.add(trailing, ll.Constant(ll.IntType(32), 1)))


def _lower_brev(ctx, op, x):
    return ctx.call_intrinsic("llvm.bitreverse", x.type, [x])


lower_rule(PopCount, _lower_popc)
lower_rule(LeadingZeros, _lower_clz)
lower_rule(FirstSet, _lower_ffs)
lower_rule(BitReverse, _lower_brev)
for _cls in (PopCount, LeadingZeros, FirstSet, BitReverse):
    nondifferentiable(_cls, "bit counting")
