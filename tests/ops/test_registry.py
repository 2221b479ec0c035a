"""Every op is accounted for in every table that exists today: a rule, or a reasoned absence."""
import pytest

import zymo.backend.cpu  # noqa: F401  (registers nothing itself; rules live with the ops)
from zymo.ops import ALL_OPS
from zymo.ops.registry import TABLES, MissingRule

CHECKED = TABLES


@pytest.mark.parametrize("table", CHECKED, ids=lambda t: t.name)
def test_every_op_has_a_rule_or_a_reason(table):
    missing = [op.name for op in ALL_OPS if not table.accounts_for(op)]
    assert not missing, f"ops without a {table.name} rule or reasoned absence: {missing}"


def test_absences_give_reasons():
    for table in CHECKED:
        for op, reason in table.absences.items():
            assert reason.strip(), f"{table.name} absence of {op.name} without a reason"


def test_missing_rule_names_op_and_table():
    from zymo.ops.arith import Add
    from zymo.ops.registry import RuleTable
    empty = RuleTable("adjoint", "")
    with pytest.raises(MissingRule, match="no adjoint rule for `arith.add`"):
        empty[Add]


def test_op_names_are_unique_and_namespaced():
    names = [op.name for op in ALL_OPS]
    assert len(names) == len(set(names))
    assert all("." in name for name in names)
