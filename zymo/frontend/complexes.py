"""Complex arithmetic and `cmath` in kernels, written as real arithmetic on the parts.

A complex IR value is a (re, im) pair (ops/complex.py); its product, quotient, power, `abs` and
the `cmath` functions become real ops here, as clang lowers C's `_Complex`. Every backend then
runs them with its own real math, and derivatives follow the pairs of reals with no complex
rule of their own. Arithmetic is arranged so that a branch not taken never divides by zero
or overflows (a `select`'s untaken arm still gets a zero cotangent, and zero times an
infinite partial would make a derivative NaN): Smith's quotient with the operands ordered
before dividing, guarded powers. The `cmath` functions, value for value as Python's, special
values included, are in cmathfns.py.
"""
from __future__ import annotations

import builtins
import cmath
import math

import numpy as np

from ..ir import types as T
from ..ir.types import Scalar
from ..ir.values import Value
from ..ops import arith, complex as cx
from ..ops import math as zmath
from .convert import UserError
from .cmathfns import FUNCTIONS, exp_, log_, rect
from .intrinsics import COMPLEX_FORMS, _arity, handler
from .realparts import Parts
from .values import Obj, PyConst, Tup, Weak


def complex_type_of(t: Scalar) -> Scalar:
    """The complex type a real operand of type `t` becomes, as NumPy promotes it with c64."""
    return T.scalar_of_dtype(np.promote_types(t.dtype, np.complex64))


def is_complex(value) -> bool:
    if isinstance(value, PyConst):
        return isinstance(value.value, complex)
    if isinstance(value, Weak):
        return False
    return isinstance(value, Value) and isinstance(value.type, Scalar) and value.type.is_complex


def as_complex(lw, value, t: Scalar | None = None, node=None) -> Value:
    """A complex IR value of type `t` (or the value's own complex type) for a number."""
    if isinstance(value, Weak):
        value = value.value
    if t is None:
        t = T.c64 if isinstance(value, PyConst) else complex_type_of(value.type)
    if isinstance(value, PyConst):
        return lw.constant(complex(value.value), t)
    return lw.cast(lw.materialize(value, node=node), t)


def split(lw, z: Value) -> tuple[Value, Value]:
    return lw.b.value(cx.RealPart, z), lw.b.value(cx.ImagPart, z)


def join(lw, re: Value, im: Value) -> Value:
    return lw.b.value(cx.MakeComplex, re, im)


# ---- arithmetic ----------------------------------------------------------------------------
def multiply(p: Parts, a, b):
    (x, y), (u, v) = a, b
    return p.sub(p.mul(x, u), p.mul(y, v)), p.add(p.mul(x, v), p.mul(y, u))


def divide(p: Parts, a, b):
    """Smith's algorithm as CPython divides: by whichever part of the divisor is larger, so
    that no arm divides by zero, each arm's numerators written as CPython writes them (the
    sign of a zero part depends on it)."""
    (x, y), (u, v) = a, b
    first = p.cmp(p.fabs(u), p.fabs(v), "ge")
    big, small = p.either(first, (u, v), (v, u))
    ratio = p.div(small, big)
    scale = p.add(big, p.mul(small, ratio))
    s, t = p.either(first, (x, y), (y, x))
    re = p.div(p.add(s, p.mul(t, ratio)), scale)
    im = p.select(first, p.sub(y, p.mul(x, ratio)), p.sub(p.mul(y, ratio), x))
    return re, p.div(im, scale)


