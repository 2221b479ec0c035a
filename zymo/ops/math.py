"""Math functions as primitives (`math.*`): libdevice on the GPU, libm/LLVM on the CPU.

They are never differentiated through their implementation; each carries its own partials.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.operation import operand, result
from ..ir.traits import Pure, Speculatable
from ..ir.types import bool_
from .arith import elementwise
from .base import Binary, Op, Unary, require, same_type, scalar
from . import lowering
from .registry import interp_rule, lower_rule, typing_rule


class UnaryFloat(Unary):
    """A float -> float function; `libm` names the C function (f64 spelling)."""

    libm = ""


class BinaryFloat(Binary):
    libm = ""


def _float(types, attrs):
    t = scalar(same_type(*types))
    require(t.is_float, f"operands must be floats, not {t}; convert with zm.f32(...)")
    return [t]


typing_rule(UnaryFloat, _float)
typing_rule(BinaryFloat, _float)
lower_rule(UnaryFloat, lowering.math_call)   # every subclass: the target picks llvm.sin or sinf
lower_rule(BinaryFloat, lowering.math_call)

_erf = np.frompyfunc(math.erf, 1, 1)


def _unary(cls_name: str, libm: str, fn, doc: str = "") -> type[UnaryFloat]:
    cls = type(cls_name, (UnaryFloat,), {"name": f"math.{libm}", "libm": libm,
                                          "__doc__": doc or f"C {libm}()", "__module__": __name__})
    interp_rule(cls, elementwise(fn))
    return cls


# One stanza per line: class, C name, NumPy semantics.
Sqrt = _unary("Sqrt", "sqrt", np.sqrt)
Exp = _unary("Exp", "exp", np.exp)
Exp2 = _unary("Exp2", "exp2", np.exp2)
Log = _unary("Log", "log", np.log)
Log2 = _unary("Log2", "log2", np.log2)
Log10 = _unary("Log10", "log10", np.log10)
Log1p = _unary("Log1p", "log1p", np.log1p)
Expm1 = _unary("Expm1", "expm1", np.expm1)
Sin = _unary("Sin", "sin", np.sin)
Cos = _unary("Cos", "cos", np.cos)
Tan = _unary("Tan", "tan", np.tan)
Asin = _unary("Asin", "asin", np.arcsin)
Acos = _unary("Acos", "acos", np.arccos)
Atan = _unary("Atan", "atan", np.arctan)
Sinh = _unary("Sinh", "sinh", np.sinh)
Cosh = _unary("Cosh", "cosh", np.cosh)
Tanh = _unary("Tanh", "tanh", np.tanh)
Fabs = _unary("Fabs", "fabs", np.fabs)
Floor = _unary("Floor", "floor", np.floor)
Ceil = _unary("Ceil", "ceil", np.ceil)
Trunc = _unary("Trunc", "trunc", np.trunc)
Erf = _unary("Erf", "erf", lambda x: _erf(np.asarray(x, np.float64)).astype(np.float64))


def _binary(cls_name: str, libm: str, fn) -> type[BinaryFloat]:
    cls = type(cls_name, (BinaryFloat,), {"name": f"math.{libm}", "libm": libm,
                                           "__doc__": f"C {libm}()", "__module__": __name__})
    interp_rule(cls, elementwise(fn))
    return cls


Atan2 = _binary("Atan2", "atan2", np.arctan2)
Pow = _binary("Pow", "pow", np.power)
Fmod = _binary("Fmod", "fmod", np.fmod)
Copysign = _binary("Copysign", "copysign", np.copysign)
Hypot = _binary("Hypot", "hypot", np.hypot)


class Abs(Unary):
    """|x| of an integer (wraps for the most negative value)."""

    name = "math.iabs"


def _int_abs(types, attrs):
    t = scalar(types[0])
    require(t.is_int, f"operand must be an integer, not {t}; floats use math.fabs")
    return [t]


typing_rule(Abs, _int_abs)
interp_rule(Abs, elementwise(np.abs))
lower_rule(Abs, lowering.int_abs)


class FloatPredicate(Unary):
    libm = ""


def _float_predicate(types, attrs):
    t = scalar(types[0])
    require(t.is_float, f"operand must be a float, not {t}")
    return [bool_]


typing_rule(FloatPredicate, _float_predicate)


class IsNan(FloatPredicate):
    name = "math.isnan"


interp_rule(IsNan, lambda ctx, op, x: np.isnan(x))
lower_rule(IsNan, lowering.is_nan)


class IsInf(FloatPredicate):
    name = "math.isinf"


interp_rule(IsInf, lambda ctx, op, x: np.isinf(x))
lower_rule(IsInf, lowering.is_inf)


class Fma(Op):
    """a * b + c with one rounding."""

    name = "math.fma"
    traits = (Pure, Speculatable)
    a = operand()
    b = operand()
    c = operand()
    result = result()


def _fma_interp(ctx, op, a, b, c):
    dtype = op.result.type.dtype
    if dtype == np.float32:  # exact product in f64, one rounding of the sum (up to double rounding)
        return (np.float64(1) * a * b + c).astype(dtype)
    return np.asarray(a * b + c, dtype)


typing_rule(Fma, _float)
interp_rule(Fma, _fma_interp)
lower_rule(Fma, lowering.fused_multiply_add)
