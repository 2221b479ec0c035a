"""Arithmetic, comparison, bit, select and cast ops (`arith.*`)."""
from __future__ import annotations

import numpy as np

from ..ir.operation import attr, operand, result
from ..ir.traits import (Commutative, Comparison, ConstantLike, Conversion, Involution,
                         OneIsIdentity, Pure, Selects, Speculatable, ZeroIsAbsorbing,
                         ZeroIsIdentity)
from ..ir.types import Scalar, bool_
from .base import Binary, Op, Unary, require, same_type, scalar
from . import lowering
from .adjoints import cotangents, identity, negated, nondifferentiable, partial
from .tangents import from_partials, linear_in
from .registry import interp_rule, lower_rule, typing_rule
from .registry import host_applied, host_rule, index_form_rule


def elementwise(fn):
    """An interp rule applying a NumPy function, with the result cast to the op's type."""

    def rule(ctx, op, *values):
        return np.asarray(fn(*values)).astype(op.results[0].type.dtype, copy=False)

    rule.numpy_function = fn
    return rule


def _float_only(types, attrs):
    t = scalar(same_type(*types))
    require(t.is_float, f"operands must be floats, not {t}")
    return [t]


def _int_only(types, attrs):
    t = scalar(same_type(*types))
    require(t.is_int or t.is_bool, f"operands must be integers or bools, not {t}")
    return [t]


def _number(types, attrs):
    t = scalar(same_type(*types))
    require(not t.is_bool, "arithmetic on bool is not defined; cast to an integer first")
    return [t]


def _real_number(types, attrs):
    """Integers and floats. Complex products, quotients and the rest are real arithmetic on
    the parts (frontend/complexes.py), so that derivatives treat a complex value as its pair
    of reals; only the componentwise add, sub and neg stay complex ops."""
    t = _number(types, attrs)[0]
    require(not t.is_complex, f"this operation is not defined on {t} operands")
    return [t]


# ---- constants ---------------------------------------------------------------------------
class Constant(Op):
    """%r = arith.constant {value = 1.5, type = f32} : f32"""

    name = "arith.constant"
    traits = (Pure, Speculatable, ConstantLike)
    value = attr()
    type = attr()
    result = result()


typing_rule(Constant, lambda types, attrs: [attrs["type"]])
interp_rule(Constant, lambda ctx, op: np.asarray(op.value, dtype=op.type.dtype))
lower_rule(Constant, lambda ctx, op: ctx.constant(op.type, op.value))
host_rule(Constant, lambda op: ("const", op.value) if isinstance(op.value, int) else None)
nondifferentiable(Constant, "a constant")


# ---- arithmetic --------------------------------------------------------------------------
class Add(Binary):
    name = "arith.add"
    traits = (Commutative, ZeroIsIdentity)


typing_rule(Add, _number)
interp_rule(Add, elementwise(np.add))
lower_rule(Add, lowering.by_kind(int="add", float="fadd"))
cotangents(Add, identity, identity)
index_form_rule(Add, lambda forms, op, a, b: forms.sum(op, a, b))
host_rule(Add, host_applied)


class Sub(Binary):
    name = "arith.sub"
    traits = (ZeroIsIdentity,)


typing_rule(Sub, _number)
interp_rule(Sub, elementwise(np.subtract))
lower_rule(Sub, lowering.by_kind(int="sub", float="fsub"))
cotangents(Sub, identity, negated)
index_form_rule(Sub, lambda forms, op, a, b: forms.difference(op, a, b))
host_rule(Sub, host_applied)


class Mul(Binary):
    name = "arith.mul"
    traits = (Commutative, OneIsIdentity, ZeroIsAbsorbing)


typing_rule(Mul, _real_number)
interp_rule(Mul, elementwise(np.multiply))
lower_rule(Mul, lowering.by_kind(int="mul", float="fmul"))
cotangents(Mul, partial(lambda ad, op: ad.primal(op.rhs)),
           partial(lambda ad, op: ad.primal(op.lhs)))