def power(p: Parts, a, b, exponent: int | None):
    """a ** b: repeated products for a small integer `exponent` (as NumPy and Python do), else
    exp(b log a), with 0 ** b = 0 and a ** 0 = 1 (log 0 is never taken)."""
    if exponent is not None:
        one = (p.c(1.0), p.c(0.0))
        result = one
        for _ in range(abs(exponent)):
            result = a if result is one else multiply(p, result, a)
        return divide(p, one, result) if exponent < 0 else result
    (x, y), (u, v) = a, b
    zero = p.c(0.0)
    base_zero = p.op(arith.BitAnd, p.cmp(x, zero, "eq"), p.cmp(y, zero, "eq"))
    exponent_zero = p.op(arith.BitAnd, p.cmp(u, zero, "eq"), p.cmp(v, zero, "eq"))
    safe = p.either(base_zero, (p.c(1.0), zero), (x, y))
    w = exp_(p, multiply(p, b, log_(p, safe)))
    w = p.either(base_zero, (zero, zero), w)
    return p.either(exponent_zero, (p.c(1.0), zero), w)


# ---- the frontend's entry points -----------------------------------------------------------
def common_type(lw, values, node=None) -> Scalar:
    """The complex type that operands `values` meet in (NumPy's promotion; weak numbers take
    the others' type, as everywhere in zymo)."""
    reals = [PyConst(0.0) if isinstance(v, PyConst) and isinstance(v.value, complex) else v
             for v in values]
    return complex_type_of(lw.join_all(reals, node))


def _parts(lw, values, node):
    """The operands as complex values of their common type, that type's Parts and pairs."""
    t = common_type(lw, values, node)
    zs = [as_complex(lw, v, t, node) for v in values]
    return Parts(lw, t.part), t, [split(lw, z) for z in zs]


def binary(lw, kind: str, a, b, node):
    """`a kind b` where either operand is complex (the operands are not both constants)."""
    if kind in ("add", "sub"):
        t = common_type(lw, [a, b], node)
        x, y = (as_complex(lw, v, t, node) for v in (a, b))
        return lw.b.value(arith.Add if kind == "add" else arith.Sub, x, y)
    if kind == "pow":
        exponent = b.value if isinstance(b, PyConst) and type(b.value) is int \
            and -4 <= b.value <= 8 else None
        p, t, (za, zb) = _parts(lw, [a, b if exponent is None else PyConst(0.0)], node)
        return join(lw, *power(p, za, zb, exponent))
    if kind not in ("mul", "truediv"):
        raise UserError(node, f"operator {_SPELLED.get(kind, kind)} is not defined on complex "
                              f"numbers", "use + - * / ** on complex values")
    p, t, (za, zb) = _parts(lw, [a, b], node)
    return join(lw, *(multiply if kind == "mul" else divide)(p, za, zb))


_SPELLED = {"floordiv": "//", "mod": "%", "and": "&", "or": "|", "xor": "^", "lshift": "<<",
            "rshift": ">>"}


def extremum(lw, kind: str, a, b, node):
    """max or min of complex numbers as NumPy orders them (np.maximum, np.minimum): by the real
    parts, then the imaginary parts; an operand with a NaN part wins, the first if both."""
    p, t, ((x, y), (u, v)) = _parts(lw, [a, b], node)
    ahead = "gt" if kind == "max" else "lt"
    first = lw.binary("or", p.cmp(x, u, ahead),
                      lw.binary("and", p.cmp(x, u, "eq"), p.cmp(y, v, ahead), node), node)
    nan_a = lw.binary("or", p.cmp(x, x, "ne"), p.cmp(y, y, "ne"), node)
    nan_b = lw.binary("or", p.cmp(u, u, "ne"), p.cmp(v, v, "ne"), node)
    first = lw.binary("or", nan_a, lw.binary("and", lw.unary("not", nan_b), first, node), node)
    return join(lw, *p.either(first, (x, y), (u, v)))


def on_parts(lw, t: Scalar, reals, fn):
    """fn(Parts of t's float type, *reals) -> (re, im), joined into a complex of type `t`.
    complex64 stays in float32, as NumPy and numba compute it."""
    p = Parts(lw, t.part)
    return join(lw, *fn(p, *(lw.cast(v, t.part) for v in reals)))


