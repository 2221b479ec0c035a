"""Math functions as primitives (`math.*`): libdevice on the GPU, libm/LLVM on the CPU.

They are never differentiated through their implementation; each carries its own partials.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.operation import operand, result
from ..ir.traits import Pure, Speculatable
from ..ir.types import bool_, i32
from .arith import elementwise
from .base import Binary, Op, Unary, require, same_type, scalar
from . import lowering
from .adjoints import cotangents, identity, nondifferentiable, partial
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


def _unary(cls_name: str, libm: str, fn, slope) -> type[UnaryFloat]:
    """`slope(ad, x, y)`: dy/dx from the primal operand and result; None: piecewise constant."""
    cls = type(cls_name, (UnaryFloat,), {"name": f"math.{libm}", "libm": libm,
                                          "__doc__": f"C {libm}()", "__module__": __name__})
    interp_rule(cls, elementwise(fn))
    if slope is None:
        nondifferentiable(cls, f"{libm} is piecewise constant")
    else:
        cotangents(cls, partial(lambda ad, op: slope(ad, ad.primal(op.x), ad.primal(op.result))))
    return cls


def _reciprocal_sqrt_one_minus_square(ad, x):
    return ad.div(ad.one(x.type), ad.call(Sqrt, ad.sub(ad.one(x.type), ad.mul(x, x))))


def _half_reciprocal(ad, y):
    """0.5 / y. For float64 as 0.5 * (1 / y), equal for every y whose reciprocal is normal: a
    reciprocal is a shorter Newton sequence than a division, and CSE shares it with any other
    division by y (float32 keeps its division: its rcp.rn is no cheaper)."""
    if y.type.bits == 64:
        return ad.mul(ad.const(0.5, y.type), ad.recip(y))
    return ad.div(ad.const(0.5, y.type), y)


# One stanza per line: class, C name, NumPy semantics, derivative (ad, x, y) -> dy/dx.
Sqrt = _unary("Sqrt", "sqrt", np.sqrt, lambda ad, x, y: _half_reciprocal(ad, y))
Exp = _unary("Exp", "exp", np.exp,
             lambda ad, x, y: y)
Exp2 = _unary("Exp2", "exp2", np.exp2,
              lambda ad, x, y: ad.mul(y, ad.const(math.log(2.0), y.type)))
Log = _unary("Log", "log", np.log,
             lambda ad, x, y: ad.div(ad.one(x.type), x))
Log2 = _unary("Log2", "log2", np.log2,
              lambda ad, x, y: ad.div(ad.one(x.type), ad.mul(x, ad.const(math.log(2.0), x.type))))
Log10 = _unary("Log10", "log10", np.log10,
               lambda ad, x, y: ad.div(ad.one(x.type), ad.mul(x, ad.const(math.log(10.0), x.type))))
Log1p = _unary("Log1p", "log1p", np.log1p,
               lambda ad, x, y: ad.div(ad.one(x.type), ad.add(ad.one(x.type), x)))
Expm1 = _unary("Expm1", "expm1", np.expm1,
               lambda ad, x, y: ad.add(y, ad.one(y.type)))
Sin = _unary("Sin", "sin", np.sin,
             lambda ad, x, y: ad.call(Cos, x))
Cos = _unary("Cos", "cos", np.cos,
             lambda ad, x, y: ad.neg(ad.call(Sin, x)))
Tan = _unary("Tan", "tan", np.tan,
             lambda ad, x, y: ad.add(ad.one(y.type), ad.mul(y, y)))
Asin = _unary("Asin", "asin", np.arcsin,
              lambda ad, x, y: _reciprocal_sqrt_one_minus_square(ad, x))
Acos = _unary("Acos", "acos", np.arccos,
              lambda ad, x, y: ad.neg(_reciprocal_sqrt_one_minus_square(ad, x)))
Atan = _unary("Atan", "atan", np.arctan,
              lambda ad, x, y: ad.div(ad.one(x.type), ad.add(ad.one(x.type), ad.mul(x, x))))
Sinh = _unary("Sinh", "sinh", np.sinh,
              lambda ad, x, y: ad.call(Cosh, x))
Cosh = _unary("Cosh", "cosh", np.cosh,
              lambda ad, x, y: ad.call(Sinh, x))
Tanh = _unary("Tanh", "tanh", np.tanh,
              lambda ad, x, y: ad.sub(ad.one(y.type), ad.mul(y, y)))
Asinh = _unary("Asinh", "asinh", np.arcsinh,
               lambda ad, x, y: ad.div(ad.one(x.type), ad.call(
                   Sqrt, ad.add(ad.mul(x, x), ad.one(x.type)))))
Acosh = _unary("Acosh", "acosh", np.arccosh,
               lambda ad, x, y: ad.div(ad.one(x.type), ad.call(
                   Sqrt, ad.sub(ad.mul(x, x), ad.one(x.type)))))
Atanh = _unary("Atanh", "atanh", np.arctanh,
               lambda ad, x, y: ad.div(ad.one(x.type), ad.sub(ad.one(x.type), ad.mul(x, x))))
Cbrt = _unary("Cbrt", "cbrt", np.cbrt,
              lambda ad, x, y: ad.div(ad.one(y.type), ad.mul(ad.const(3.0, y.type),
                                                            ad.mul(y, y))))
Fabs = _unary("Fabs", "fabs", np.fabs,
              lambda ad, x, y: ad.sign(x))
Floor = _unary("Floor", "floor", np.floor, None)
Ceil = _unary("Ceil", "ceil", np.ceil, None)
Trunc = _unary("Trunc", "trunc", np.trunc, None)
# np.asarray around the ufunc: on a 0-d operand (a constant, a uniform value) it gives a float
Erf = _unary("Erf", "erf", lambda x: np.asarray(_erf(np.asarray(x, np.float64)), np.float64),
             lambda ad, x, y: ad.mul(ad.const(2.0 / math.sqrt(math.pi), x.type),
                                     ad.call(Exp, ad.neg(ad.mul(x, x)))))


def _c_semantics(fn, at_pole):
    """`fn` of Python's math module elementwise as C's: where Python raises (a pole, a domain
    error, an overflow) the value C gives, `at_pole(x)`."""
    def one(x):
        try:
            return fn(x)
        except (ValueError, OverflowError):
            return at_pole(x)

    ufunc = np.frompyfunc(one, 1, 1)
    # np.asarray around the ufunc: on a 0-d operand it gives a float, not an object
    return lambda x: np.asarray(ufunc(np.asarray(x, np.float64)), np.float64)


def _gamma_at_pole(x):
    """tgamma: +-inf at +-0, NaN at the negative integers and -inf, inf where it overflows."""
    if x == 0:
        return math.copysign(math.inf, x)
    return math.nan if x < 0 else math.inf


# digamma, the derivative of lgamma, from what there is: reflection below 1/2, six steps of
# the recurrence psi(y) = psi(y + 1) - 1 / y, and the asymptotic series at y + 6 >= 6.5,
# whose terms up to z**-12 leave an error below 1e-13 there
_DIGAMMA_SERIES = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760)


def digamma(ad, x):
    t = x.type
    reflect = ad.cmp(x, ad.const(0.5, t), "lt")
    y = ad.select(reflect, ad.sub(ad.one(t), x), x)
    steps = ad.recip(y)
    for k in range(1, 6):
        steps = ad.add(steps, ad.recip(ad.add(y, ad.const(float(k), t))))
    z = ad.add(y, ad.const(6.0, t))
    w = ad.recip(ad.mul(z, z))
    tail = ad.const(_DIGAMMA_SERIES[-1], t)
    for coefficient in reversed(_DIGAMMA_SERIES[:-1]):
        tail = ad.add(ad.const(coefficient, t), ad.mul(w, tail))
    series = ad.sub(ad.sub(ad.call(Log, z), ad.div(ad.const(0.5, t), z)), ad.mul(w, tail))
    psi = ad.sub(series, steps)
    pi_x = ad.mul(ad.const(math.pi, t), x)
    reflected = ad.sub(psi, ad.div(ad.const(math.pi, t), ad.call(Tan, pi_x)))
    return ad.select(reflect, reflected, psi)


Tgamma = _unary("Tgamma", "tgamma", _c_semantics(math.gamma, _gamma_at_pole),
                lambda ad, x, y: ad.mul(y, digamma(ad, x)))
Lgamma = _unary("Lgamma", "lgamma", _c_semantics(math.lgamma, lambda x: math.inf),
                lambda ad, x, y: digamma(ad, x))
Erfc = _unary("Erfc", "erfc", _c_semantics(math.erfc, lambda x: math.nan),
              lambda ad, x, y: ad.mul(ad.const(-2.0 / math.sqrt(math.pi), x.type),
                                      ad.call(Exp, ad.neg(ad.mul(x, x)))))
Rint = _unary("Rint", "rint", np.rint, None)   # to the nearest integer, ties to even


def _binary(cls_name: str, libm: str, fn) -> type[BinaryFloat]:
    cls = type(cls_name, (BinaryFloat,), {"name": f"math.{libm}", "libm": libm,
                                           "__doc__": f"C {libm}()", "__module__": __name__})
    interp_rule(cls, elementwise(fn))
    return cls


def _square_norm(ad, op):
    y, x = ad.primal(op.lhs), ad.primal(op.rhs)
    return ad.add(ad.mul(x, x), ad.mul(y, y))


def _pow_exponent_slope(ad, op):
    """d x**y / dy = log(x) x**y, taken as 0 at x == 0 (the limit from above for y > 0)."""
    x = ad.primal(op.lhs)
    zero = ad.zero(x.type)
    safe = ad.select(ad.cmp(x, zero, "eq"), ad.one(x.type), x)
    return ad.select(ad.cmp(x, zero, "eq"), zero, ad.mul(ad.call(Log, safe), ad.primal(op.result)))


Atan2 = _binary("Atan2", "atan2", np.arctan2)   # atan2(y, x)
cotangents(Atan2, partial(lambda ad, op: ad.div(ad.primal(op.rhs), _square_norm(ad, op))),
           partial(lambda ad, op: ad.neg(ad.div(ad.primal(op.lhs), _square_norm(ad, op)))))

def _pow_base_slope(ad, op):
    """d x**y / dx = y x**(y-1), and 0 where y == 0 (x**0 is 1 for every x, 0 included; the
    formula would give 0 * inf there)."""
    y = ad.primal(op.rhs)
    zero = ad.zero(y.type)
    slope = ad.mul(y, ad.call(Pow, ad.primal(op.lhs), ad.sub(y, ad.one(y.type))))
    return ad.select(ad.cmp(y, zero, "eq"), zero, slope)


Pow = _binary("Pow", "pow", np.power)
cotangents(Pow, partial(_pow_base_slope), partial(_pow_exponent_slope))

Fmod = _binary("Fmod", "fmod", np.fmod)   # x - trunc(x / y) * y
cotangents(Fmod, identity, partial(lambda ad, op: ad.neg(ad.call(
    Trunc, ad.div(ad.primal(op.lhs), ad.primal(op.rhs))))))

Copysign = _binary("Copysign", "copysign", np.copysign)   # |x| with the sign of y
cotangents(Copysign, partial(lambda ad, op: ad.select(
    ad.cmp(ad.primal(op.result), ad.primal(op.lhs), "eq"), ad.one(op.lhs.type),
    ad.const(-1.0, op.lhs.type))), None)

Hypot = _binary("Hypot", "hypot", np.hypot)
cotangents(Hypot, partial(lambda ad, op: ad.div(ad.primal(op.lhs), ad.primal(op.result))),
           partial(lambda ad, op: ad.div(ad.primal(op.rhs), ad.primal(op.result))))



def _remainder_interp(x, y):
    """C remainder: x - n y with n the integer nearest x / y (ties to even), NaN where x is
    infinite or y is 0, computed exactly as Python's math.remainder does."""
    def one(a, b):
        try:
            return math.remainder(a, b)
        except ValueError:
            return math.nan

    x, y = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(y, np.float64))
    return np.asarray(np.frompyfunc(one, 2, 1)(x, y), np.float64)


