"""The rule tables, keyed by op class: typing, interp, lower, jvp, adjoint, mutation; and the
optional analyses' rules (index forms, host evaluation), which ops without one need not declare.

Rules are registered right below their op (one stanza per op) through the helpers here. A
table may also record an explicit, reasoned absence, which `tests/ops/test_registry.py` accepts.
"""
from __future__ import annotations

from typing import Any, Callable

from ..ir.operation import Operation


class MissingRule(Exception):
    """An op has no rule in a table; the message names the op and the table."""

    def __init__(self, table: "RuleTable", op: type[Operation] | Operation, reason: str = ""):
        cls = op if isinstance(op, type) else type(op)
        self.table = table
        self.op_class = cls
        self.reason = reason
        text = f"no {table.name} rule for `{cls.name}`"
        super().__init__(text + (f": {reason}" if reason else ""))


class RuleTable:
    def __init__(self, name: str, doc: str):
        self.name = name
        self.doc = doc
        self.rules: dict[type[Operation], Any] = {}
        self.absences: dict[type[Operation], str] = {}

    def register(self, op: type[Operation], rule: Any) -> None:
        if op in self.rules:
            raise ValueError(f"two {self.name} rules for {op.name}")
        self.rules[op] = rule

    def declare_absent(self, op: type[Operation], reason: str) -> None:
        self.absences[op] = reason

    def find(self, op: type[Operation] | Operation) -> Any | None:
        """The rule for `op` or for its nearest base class, or None."""
        cls = op if isinstance(op, type) else type(op)
        for klass in cls.__mro__:
            if klass in self.absences:
                return None
            if klass in self.rules:
                return self.rules[klass]
        return None

    def __getitem__(self, op: type[Operation] | Operation) -> Any:
        rule = self.find(op)
        if rule is None:
            cls = op if isinstance(op, type) else type(op)
            raise MissingRule(self, cls, self.absence_reason(cls))
        return rule

    def absence_reason(self, cls: type[Operation]) -> str:
        for klass in cls.__mro__:
            if klass in self.absences:
                return self.absences[klass]
        return ""

    def accounts_for(self, cls: type[Operation]) -> bool:
        return any(k in self.rules or k in self.absences for k in cls.__mro__)


TYPING = RuleTable("typing", "operand types and attributes -> result types (TypeError if invalid)")
INTERP = RuleTable("interp", "(ctx, op, *operand values) -> result value(s), on NumPy arrays")
LOWER = RuleTable("lower", "(ctx, op, *llvm operands) -> llvm value(s)")
JVP = RuleTable("jvp", "forward-mode rule")
ADJOINT = RuleTable("adjoint", "reverse-mode rule")
MUTATION = RuleTable("mutation", "which edits evolution may apply to the op")

TABLES = (TYPING, INTERP, LOWER, JVP, ADJOINT, MUTATION)

# Optional: an op without a rule gets the analysis's conservative answer.
INDEX_FORM = RuleTable("index_form", "(forms, op, *operand forms) -> how the op's integer result "
                       "varies across threads (`passes/indexing.py`); None: the generic form "
                       "(uniform over uniform operands, else varying)")
HOST = RuleTable("host", "(op, *operand host expressions) -> the op's value as a launch computes "
                 "it from the kernel's arguments, or None. Leaves: (\"arg\", i), (\"const\", "
                 "n), (\"dim\", i, axis); (\"apply\", op class, *operands): the op's interp "
                 "rule on int64 (`host_applied`)")

# Every op class defined through `ops`, in definition order (filled by Op.__init_subclass__).
ALL_OPS: list[type[Operation]] = []


def typing_rule(op: type[Operation], rule: Callable) -> None:
    TYPING.register(op, rule)


def interp_rule(op: type[Operation], rule: Callable) -> None:
    INTERP.register(op, rule)


def lower_rule(op: type[Operation], rule: Callable) -> None:
    LOWER.register(op, rule)


def jvp_rule(op: type[Operation], rule: Callable) -> None:
    JVP.register(op, rule)


def adjoint_rule(op: type[Operation], rule: Callable) -> None:
    ADJOINT.register(op, rule)


def mutation_rule(op: type[Operation], rule: Any) -> None:
    MUTATION.register(op, rule)


def index_form_rule(op: type[Operation], rule: Callable) -> None:
    INDEX_FORM.register(op, rule)


def host_rule(op: type[Operation], rule: Callable) -> None:
    HOST.register(op, rule)


def host_applied(op: Operation, *operands: tuple) -> tuple:
    """The host rule of an integer op the launch evaluates with the op's own interp rule."""
    return ("apply", type(op), *operands)


def absent(table: RuleTable, op: type[Operation], reason: str) -> None:
    table.declare_absent(op, reason)
