"""Structural derivative rules: named objects for what an op's stanza cannot state as calculus.

Loads, stores, atomics, barriers and control flow differentiate by changing the program's
structure (shadow arrays, reversed loops, cotangents carried through regions), which only the
transform knows how to do. Such an op's stanza names the rule it needs with one of the objects
below (`adjoint_rule(Load, REVERSE_LOAD)`), and each transform declares its handlers
(`@handles(REVERSE_LOAD)` on a method, `@transform(REVERSE_MODE)` on the class). The class check
runs when the transform is defined, at `import zymo.ad`: a rule without a handler is an error
then, not when a kernel first needs it. `ops` never imports `ad`: the objects are the contract.
"""
from __future__ import annotations

from typing import Callable

REVERSE_MODE = "reverse"   # the adjoint table's rules: handler(transform, op, cotangents)
FORWARD_MODE = "forward"   # the jvp table's: handler(transform, op), once for all directions


class StructuralRule:
    """A derivative rule handled by the transform of `mode`; calling it runs the handler the
    transform registered (`transform.STRUCTURAL[rule]`)."""

    def __init__(self, mode: str, name: str, doc: str):
        self.mode = mode
        self.name = name
        self.__doc__ = doc
        RULES.append(self)

    def __call__(self, transform, op, *rest):
        return transform.STRUCTURAL[self](transform, op, *rest)

    def __repr__(self) -> str:
        return f"<structural {self.mode} rule {self.name}>"


RULES: list[StructuralRule] = []

REVERSE_LOAD = StructuralRule(REVERSE_MODE, "load", "the load's cotangent accumulates into the "
                              "shadow: +=, a reduction then one atomic, or an atomic")
REVERSE_STORE = StructuralRule(REVERSE_MODE, "store", "the stored value's adjoint is read from the "
                               "shadow, which is then zeroed")
REVERSE_ATOMIC_ADD = StructuralRule(REVERSE_MODE, "atomic_add", "d value += shadow[i]")
REVERSE_ATOMIC_SUB = StructuralRule(REVERSE_MODE, "atomic_sub", "d value -= shadow[i]")
REVERSE_VIEW = StructuralRule(REVERSE_MODE, "view", "the same view of the shadow, made beside "
                              "the primal view (the view's cotangents live in the shadow)")
REVERSE_BARRIER = StructuralRule(REVERSE_MODE, "barrier", "barriers reverse to barriers")
REVERSE_GRID_BARRIER = StructuralRule(REVERSE_MODE, "grid_barrier", "grid barriers reverse to "
                                      "grid barriers")
REVERSE_IF = StructuralRule(REVERSE_MODE, "if", "the branch taken, reversed")
REVERSE_FOR = StructuralRule(REVERSE_MODE, "for", "the iterations in reverse order")
REVERSE_WHILE = StructuralRule(REVERSE_MODE, "while", "the recorded trips in reverse order")

FORWARD_LOAD = StructuralRule(FORWARD_MODE, "load", "load the tangent arrays at the same indices")
FORWARD_STORE = StructuralRule(FORWARD_MODE, "store", "store the tangents into the tangent arrays")
FORWARD_ATOMIC = StructuralRule(FORWARD_MODE, "atomic", "the same update on the tangent arrays")
FORWARD_IF = StructuralRule(FORWARD_MODE, "if", "tangents yielded beside the branches' values")
FORWARD_LOOP = StructuralRule(FORWARD_MODE, "loop", "tangents carried beside the loop's values")
FORWARD_VIEW = StructuralRule(FORWARD_MODE, "view", "the same view of each tangent array")


def handles(rule: StructuralRule) -> Callable:
    """Mark a transform method as the handler of `rule` (collected by `transform`)."""

    def mark(method: Callable) -> Callable:
        setattr(method, "structural_rule", rule)
        return method

    return mark


def transform(mode: str) -> Callable:
    """Class decorator of a transform: its `STRUCTURAL` table from the methods marked with
    `handles`, and a check that every structural rule of `mode` has exactly one handler."""

    def collect(cls: type) -> type:
        table: dict[StructuralRule, Callable] = {}
        for klass in reversed(cls.__mro__):
            for method in vars(klass).values():
                rule = getattr(method, "structural_rule", None)
                if rule is not None:
                    if rule.mode != mode:
                        raise TypeError(f"{cls.__name__} ({mode}) handles {rule!r}")
                    table[rule] = method
        missing = [rule for rule in RULES if rule.mode == mode and rule not in table]
        if missing:
            raise TypeError(f"{cls.__name__} has no handler for {missing}")
        setattr(cls, "STRUCTURAL", table)
        return cls

    return collect


def is_structural(rule) -> bool:
    return isinstance(rule, StructuralRule)
