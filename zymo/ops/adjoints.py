"""Shapes of reverse-mode (adjoint) rules, so that each op's stanza states only its calculus.

An adjoint rule is `rule(ad, op, cts)`: `cts` holds one cotangent per result of `op` (an IR
value of the reverse sweep, or None where the cotangent is zero). The rule reads primal values
through `ad.primal(value)`, emits reverse-sweep ops through `ad`'s helpers (`ad.mul`, `ad.emit`,
...) and hands contributions to operands with `ad.add_to(operand, contribution)`. `ad` is the
reverse transform's context (`zymo/ad/reverse.py`); the rules only call it.

Memory, atomics, barriers and control flow name a structural rule instead
(`zymo/ops/structural.py`), which the reverse transform handles.

`nondifferentiable` records that an op carries no derivative (comparisons, integer and bit
operations, piecewise-constant functions): activity analysis then never makes its results active.
"""
from __future__ import annotations

from typing import Callable

from ..ir.operation import Operation
from . import tangents
from .registry import ADJOINT, adjoint_rule

Cotangent = Callable  # (ad, op, ct) -> contribution to one operand, or None


def cotangents(op_cls: type[Operation], *per_operand: Cotangent | None,
               jvp: Callable | None = None) -> None:
    """A single-result op whose operand k receives `per_operand[k](ad, op, ct)` (None: no
    derivative through that operand). The JAX transpose shape: one function per operand.
    The same contributions applied to tangents are the op's JVP unless `jvp` is given (needed
    where operand and result types differ, or where a cheaper form exists)."""

    def rule(ad, op, cts):
        ct = cts[0]
        if ct is None:
            return
        for value, contribution in zip(op.operands, per_operand):
            if contribution is not None and ad.is_active(value):
                ad.add_to(value, contribution(ad, op, ct))

    rule.per_operand = per_operand
    adjoint_rule(op_cls, rule)
    tangents.register(op_cls, jvp or tangents.from_partials(per_operand))


def partial(derivative: Callable) -> Cotangent:
    """The contribution `ct * derivative(ad, op)`, where `derivative` is d result / d operand."""
    return lambda ad, op, ct: ad.mul(ct, derivative(ad, op))


def identity(ad, op, ct):
    return ct


def negated(ad, op, ct):
    return ad.neg(ct)


class NonDifferentiable:
    """The adjoint rule of an op without a derivative; activity analysis asks for it."""

    def __init__(self, reason: str):
        self.reason = reason

    def __call__(self, ad, op, cts) -> None:  # never active, so never called with a cotangent
        return None


def nondifferentiable(op_cls: type[Operation], reason: str) -> None:
    adjoint_rule(op_cls, NonDifferentiable(reason))
    tangents.register(op_cls, tangents.zero_tangent)


def is_nondifferentiable(op: Operation | type[Operation]) -> bool:
    return isinstance(ADJOINT.find(op), NonDifferentiable)