Remainder = _binary("Remainder", "remainder", _remainder_interp)   # IEEE remainder
cotangents(Remainder, identity, partial(lambda ad, op: ad.neg(ad.call(
    Rint, ad.div(ad.primal(op.lhs), ad.primal(op.rhs))))))

Nextafter = _binary("Nextafter", "nextafter", np.nextafter)   # the next float toward y
cotangents(Nextafter, identity, None)   # a step of one ulp: x's slope, as the float it is


class Ldexp(Op):
    """x * 2**n, exactly (`math.ldexp`); n an i32."""

    name = "math.ldexp"
    libm = "ldexp"
    traits = (Pure, Speculatable)
    x = operand()
    n = operand()
    result = result()


def _ldexp_types(types, attrs):
    x, n = (scalar(t) for t in types)
    require(x.is_float, f"ldexp scales a float, not {x}")
    require(n == i32, f"ldexp's exponent is an i32, not {n}")
    return [x]


typing_rule(Ldexp, _ldexp_types)
interp_rule(Ldexp, lambda ctx, op, x, n: np.asarray(
    np.ldexp(x, np.asarray(n, np.int32)), op.result.type.dtype))
lower_rule(Ldexp, lowering.math_call)   # libm ldexp, libdevice __nv_ldexp
# d x 2**n / dx = 2**n: the cotangent scaled as exactly as the value
cotangents(Ldexp, lambda ad, op, ct: ad.emit(Ldexp, ct, ad.primal(op.n)), None)


