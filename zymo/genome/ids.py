"""Stable op ids, value references that survive replay, and what is in scope where.

Ids are `line:col` of the op's source, with `.k` for the k-th op from the same place, assigned
in program order to the optimized IR of a kernel. The same source and compiler give the same ids
in every process, so an edit list found in one worker replays in any other. Ops an edit creates
are named from the ids they copy plus the edit's tag (`12:8@e41`).
"""
from __future__ import annotations

from typing import Iterator

from ..ir.module import Module
from ..ir.operation import Block, Operation
from ..ir.traits import IsolatedFromAbove
from ..ir.types import Scalar
from ..ir.values import BlockArgument, OpResult, Value

# A value, by name: ("r", op id, result index), ("a", op id, region index, argument index) or
# ("c", scalar type name, number) for a constant made where it is used.
Ref = tuple


def canonicalize_ids(module: Module) -> Module:
    seen: dict[str, int] = {}
    for op in module.walk():
        base = f"{op.loc.line}:{op.loc.col}"
        count = seen.get(base, 0)
        seen[base] = count + 1
        op.id = base if count == 0 else f"{base}.{count}"
    return module


def ops_by_id(module: Module) -> dict[str, Operation]:
    return {op.id: op for op in module.walk()}


def ref_of(value: Value) -> Ref:
    if isinstance(value, OpResult):
        return ("r", value.owner.id, value.index)
    assert isinstance(value, BlockArgument)
    owner = value.block.parent_op
    assert owner is not None
    region = next(i for i, r in enumerate(owner.regions) if r.block is value.block)
    return ("a", owner.id, region, value.index)


def constant_refs(type) -> list[Ref]:
    """The constants a repair may use for a value of `type` (GEVO's 1, plus 0)."""
    if not isinstance(type, Scalar):
        return []
    if type.is_bool:
        return [("c", type.name, False), ("c", type.name, True)]
    one = 1.0 if type.is_float else 1
    return [("c", type.name, one * 0), ("c", type.name, one)]


def visible_before(op: Operation) -> Iterator[Value]:
    """Every value that dominates `op`: earlier results and enclosing block arguments."""
    block: Block | None = op.parent
    anchor = op
    while block is not None:
        yield from block.args
        for other in block.ops:
            if other is anchor:
                break
            yield from other.results
        owner = block.parent_op
        if owner is None or owner.has_trait(IsolatedFromAbove):
            return
        anchor, block = owner, owner.parent


def inside(op: Operation, root: Operation) -> bool:
    """Whether `op` is `root` or nested in one of its regions."""
    return op is root or any(a is root for a in op.ancestors())


def dominated_by(op: Operation) -> Iterator[Operation]:
    """The ops `op`'s results may reach: later ops of its block and everything inside them."""
    block = op.parent
    assert block is not None
    after = block.ops[block.ops.index(op) + 1:]
    for later in after:
        yield from later.walk()


def unscoped_operands(root: Operation) -> list[tuple[Operation, int]]:
    """The operand slots in `root`'s function that read a value not in scope there."""
    func = root
    while func.parent_op is not None:
        func = func.parent_op
    problems = []
    _scan(func.regions[0].block, set(), problems) if func.regions else None
    return problems


def _scan(block: Block, visible: set, problems: list) -> None:
    visible = visible | set(block.args)
    for op in block.ops:
        for index, value in enumerate(op.operands):
            if value not in visible:
                problems.append((op, index))
        for region in op.regions:
            _scan(region.block, visible, problems)
        visible.update(op.results)