index_form_rule(Mul, lambda forms, op, a, b: forms.product(op, a, b))
host_rule(Mul, host_applied)


class Div(Binary):
    """True division of floats."""

    name = "arith.div"
    traits = (OneIsIdentity,)


typing_rule(Div, _float_only)
interp_rule(Div, elementwise(np.true_divide))
lower_rule(Div, lowering.by_kind(float="fdiv"))
# Forward mode: d(a/b) = (da - (a/b) db) * (1/b), the reciprocal computed once and shared (CSE),
# so W tangent directions cost one division and multiplies instead of 2W divisions. Reverse
# mode (one cotangent) shares the reciprocal of a float64 divisor only (a float64 division is
# a long Newton sequence): the float64 Euler and Roe flux derivatives ran 15% and 8% faster on
# an H200, while float32 LBM's ran 10% slower with it (bench/results/grad-overhead-h200.md).


def _over(ad, op, value):
    """value / b, as value * (1/b) for a float64 b (one division shared by both operands)."""
    b = ad.primal(op.rhs)
    return ad.mul(value, ad.recip(b)) if b.type.bits == 64 else ad.div(value, b)


cotangents(Div, lambda ad, op, ct: _over(ad, op, ct),
           lambda ad, op, ct: ad.neg(_over(ad, op, ad.mul(ct, ad.primal(op.result)))),
           jvp=from_partials((
               lambda fw, op, t: fw.mul(t, fw.recip(fw.primal(op.rhs))),
               lambda fw, op, t: fw.neg(fw.mul(fw.mul(t, fw.primal(op.result)),
                                               fw.recip(fw.primal(op.rhs)))))))


def _int_safe(fn):
    """Integer division and modulo by zero give 0 on every backend (no trap)."""

    def safe(a, b):
        if np.asarray(a).dtype.kind in "iu":
            zero = np.asarray(b) == 0
            return np.where(zero, 0, fn(a, np.where(zero, 1, b)))
        return fn(a, b)

    return safe


class FloorDiv(Binary):
    """Python `//`: floor division for signed integers and floats."""

    name = "arith.floordiv"


typing_rule(FloorDiv, _real_number)
interp_rule(FloorDiv, elementwise(_int_safe(np.floor_divide)))
lower_rule(FloorDiv, lowering.floor_divide)
nondifferentiable(FloorDiv, "piecewise constant (floor of a quotient)")
host_rule(FloorDiv, host_applied)


class Mod(Binary):
    """Python `%`: the result has the sign of the divisor."""

    name = "arith.mod"


typing_rule(Mod, _real_number)
interp_rule(Mod, elementwise(_int_safe(np.remainder)))
lower_rule(Mod, lowering.modulo)
# x % y == x - floor(x / y) * y: slope 1 in x, -floor(x / y) in y (away from the jumps)
cotangents(Mod, identity, partial(lambda ad, op: ad.neg(ad.emit(
    FloorDiv, ad.primal(op.lhs), ad.primal(op.rhs)))))
index_form_rule(Mod, lambda forms, op, a, b: forms.remainder(op, a, b))


class Neg(Unary):
    name = "arith.neg"
    traits = (Involution,)


typing_rule(Neg, lambda types, attrs: _number(types, attrs))
interp_rule(Neg, elementwise(np.negative))
lower_rule(Neg, lowering.negate)
cotangents(Neg, negated)


class Min(Binary):
    """Minimum; for floats a NaN operand is ignored (C fmin)."""

    name = "arith.min"
    traits = (Commutative,)


typing_rule(Min, _real_number)
interp_rule(Min, elementwise(lambda a, b: np.fmin(a, b)))
lower_rule(Min, lowering.extremum("min"))
# the cotangent goes to the operand the result equals (lhs on ties; the non-NaN one on NaN)
cotangents(Min, *(lambda ad, op, ct, pick=pick: ad.pick(op, ct, pick) for pick in (0, 1)),
           jvp=lambda fw, op, ts: [fw.picked(op, *ts)])


