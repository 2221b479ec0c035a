"""Shapes of mutation rules: which edits evolution (`zymo.genome`) may make to an op.

A rule is a `Mutable`: the edit kinds allowed on the op and where copies of it may go. The
default, registered on `Op`, allows every edit anywhere; stanzas narrow it. Convergent ops
(barriers, warp operations) may only be placed in blocks where the original kernel already
synchronizes, which every thread of a block reaches together (GEVO placed them anywhere and
paid with hangs). Terminators keep their place, but their operands may change: that is how
evolution edits a branch condition or a loop-carried value, GEVO's most productive edit.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.operation import Operation
from .registry import MUTATION, mutation_rule

EDIT_KINDS = ("delete", "copy", "move", "replace", "swap", "operand")


@dataclass(frozen=True)
class Mutable:
    edits: frozenset[str]
    # "anywhere", or "synchronizing": only into blocks that already hold a convergent op
    placement: str = "anywhere"

    def allows(self, kind: str) -> bool:
        return kind in self.edits


EVERYTHING = Mutable(frozenset(EDIT_KINDS))
SYNCHRONIZING = Mutable(frozenset(EDIT_KINDS), placement="synchronizing")
OPERANDS_ONLY = Mutable(frozenset({"operand"}))


def mutable(op_cls: type[Operation], rule: Mutable = EVERYTHING) -> None:
    mutation_rule(op_cls, rule)


def convergent(op_cls: type[Operation]) -> None:
    """Every edit, but copies and moves stay in blocks that already synchronize."""
    mutation_rule(op_cls, SYNCHRONIZING)


def operands_only(op_cls: type[Operation]) -> None:
    """The op keeps its place in the structure; only its operands may be replaced."""
    mutation_rule(op_cls, OPERANDS_ONLY)


def rule_of(op: Operation) -> Mutable | None:
    """The op's rule, or None where the table records a reasoned absence."""
    return MUTATION.find(op)