class Frexp(Op):
    """(m, e) with x = m * 2**e and 0.5 <= |m| < 1 (`math.frexp`); (x, 0) for 0, inf, NaN."""

    name = "math.frexp"
    traits = (Pure, Speculatable)
    x = operand()
    mantissa = result()
    exponent = result()


def _frexp_types(types, attrs):
    x = scalar(types[0])
    require(x.is_float, f"frexp splits a float, not {x}")
    return [x, i32]


def _frexp_interp(ctx, op, x):
    mantissa, exponent = np.frexp(x)
    return np.asarray(mantissa, op.x.type.dtype), np.asarray(exponent, np.int32)


typing_rule(Frexp, _frexp_types)
interp_rule(Frexp, _frexp_interp)
lower_rule(Frexp, lowering.frexp)
nondifferentiable(Frexp, "frexp's exponent is an integer and its mantissa jumps at every "
                         "power of two; differentiate x * math.ldexp(1.0, -e) instead")



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
nondifferentiable(Abs, "integer operation")


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
nondifferentiable(IsNan, "a predicate")


class IsInf(FloatPredicate):
    name = "math.isinf"


interp_rule(IsInf, lambda ctx, op, x: np.isinf(x))
lower_rule(IsInf, lowering.is_inf)
nondifferentiable(IsInf, "a predicate")


class IsFinite(FloatPredicate):
    name = "math.isfinite"


interp_rule(IsFinite, lambda ctx, op, x: np.isfinite(x))
lower_rule(IsFinite, lowering.is_finite)
nondifferentiable(IsFinite, "a predicate")


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
    # f32, f16: the product exact in f64, one rounding of the sum (up to double rounding)
    if dtype in (np.float32, np.float16):
        return (np.float64(1) * a * b + c).astype(dtype)
    return np.asarray(a * b + c, dtype)


typing_rule(Fma, _float)
interp_rule(Fma, _fma_interp)
lower_rule(Fma, lowering.fused_multiply_add)
cotangents(Fma, partial(lambda ad, op: ad.primal(op.b)), partial(lambda ad, op: ad.primal(op.a)),
           identity)