class Max(Binary):
    """Maximum; for floats a NaN operand is ignored (C fmax)."""

    name = "arith.max"
    traits = (Commutative,)


typing_rule(Max, _real_number)
interp_rule(Max, elementwise(lambda a, b: np.fmax(a, b)))
lower_rule(Max, lowering.extremum("max"))
cotangents(Max, *(lambda ad, op, ct, pick=pick: ad.pick(op, ct, pick) for pick in (0, 1)),
           jvp=lambda fw, op, ts: [fw.picked(op, *ts)])
host_rule(Max, host_applied)


# ---- bits --------------------------------------------------------------------------------
class BitAnd(Binary):
    name = "arith.and"
    traits = (Commutative, ZeroIsAbsorbing)


typing_rule(BitAnd, _int_only)
interp_rule(BitAnd, elementwise(np.bitwise_and))
lower_rule(BitAnd, lambda ctx, op, lhs, rhs: ctx.builder.and_(lhs, rhs))
nondifferentiable(BitAnd, "bit operation")


class BitOr(Binary):
    name = "arith.or"
    traits = (Commutative, ZeroIsIdentity)


typing_rule(BitOr, _int_only)
interp_rule(BitOr, elementwise(np.bitwise_or))
lower_rule(BitOr, lambda ctx, op, lhs, rhs: ctx.builder.or_(lhs, rhs))
nondifferentiable(BitOr, "bit operation")


class BitXor(Binary):
    name = "arith.xor"
    traits = (Commutative, ZeroIsIdentity)


typing_rule(BitXor, _int_only)
interp_rule(BitXor, elementwise(np.bitwise_xor))
lower_rule(BitXor, lambda ctx, op, lhs, rhs: ctx.builder.xor(lhs, rhs))
nondifferentiable(BitXor, "bit operation")


def _shift(fn, fill_sign: bool):
    """Shift counts outside [0, bits) give 0 (or the sign fill for right shifts of signed)."""

    def shift(a, b):
        a = np.asarray(a)
        bits = a.dtype.itemsize * 8
        b = np.asarray(b)
        out_of_range = (b < 0) | (b >= bits)
        count = np.where(out_of_range, 0, b).astype(a.dtype)
        shifted = fn(a, count)
        if fill_sign and a.dtype.kind == "i":
            overflow = np.where(a < 0, -1, 0).astype(a.dtype)
        else:
            overflow = np.zeros((), a.dtype)
        return np.where(out_of_range, overflow, shifted)

    return shift


class Shl(Binary):
    name = "arith.shl"
    traits = (ZeroIsIdentity,)


typing_rule(Shl, _int_only)
interp_rule(Shl, elementwise(_shift(np.left_shift, fill_sign=False)))
lower_rule(Shl, lowering.shift("left"))
nondifferentiable(Shl, "bit operation")


class Shr(Binary):
    """Right shift: arithmetic for signed integers, logical for unsigned."""

    name = "arith.shr"
    traits = (ZeroIsIdentity,)


typing_rule(Shr, _int_only)
interp_rule(Shr, elementwise(_shift(np.right_shift, fill_sign=True)))
lower_rule(Shr, lowering.shift("right"))
nondifferentiable(Shr, "bit operation")


class Invert(Unary):
    """Bitwise complement `~x`."""

    name = "arith.invert"
    traits = (Involution,)


typing_rule(Invert, _int_only)
interp_rule(Invert, elementwise(np.invert))
lower_rule(Invert, lambda ctx, op, x: ctx.builder.not_(x))
nondifferentiable(Invert, "bit operation")


class Not(Unary):
    """Logical negation of a bool."""

    name = "arith.not"
    traits = (Involution,)


def _bool_unary(types, attrs):
    require(types[0] == bool_, f"operand must be bool, not {types[0]}")
    return [bool_]


typing_rule(Not, _bool_unary)
interp_rule(Not, elementwise(np.logical_not))
lower_rule(Not, lambda ctx, op, x: ctx.builder.not_(x))
nondifferentiable(Not, "logical operation")


