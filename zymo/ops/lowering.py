"""Named shapes of LLVM lower rules, used by the op stanzas (`lower_rule(Op, helper(...))`).

A lower rule is `rule(ctx, op, *operands) -> value | list | None`, where `ctx` is the
lowering context of `backend/llvm/context.py` (its docstring lists what rules may use) and
the operands are LLVM values. Semantics match the interpreter rules beside them: integers
wrap, Python floor division and modulo, division by zero gives 0, out-of-range shifts give 0
(or the sign), float min/max ignore NaN. Target differences (special registers, barriers,
atomics, warps, math) go through `ctx.target`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir as ll

Rule = Callable[..., Any]


def _kind(op: Any) -> Any:
    """The scalar type the op computes on (its first operand's)."""
    return op.operands[0].type


# ---- arithmetic --------------------------------------------------------------------------
def by_kind(*, int: str = "", float: str = "") -> Rule:
    """A binary rule choosing an IRBuilder method by operand type (ints wrap)."""

    def rule(ctx, op, lhs, rhs):
        t = _kind(op)
        if t.is_complex:   # complex add and sub act on each part
            return componentwise(ctx, t, lambda a, b: getattr(ctx.builder, float)(a, b),
                                 lhs, rhs)
        name = float if t.is_float else int
        return getattr(ctx.builder, name)(lhs, rhs)

    return rule


def componentwise(ctx, t, fn, *values):
    """A complex value of type `t` whose parts are `fn` of the operands' parts."""
    b = ctx.builder
    parts = [fn(*(b.extract_value(v, k) for v in values)) for k in (0, 1)]
    return ctx.complex_value(t, *parts)


def negate(ctx, op, x):
    t = _kind(op)
    if t.is_complex:
        return componentwise(ctx, t, ctx.builder.fneg, x)
    return ctx.builder.fneg(x) if t.is_float else ctx.builder.neg(x)


def _safe_divisor(ctx, op, lhs, rhs):
    """(divisor that cannot trap, divisor == 0): 0 and INT_MIN / -1 divide by 1 instead."""
    b = ctx.builder
    t = _kind(op)
    zero = b.icmp_unsigned("==", rhs, ll.Constant(rhs.type, 0))
    unsafe = zero
    if t.is_signed:
        smallest = ll.Constant(lhs.type, -(1 << (t.bits - 1)))
        overflow = b.and_(b.icmp_signed("==", lhs, smallest),
                          b.icmp_signed("==", rhs, ll.Constant(rhs.type, -1)))
        unsafe = b.or_(zero, overflow)
    return b.select(unsafe, ll.Constant(rhs.type, 1), rhs), zero


def _int_divmod(ctx, op, lhs, rhs):
    """Python (floor quotient, modulo) of integers; both 0 for a zero divisor."""
    b = ctx.builder
    divisor, zero = _safe_divisor(ctx, op, lhs, rhs)
    nothing = ll.Constant(lhs.type, 0)
    if not _kind(op).is_signed:
        quotient, remainder = b.udiv(lhs, divisor), b.urem(lhs, divisor)
    else:
        quotient, remainder = b.sdiv(lhs, divisor), b.srem(lhs, divisor)
        # C truncates toward zero; Python floors: adjust when the signs differ
        inexact = b.icmp_unsigned("!=", remainder, nothing)
        signs_differ = b.icmp_signed("<", b.xor(remainder, divisor), nothing)
        adjust = b.and_(inexact, signs_differ)
        quotient = b.select(adjust, b.sub(quotient, ll.Constant(lhs.type, 1)), quotient)
        remainder = b.select(adjust, b.add(remainder, divisor), remainder)
    return b.select(zero, nothing, quotient), b.select(zero, nothing, remainder)


def _float_divmod(ctx, op, lhs, rhs):
    """NumPy's npy_divmod for floats: (floor quotient, modulo with the divisor's sign)."""
    b = ctx.builder
    t = lhs.type
    zero, one, half = ll.Constant(t, 0.0), ll.Constant(t, 1.0), ll.Constant(t, 0.5)
    copysign = lambda x, y: ctx.call_intrinsic("llvm.copysign", t, [x, y])
    fmod = b.frem(lhs, rhs)
    div = b.fdiv(b.fsub(lhs, fmod), rhs)
    has_mod = b.fcmp_unordered("!=", fmod, zero)
    signs_differ = b.xor(b.fcmp_ordered("<", rhs, zero), b.fcmp_ordered("<", fmod, zero))
    adjust = b.and_(has_mod, signs_differ)
    mod = b.select(adjust, b.fadd(fmod, rhs), fmod)
    div = b.select(adjust, b.fsub(div, one), div)
    mod = b.select(has_mod, mod, copysign(zero, rhs))
    floor = ctx.call_intrinsic("llvm.floor", t, [div])
    floor = b.select(b.fcmp_ordered(">", b.fsub(div, floor), half), b.fadd(floor, one), floor)
    quotient = b.select(b.fcmp_unordered("!=", div, zero), floor,
                        copysign(zero, b.fdiv(lhs, rhs)))
    by_zero = b.fcmp_ordered("==", rhs, zero)
    return b.select(by_zero, b.fdiv(lhs, rhs), quotient), b.select(by_zero, fmod, mod)


def floor_divide(ctx, op, lhs, rhs):
    divmod_ = _float_divmod if _kind(op).is_float else _int_divmod
    return divmod_(ctx, op, lhs, rhs)[0]


def modulo(ctx, op, lhs, rhs):
    divmod_ = _float_divmod if _kind(op).is_float else _int_divmod
    return divmod_(ctx, op, lhs, rhs)[1]


def extremum(which: str) -> Rule:
    """min or max: LLVM smin/umin/minnum (a NaN operand is ignored, as C fmin does)."""

    def rule(ctx, op, lhs, rhs):
        t = _kind(op)
        prefix = "" if t.is_float else ("s" if t.is_signed else "u")
        name = f"llvm.{which}num" if t.is_float else f"llvm.{prefix}{which}"
        return ctx.call_intrinsic(name, lhs.type, [lhs, rhs])

    return rule


# ---- bits --------------------------------------------------------------------------------
def shift(direction: str) -> Rule:
    """Shifts whose counts outside [0, bits) give 0, or the sign fill for a signed right
    shift. Bools shift as 8-bit integers, as NumPy does."""

    def rule(ctx, op, value, count):
        b = ctx.builder
        t = _kind(op)
        if t.is_bool:
            value, count = b.zext(value, ll.IntType(8)), b.zext(count, ll.IntType(8))
        bits = value.type.width
        outside = b.icmp_unsigned(">=", count, ll.Constant(count.type, bits))
        if direction == "right" and t.is_signed:
            clamped = b.select(outside, ll.Constant(count.type, bits - 1), count)
            shifted = b.ashr(value, clamped)
        else:
            moved = b.shl(value, count) if direction == "left" else b.lshr(value, count)
            shifted = b.select(outside, ll.Constant(value.type, 0), moved)
        if t.is_bool:
            return b.icmp_unsigned("!=", shifted, ll.Constant(shifted.type, 0))
        return shifted

    return rule


# ---- comparison --------------------------------------------------------------------------
_PREDICATES = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def compare(ctx, op, lhs, rhs):
    """Float compares are ordered (false on NaN) except `ne`; ints by their signedness."""
    b = ctx.builder
    t = _kind(op)
    symbol = _PREDICATES[op.predicate]
    if t.is_complex:   # == and != only: both parts equal (ordered), or either differs
        parts = [b.fcmp_unordered(symbol, b.extract_value(lhs, k), b.extract_value(rhs, k))
                 if op.predicate == "ne" else
                 b.fcmp_ordered(symbol, b.extract_value(lhs, k), b.extract_value(rhs, k))
                 for k in (0, 1)]
        return b.or_(*parts) if op.predicate == "ne" else b.and_(*parts)
    if t.is_float:
        if op.predicate == "ne":
            return b.fcmp_unordered(symbol, lhs, rhs)
        return b.fcmp_ordered(symbol, lhs, rhs)
    if t.is_signed:
        return b.icmp_signed(symbol, lhs, rhs)
    return b.icmp_unsigned(symbol, lhs, rhs)


# ---- math --------------------------------------------------------------------------------
def math_call(ctx, op, *args):
    """A C math function named by the op's `libm`; the target picks intrinsic or library."""
    return ctx.target.math_function(ctx, op.libm, op.results[0].type, list(args))


def int_abs(ctx, op, x):
    """|x|, wrapping for the most negative value; unsigned values are their own."""
    if not _kind(op).is_signed:
        return x
    return ctx.call_intrinsic("llvm.abs", x.type, [x, ll.Constant(ll.IntType(1), 0)])


def is_nan(ctx, op, x):
    return ctx.builder.fcmp_unordered("uno", x, x)


def is_inf(ctx, op, x):
    magnitude = ctx.call_intrinsic("llvm.fabs", x.type, [x])
    return ctx.builder.fcmp_ordered("==", magnitude, ll.Constant(x.type, float("inf")))


def is_finite(ctx, op, x):
    """Neither infinite nor NaN: |x| < inf, an ordered compare."""
    magnitude = ctx.call_intrinsic("llvm.fabs", x.type, [x])
    return ctx.builder.fcmp_ordered("<", magnitude, ll.Constant(x.type, float("inf")))


def frexp(ctx, op, x):
    """LLVM's frexp (inline bit arithmetic on every target), its exponent 0 where x is
    infinite or NaN (as NumPy's and C libraries' frexp give; LLVM leaves it unspecified)."""
    i32 = ll.IntType(32)
    pair = ctx.call_intrinsic("llvm.frexp", ll.LiteralStructType([x.type, i32]), [x],
                              overloads=[x.type, i32])
    b = ctx.builder
    exponent = b.select(is_finite(ctx, op, x), b.extract_value(pair, 1), ll.Constant(i32, 0))
    return [b.extract_value(pair, 0), exponent]


def fused_multiply_add(ctx, op, a, b, c):
    t = _kind(op)
    if t.bits == 16:   # the target decides: x86 has no f16 fma (its libcall is missing)
        return ctx.target.math_function(ctx, "fma", t, [a, b, c])
    return ctx.call_intrinsic("llvm.fma", a.type, [a, b, c])


# ---- memory ------------------------------------------------------------------------------
def load(ctx, op, array, *indices):
    ptr = ctx.element_pointer(op.array, array, list(op.indices), list(indices))
    return ctx.load(op.array.type, ptr)


def store(ctx, op, array, *rest):
    *indices, value = rest
    ptr = ctx.element_pointer(op.array, array, list(op.indices), indices)
    ctx.store(op.array.type, ptr, value)


def atomic(kind: str) -> Rule:
    """An atomic read-modify-write (add, sub, max, min, exch) returning the old value."""

    def rule(ctx, op, array, *rest):
        *indices, value = rest
        ptr = ctx.element_pointer(op.array, array, list(op.indices), indices)
        return ctx.target.atomic_rmw(ctx, kind, ptr, value, op.array.type.dtype)

    return rule


def accumulate(ctx, op, array, *rest):
    """An atomic add without result; the target may aggregate the lanes of a warp."""
    *indices, value = rest
    ptr = ctx.element_pointer(op.array, array, list(op.indices), indices)
    ctx.target.accumulate(ctx, ptr, value, op.array.type.dtype)


def accumulate_in_tile(ctx, op, array, *rest):
    """`atomic.accumulate_in_tile`: the target's tile path, else a plain accumulate."""
    *indices, value, tile, keys, warp, slot, flush, whole = rest
    ptr = ctx.element_pointer(op.array, array, list(op.indices), indices)

    def element(which, position):   # pointer to tile[position] or keys[position] (i32)
        arrays = {"tile": (op.tile, tile), "keys": (op.keys, keys), "array": (op.array, array)}
        value_, lowered = arrays[which]
        return ctx.element_pointer(value_, lowered, [op.slot], [position])

    ctx.target.accumulate_in_tile(ctx, ptr, value, op.array.type.dtype, element, index=(
        indices[0] if len(indices) == 1 else None), warp=warp, slot=slot, flush=flush,
        whole=whole)


def update(ctx, op, array, *rest):
    """`array[i] += value` on an element no other thread touches, as the target prefers."""
    *indices, value = rest
    ptr = ctx.element_pointer(op.array, array, list(op.indices), indices)
    ctx.target.owned_add(ctx, op.array.type, ptr, value, op.chained)


def atomic_cas(ctx, op, array, *rest):
    *indices, expected, new = rest
    ptr = ctx.element_pointer(op.array, array, list(op.indices), indices)
    return ctx.target.atomic_cas(ctx, ptr, expected, new)


# ---- threads and warps -------------------------------------------------------------------
def special_register(register: str) -> Rule:
    """A read of special register `register` (tid, ctaid, ntid, nctaid, laneid)."""
    return lambda ctx, op: ctx.target.special_register(ctx, register, op.axis)


def shuffle(mode: str) -> Rule:
    """A warp shuffle (idx, down, up, xor) through the target."""
    return lambda ctx, op, mask, value, lane: ctx.target.warp_shuffle(
        ctx, op, mode, mask, value, lane)


def vote(mode: str) -> Rule:
    """A warp vote (ballot, all, any) through the target."""
    return lambda ctx, op, mask, predicate: ctx.target.warp_vote(ctx, op, mode, mask, predicate)


# ---- control -----------------------------------------------------------------------------
def lower_if(ctx, op, cond):
    return ctx.branch(cond, op.then_region, op.else_region, [r.type for r in op.results])


def lower_for(ctx, op, lower, upper, step, *inits):
    return ctx.range_loop(lower, upper, step, list(inits), op.body, op.operands[0].type)


def lower_while(ctx, op, *inits):
    return ctx.while_loop(list(inits), op.before, op.body)
