"""Emission helpers shared by the derivative transforms: the vocabulary the ops' rules speak.

A rule receives the transform as its context (`ad` in adjoint rules, `fw` in tangent rules) and
builds new ops only through these methods, so the same rule text serves both transforms where
the calculus is the same (a scalar op's partials).
"""
from __future__ import annotations

from ..ir.types import bool_
from ..ir.values import Value
from ..ops import arith


class Emitter:
    """Needs `self.b` (a Builder positioned where the ops go); `picked` and `pick` also
    `self.primal(value)` (the transforms have it; the reverse transform's parts emit through
    the rest)."""

    def emit(self, cls, *operands: Value, **attrs) -> Value:
        return self.b.value(cls, *operands, **attrs)

    def const(self, value, type) -> Value:
        if type == bool_:
            value = bool(value)
        elif type.is_float:
            value = float(value)
        elif type.is_complex:
            value = complex(value)
        else:
            value = int(value)
        return self.b.value(arith.Constant, value=value, type=type)

    def zero(self, type) -> Value:
        return self.const(0, type)

    def one(self, type) -> Value:
        return self.const(1, type)

    def add(self, a, b):
        return self.b.value(arith.Add, a, b)

    def sub(self, a, b):
        return self.b.value(arith.Sub, a, b)

    def mul(self, a, b):
        # x * 1 is x exactly (NaN and -0 included): seeds of the identity basis cost nothing
        if _constant(a) == 1:
            return b
        if _constant(b) == 1:
            return a
        return self.b.value(arith.Mul, a, b)

    def div(self, a, b):
        return self.b.value(arith.Div, a, b)

    def neg(self, a):
        return self.b.value(arith.Neg, a)

    def recip(self, a):
        """1 / a: one division that CSE shares between every use (the W directions of a
        multivariate dual, both operands of a division's adjoint)."""
        return self.div(self.one(a.type), a)

    def cmp(self, a, b, predicate: str):
        return self.b.value(arith.Cmp, a, b, predicate=predicate)

    def select(self, cond, a, b):
        return self.b.value(arith.Select, cond, a, b)

    def cast(self, value, type):
        return value if value.type == type else self.b.value(arith.Cast, value, to=type)

    def call(self, cls, *args):
        return self.b.value(cls, *args)

    def sign(self, x):
        """-1 where x < 0, else 1 (the slope of |x|, taking 1 at 0)."""
        return self.select(self.cmp(x, self.zero(x.type), "lt"), self.const(-1, x.type),
                           self.one(x.type))

    def picked(self, op, t_lhs, t_rhs):
        """The tangent of min/max: the one of the operand the result equals (lhs on ties)."""
        if t_lhs is None and t_rhs is None:
            return None
        to_lhs = self.cmp(self.primal(op.result), self.primal(op.lhs), "eq")
        zero = self.zero(op.result.type)
        return self.select(to_lhs, t_lhs if t_lhs is not None else zero,
                           t_rhs if t_rhs is not None else zero)

    def pick(self, op, ct, which: int):
        """The cotangent of min/max goes to the operand equal to the result (lhs on ties)."""
        to_lhs = self.cmp(self.primal(op.result), self.primal(op.lhs), "eq")
        zero = self.zero(ct.type)
        return self.select(to_lhs, ct, zero) if which == 0 else self.select(to_lhs, zero, ct)


def _constant(value: Value):
    """The value of a float constant, or None."""
    owner = getattr(value, "owner", None)
    if isinstance(owner, arith.Constant) and value.type.is_float:
        return owner.attrs.get("value")
    return None