def order(lw, predicate: str, a, b, node):
    """np.less, less_equal, greater, greater_equal of complex numbers, in NumPy's order: by
    the real parts (unless an imaginary part is NaN), equal real parts by the imaginary."""
    p, t, ((x, y), (u, v)) = _parts(lw, [a, b], node)
    strict = {"le": "lt", "ge": "gt"}.get(predicate, predicate)
    no_nan = p.not_(p.any(p.is_nan(y), p.is_nan(v)))
    return p.any(p.both(p.cmp(x, u, strict), no_nan),
                 p.both(p.cmp(x, u, "eq"), p.cmp(y, v, predicate)))


def log2(lw, z, node):
    """np.log2 of a complex number: its log times log2(e), as NumPy scales it."""
    t = common_type(lw, [z], node)
    return on_parts(lw, t, split(lw, as_complex(lw, z, t, node)), lambda p, x, y: tuple(
        p.mul(part, p.c(1 / math.log(2.0))) for part in log_(p, (x, y))))


def function(lw, name: str, arg, node):
    t = common_type(lw, [arg], node)
    z = split(lw, as_complex(lw, arg, t, node))
    return on_parts(lw, t, z, lambda p, x, y: FUNCTIONS[name](p, (x, y)))


def logarithm(lw, z, base, node):
    """cmath.log(z, base): log z / log base, with CPython's quotient."""
    t = common_type(lw, [z, base], node)
    parts = [*split(lw, as_complex(lw, z, t, node)), *split(lw, as_complex(lw, base, t, node))]
    return on_parts(lw, t, parts, lambda p, x, y, u, v: divide(p, log_(p, (x, y)),
                                                                  log_(p, (u, v))))


def absolute(lw, z, node):
    p, t, ((x, y),) = _parts(lw, [z], node)
    return p.call(zmath.Hypot, x, y)


def attribute(lw, value, attr: str, node):
    """`.real`, `.imag` and `.conjugate` of a number (real numbers have them too)."""
    if attr == "conjugate":
        return Obj(BoundMethod(value))
    if attr not in ("real", "imag"):
        raise UserError(node, f"numbers have no attribute '{attr}' in kernels",
                        "use .real, .imag or .conjugate()")
    if isinstance(value, PyConst):
        return PyConst(getattr(value.value, attr))
    if not is_complex(value):
        if attr == "real":
            return value
        zero = PyConst(0.0 if isinstance(value, PyConst) or _is_float(value) else 0)
        return zero
    return lw.b.value(cx.RealPart if attr == "real" else cx.ImagPart, value)


def _is_float(value) -> bool:
    v = value.value if isinstance(value, Weak) else value
    return v.type.is_float


class BoundMethod:
    """`z.conjugate`, waiting for its call (the resolver calls `call`)."""

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return "the method conjugate of a number"

    def call(self, lw, node, args):
        _arity(node, args, 0, 0, "conjugate")
        return conjugate(lw, self.value, node)


def conjugate(lw, value, node):
    if isinstance(value, PyConst):
        return PyConst(value.value.conjugate())
    if not is_complex(value):
        return value
    x, y = split(lw, value)
    return join(lw, x, lw.b.value(arith.Neg, y))


# ---- handlers: `complex(...)`, cmath, NumPy's complex functions -----------------------------
@handler("complex")
def _complex(lw, node, args, kwargs):
    _arity(node, args, 0, 2, "complex")
    if all(isinstance(a, PyConst) for a in args):
        return PyConst(builtins.complex(*(a.value for a in args)))
    if len(args) == 1:
        return as_complex(lw, args[0], node=node)
    if any(is_complex(a) for a in args):
        raise UserError(node, "complex(re, im) takes real parts", "pass .real and .imag")
    t = common_type(lw, args, node)
    parts = [lw.materialize(a.value if isinstance(a, Weak) else a, t.part, node)
             if not isinstance(a, PyConst) else lw.constant(float(a.value), t.part)
             for a in args]
    return join(lw, *parts)


