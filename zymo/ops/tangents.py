"""Shapes of forward-mode (tangent, JVP) rules, so that each op's stanza states only its calculus.

A componentwise rule is `rule(fw, op, tangents) -> list of result tangents`: `tangents` holds one
tangent per operand (an IR value of the derivative function, or None where it is zero) and the
rule returns one per result (None: zero). The forward transform (`zymo/ad/forward.py`) calls it
once per tangent direction, so a rule never sees the width of multivariate dual numbers; the
partials it emits are shared between directions by CSE.

Most scalar ops need no tangent rule of their own: `adjoints.cotangents` registers the adjoint
contributions `ct * d result / d operand`, and the same functions applied to tangents give the
JVP `sum_k t_k * d result / d operand_k` (`from_partials`). Ops that only move a value (casts,
selects, shuffles) are `linear_in` the operands that carry it. Memory, atomics and control flow
name a structural rule (`zymo/ops/structural.py`) that the forward transform handles: it knows
how tangent arrays and carried tangents travel.
"""
from __future__ import annotations

from typing import Callable

from ..ir.operation import Operation
from .registry import JVP, jvp_rule


def from_partials(per_operand) -> Callable:
    """The JVP of a single-result op whose operands and result share a type, from the
    per-operand adjoint contributions (each linear in its cotangent argument)."""

    def rule(fw, op, tangents):
        total = None
        for tangent, contribution in zip(tangents, per_operand):
            if tangent is None or contribution is None:
                continue
            term = contribution(fw, op, tangent)
            total = term if total is None else fw.add(total, term)
        return [total]

    rule.partials = tuple(per_operand)     # for preaccumulation (zymo/ad/forward.py)
    return rule


def linear_in(*positions: int) -> Callable:
    """The op applied again with the tangents in place of operands `positions` (zero where a
    tangent is zero) and the primal values elsewhere: casts, selects, shuffles."""

    def rule(fw, op, tangents):
        if all(tangents[p] is None for p in positions):
            return [None]
        operands = [fw.primal(v) for v in op.operands]
        for p in positions:
            operands[p] = tangents[p] if tangents[p] is not None else fw.zero(op.result.type)
        return [fw.emit(type(op), *operands, **op.attrs)]

    return rule


def zero_tangent(fw, op, tangents):
    return [None] * len(op.results)


def no_results(fw, op, tangents):
    """Ops whose effect needs no tangent (barriers)."""
    return []


def register(op_cls: type[Operation], rule: Callable) -> None:
    jvp_rule(op_cls, rule)


__all__ = ["JVP", "from_partials", "linear_in", "no_results", "register", "zero_tangent"]
