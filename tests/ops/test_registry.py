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


def test_thread_registers_declare_their_index_forms():
    """Ownership proofs start from these registers: without an index-form rule threadIdx would
    be `Varying` and every read's adjoint an atomic."""
    from zymo.ops import thread
    from zymo.ops.registry import INDEX_FORM
    for op in (thread.ThreadIdx, thread.BlockIdx, thread.BlockDim):
        assert INDEX_FORM.find(op) is not None, f"{op.name} has no index-form rule"


def test_host_rules_only_on_values_a_launch_can_compute():
    """A launch computes a host expression once, from the arguments: an op with a host rule
    gives the same value in every thread and has no effect."""
    from zymo.ir.traits import Pure, ThreadVarying
    from zymo.ops.registry import HOST, INDEX_FORM, INTERP
    assert HOST.rules
    for op in HOST.rules:
        assert op in ALL_OPS and op.has_trait(Pure) and not op.has_trait(ThreadVarying), op.name
        assert INTERP.find(op) is not None, f"{op.name}: host evaluation reuses the interp rule"
    assert all(op in ALL_OPS for op in INDEX_FORM.rules)