def _cmath(name: str):
    def lower(lw, node, args, kwargs):
        _arity(node, args, 1, 2 if name == "log" else 1, f"cmath.{name}")
        if all(isinstance(a, PyConst) for a in args):
            return PyConst(getattr(cmath, name)(*(a.value for a in args)))
        if len(args) == 2:   # cmath.log(z, base)
            return logarithm(lw, args[0], args[1], node)
        return function(lw, name, args[0], node)

    return lower


for _name in FUNCTIONS:
    handler(f"cmath.{_name}")(_cmath(_name))


@handler("cmath.phase")
def _phase(lw, node, args, kwargs):
    _arity(node, args, 1, 1, "cmath.phase")
    p, t, ((x, y),) = _parts(lw, args, node)
    return p.call(zmath.Atan2, y, x)


@handler("cmath.polar")
def _polar(lw, node, args, kwargs):
    _arity(node, args, 1, 1, "cmath.polar")
    p, t, ((x, y),) = _parts(lw, args, node)
    return Tup((p.call(zmath.Hypot, x, y), p.call(zmath.Atan2, y, x)))


@handler("cmath.rect")
def _rect(lw, node, args, kwargs):
    _arity(node, args, 2, 2, "cmath.rect")
    if any(is_complex(a) for a in args):
        raise UserError(node, "cmath.rect(r, phi) takes real numbers")
    t = common_type(lw, args, node)
    r, phi = (lw.materialize(a.value if isinstance(a, Weak) else a, t.part, node)
              for a in args)
    return on_parts(lw, t, (r, phi), rect)


def _classify(name: str):
    def lower(lw, node, args, kwargs):
        _arity(node, args, 1, 1, f"cmath.{name}")
        if isinstance(args[0], PyConst):
            return PyConst(getattr(cmath, name)(args[0].value))
        p, t, ((x, y),) = _parts(lw, args, node)

        def test(v):
            nan, inf = p.op(zmath.IsNan, v), p.op(zmath.IsInf, v)
            return {"isnan": nan, "isinf": inf}.get(name) or p.op(arith.BitOr, nan, inf)

        either = p.op(arith.BitOr, test(x), test(y))
        return p.op(arith.Not, either) if name == "isfinite" else either

    return lower


for _name in ("isnan", "isinf", "isfinite"):
    handler(f"cmath.{_name}")(_classify(_name))


def _numpy_part(attr: str):
    def lower(lw, node, args, kwargs):
        _arity(node, args, 1, 1, f"numpy.{attr}")
        return attribute(lw, args[0], attr, node)

    return lower


handler("complex.real")(_numpy_part("real"))
handler("complex.imag")(_numpy_part("imag"))


@handler("complex.conj")
def _numpy_conj(lw, node, args, kwargs):
    _arity(node, args, 1, 1, "conj")
    return conjugate(lw, args[0], node)


COMPLEX_PATHS = {builtins.complex: "complex", np.real: "complex.real", np.imag: "complex.imag",
                 np.conj: "complex.conj", np.conjugate: "complex.conj", np.angle: "cmath.phase",
                 **{getattr(cmath, name): f"cmath.{name}" for name in list(FUNCTIONS) + [
                     "phase", "polar", "rect", "isnan", "isinf", "isfinite"]}}


# NumPy's functions (np.sqrt, np.abs, ...) and Python's abs reach these on a complex operand
COMPLEX_FORMS.update({name: (lambda name: lambda lw, node, args, kwargs: function(
    lw, name, args[0], node))(name) for name in FUNCTIONS})
COMPLEX_FORMS["abs"] = lambda lw, node, args, kwargs: absolute(lw, args[0], node)
COMPLEX_FORMS["isnan"] = _classify("isnan")
COMPLEX_FORMS["isinf"] = _classify("isinf")
COMPLEX_FORMS["extremum"] = extremum
COMPLEX_FORMS["order"] = order
COMPLEX_FORMS["log2"] = lambda lw, node, args, kwargs: log2(lw, args[0], node)
