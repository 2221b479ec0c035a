"""`zm.fp16.*` (numba's `cuda.fp16`): float16 arithmetic, comparisons and math on f16 values.

Each is an existing op on f16 operands, so every backend runs it as it runs f16 arithmetic
(native f16 instructions in PTX, f32 and a rounding on the CPU, np.float16 in the
interpreter) and derivatives come from those ops' rules. The few CUDA has as one instruction
but zymo has no op for (reciprocal, reciprocal square root, exp10, round to nearest even) are
short compositions.
"""
from __future__ import annotations

import math as pymath

from ..ir import types as T
from ..ir.values import Value
from ..ops import arith
from ..ops import math as zmath
from .convert import UserError
from .intrinsics import _arity, handler
from .values import PyConst, Weak


def half_operand(lw, node, value, name: str) -> Value:
    """An f16 IR value: numbers (weak) convert, a strong value must already be f16."""
    if isinstance(value, Weak):
        return lw.cast(value.value, T.f16)
    if isinstance(value, PyConst):
        return lw.constant(float(value.value), T.f16)
    v = lw.materialize(value, node=node)
    if v.type != T.f16:
        raise UserError(node, f"zm.fp16.{name} takes float16 values, not {v.type}",
                        "convert with zm.f16(x)")
    return v


def _ops(name: str, arity: int, build):
    def lower(lw, node, args, kwargs):
        _arity(node, args, arity, arity, f"zm.fp16.{name}")
        return build(lw, *(half_operand(lw, node, a, name) for a in args))

    handler(f"fp16.{name}")(lower)


def _op(cls, **attrs):
    return lambda lw, *xs: lw.b.value(cls, *xs, **attrs)


def _reciprocal(lw, x):
    return lw.b.value(arith.Div, lw.constant(1.0, T.f16), x)


def _exp10(lw, x):
    """10**x as 2**(x log2 10), computed in f32 (x log2 10 rounded to f16 would lose digits)."""
    wide = lw.cast(x, T.f32)
    scaled = lw.b.value(arith.Mul, wide, lw.constant(pymath.log2(10.0), T.f32))
    return lw.cast(lw.b.value(zmath.Exp2, scaled), T.f16)


def _rint(lw, x):
    """Round to nearest, ties to even, in f32 (which holds every f16 and x + 0.5 exactly)."""
    wide = lw.cast(x, T.f32)
    r = lw.b.value(zmath.Floor, lw.b.value(arith.Add, wide, lw.constant(0.5, T.f32)))
    tie = lw.b.value(arith.Cmp, lw.b.value(arith.Sub, r, wide), lw.constant(0.5, T.f32),
                     predicate="eq")
    odd = lw.b.value(arith.Cmp, lw.b.value(zmath.Fmod, r, lw.constant(2.0, T.f32)),
                     lw.constant(0.0, T.f32), predicate="ne")
    down = lw.b.value(arith.Sub, r, lw.constant(1.0, T.f32))
    chosen = lw.b.value(arith.Select, lw.b.value(arith.BitAnd, tie, odd), down, r)
    return lw.cast(chosen, T.f16)


for _name, _arity_of, _build in [
    ("hadd", 2, _op(arith.Add)), ("hsub", 2, _op(arith.Sub)), ("hmul", 2, _op(arith.Mul)),
    ("hdiv", 2, _op(arith.Div)), ("hneg", 1, _op(arith.Neg)), ("habs", 1, _op(zmath.Fabs)),
    ("hfma", 3, _op(zmath.Fma)), ("hmax", 2, _op(arith.Max)), ("hmin", 2, _op(arith.Min)),
    *[(f"h{p}", 2, _op(arith.Cmp, predicate=p)) for p in ("eq", "ne", "gt", "ge", "lt", "le")],
    ("hsin", 1, _op(zmath.Sin)), ("hcos", 1, _op(zmath.Cos)), ("hlog", 1, _op(zmath.Log)),
    ("hexp", 1, _op(zmath.Exp)), ("hsqrt", 1, _op(zmath.Sqrt)), ("hceil", 1, _op(zmath.Ceil)),
    ("hfloor", 1, _op(zmath.Floor)), ("htrunc", 1, _op(zmath.Trunc)),
    ("hlog2", 1, _op(zmath.Log2)), ("hlog10", 1, _op(zmath.Log10)),
    ("hexp2", 1, _op(zmath.Exp2)), ("hexp10", 1, _exp10), ("hrint", 1, _rint),
    ("hrcp", 1, _reciprocal),
    ("hrsqrt", 1, lambda lw, x: _reciprocal(lw, lw.b.value(zmath.Sqrt, x))),
]:
    _ops(_name, _arity_of, _build)
