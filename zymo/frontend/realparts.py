"""Real arithmetic on IR values of one float type, spelled short for the complex formulas
(frontend/complexes.py, frontend/cmathfns.py) that work on the parts of complex numbers."""
from __future__ import annotations

import numpy as np

from ..ir import types as T
from ..ir.types import Scalar
from ..ir.values import Value
from ..ops import arith
from ..ops import math as zmath


class Parts:
    """Builds real ops of float type `t` through the lowerer `lw`; `limits` are the type's
    thresholds (`finfo`) that the algorithms switch on."""

    def __init__(self, lw, t: Scalar):
        self.lw, self.t = lw, t
        self.limits = np.finfo(t.dtype)

    def op(self, cls, *args, **attrs) -> Value:
        return self.lw.b.value(cls, *args, **attrs)

    def c(self, value: float) -> Value:
        return self.lw.constant(float(value), self.t)

    def add(self, a, b): return self.op(arith.Add, a, b)
    def sub(self, a, b): return self.op(arith.Sub, a, b)
    def mul(self, a, b): return self.op(arith.Mul, a, b)
    def div(self, a, b): return self.op(arith.Div, a, b)
    def neg(self, a): return self.op(arith.Neg, a)
    def cmp(self, a, b, predicate): return self.op(arith.Cmp, a, b, predicate=predicate)
    def select(self, cond, a, b): return self.op(arith.Select, cond, a, b)
    def call(self, cls, *args): return self.op(cls, *args)

    def either(self, cond, pair_true, pair_false):
        return tuple(self.select(cond, a, b) for a, b in zip(pair_true, pair_false))

    # comparisons (with a value or a constant), and booleans
    def _value(self, b): return b if isinstance(b, Value) else self.c(b)
    def lt(self, a, b): return self.cmp(a, self._value(b), "lt")
    def gt(self, a, b): return self.cmp(a, self._value(b), "gt")
    def ge(self, a, b): return self.cmp(a, self._value(b), "ge")
    def le(self, a, b): return self.cmp(a, self._value(b), "le")
    def eq(self, a, b): return self.cmp(a, self._value(b), "eq")
    def both(self, a, b): return self.op(arith.BitAnd, a, b)
    def any(self, a, b): return self.op(arith.BitOr, a, b)
    def not_(self, a): return self.op(arith.Not, a)

    # the real functions the algorithms use
    def fabs(self, a): return self.call(zmath.Fabs, a)
    def copysign(self, a, b): return self.call(zmath.Copysign, a, b)
    def sqrt(self, a): return self.call(zmath.Sqrt, a)
    def hypot(self, a, b): return self.call(zmath.Hypot, a, b)
    def atan2(self, y, x): return self.call(zmath.Atan2, y, x)
    def log(self, a): return self.call(zmath.Log, a)
    def log1p(self, a): return self.call(zmath.Log1p, a)
    def exp(self, a): return self.call(zmath.Exp, a)
    def sin(self, a): return self.call(zmath.Sin, a)
    def cos(self, a): return self.call(zmath.Cos, a)
    def tan(self, a): return self.call(zmath.Tan, a)
    def sinh(self, a): return self.call(zmath.Sinh, a)
    def cosh(self, a): return self.call(zmath.Cosh, a)
    def tanh(self, a): return self.call(zmath.Tanh, a)
    def asinh(self, a): return self.call(zmath.Asinh, a)
    def is_nan(self, a): return self.op(zmath.IsNan, a)
    def is_inf(self, a): return self.op(zmath.IsInf, a)
    def is_finite(self, a): return self.op(zmath.IsFinite, a)

    def ldexp(self, a, n: int):
        return self.op(zmath.Ldexp, a, self.lw.constant(n, T.i32))

    def sign_negative(self, a):
        """Whether `a`'s sign bit is set (-0.0 and NaNs with the bit included)."""
        return self.lt(self.copysign(self.c(1.0), a), 0.0)