# ---- comparison and selection ------------------------------------------------------------
PREDICATES = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
              "eq": np.equal, "ne": np.not_equal}


class Cmp(Binary):
    """%r = arith.cmp(%a, %b) {predicate = "lt"} : bool. Float compares are ordered except `ne`."""

    name = "arith.cmp"
    traits = (Comparison,)
    predicate = attr()


def _cmp_types(types, attrs):
    t = scalar(same_type(*types))
    require(attrs.get("predicate") in PREDICATES, f"unknown predicate {attrs.get('predicate')!r}")
    require(not t.is_complex or attrs["predicate"] in ("eq", "ne"),
            f"{t} values are not ordered: compare with == or != only")
    return [bool_]


typing_rule(Cmp, _cmp_types)
interp_rule(Cmp, lambda ctx, op, a, b: PREDICATES[op.predicate](a, b))
lower_rule(Cmp, lowering.compare)
nondifferentiable(Cmp, "comparison")


class Select(Op):
    """%r = arith.select(%cond, %if_true, %if_false)"""

    name = "arith.select"
    traits = (Pure, Speculatable, Selects)
    cond = operand()
    if_true = operand()
    if_false = operand()
    result = result()


def _select_types(types, attrs):
    require(types[0] == bool_, f"condition must be bool, not {types[0]}")
    return [scalar(same_type(types[1], types[2]))]


typing_rule(Select, _select_types)
interp_rule(Select, elementwise(np.where))
lower_rule(Select, lambda ctx, op, cond, if_true, if_false: ctx.builder.select(
    cond, if_true, if_false))
cotangents(Select, None,
           lambda ad, op, ct: ad.select(ad.primal(op.cond), ct, ad.zero(ct.type)),
           lambda ad, op, ct: ad.select(ad.primal(op.cond), ad.zero(ct.type), ct),
           jvp=linear_in(1, 2))


class Cast(Unary):
    """Conversion to `to`: int<->int wraps or extends, float->int truncates toward zero and
    saturates (NaN gives 0), int->float rounds to nearest."""

    name = "arith.cast"
    traits = (Conversion,)
    to = attr()


def _cast_types(types, attrs):
    scalar(types[0])
    target = attrs.get("to")
    require(isinstance(target, Scalar), f"cast target must be a scalar type, not {target}")
    return [target]


def float_to_int(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    values = np.asarray(values, dtype=np.float64)
    clipped = np.clip(np.nan_to_num(values, nan=0.0), float(info.min), float(info.max))
    # float64 cannot hold every 64-bit bound exactly; compare in float and fix up the ends
    out = np.trunc(clipped)
    result = np.empty(out.shape, dtype)
    too_big = out >= float(info.max)
    too_small = out <= float(info.min)
    middle = ~(too_big | too_small)
    result[middle] = out[middle].astype(dtype)
    result[too_big] = info.max
    result[too_small] = info.min
    return result


def _cast_interp(ctx, op, x):
    x = np.asarray(x)
    target = op.to.dtype
    if x.dtype.kind == "c" and target.kind not in "cb":   # the real part, as NumPy keeps
        x = x.real
    if x.dtype.kind == "f" and target.kind in "iu":
        return float_to_int(x, target)
    if target.kind == "b":
        return x != 0
    return x.astype(target)


typing_rule(Cast, _cast_types)
interp_rule(Cast, _cast_interp)
lower_rule(Cast, lambda ctx, op, x: ctx.cast(x, op.x.type, op.to))
# float -> float only: integers are never active. Real -> complex is (x, 0) and complex -> real
# its real part: each cast's adjoint is the cast back (pairs of reals).
cotangents(Cast, lambda ad, op, ct: ad.cast(ct, op.x.type), jvp=linear_in(0))
index_form_rule(Cast, lambda forms, op, x: forms.conversion(op, x))
# the launch computes in Python integers: an integer cast is taken to keep the value
host_rule(Cast, lambda op, x: x if op.x.type.is_int else None)
