"""Facts the passes share: constant values, side effects, nesting, and rebuilding an op."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.operation import Operation, Region
from ..ir.traits import (Allocates, Atomic, Barrier, ConstantLike, Convergent, CountedLoop, Fence,
                         Loop, Output, Pure, ReadsMemory, Terminator, WritesMemory)
from ..ir.types import Scalar, Type
from ..ir.values import BlockArgument, OpResult, Value
from ..ops.arith import Add, Constant
from ..ops.registry import INTERP

# Traits that make an op observable beyond its results.
EFFECTS = (WritesMemory, Atomic, Barrier, Convergent, Fence, Output)
# Traits that make an op without regions free of effects (unless it also has one of EFFECTS).
EFFECT_FREE = (Pure, ConstantLike, Allocates, ReadsMemory)


def constant_of(value: Value) -> np.ndarray | None:
    """The compile-time value of `value` (a 0-d NumPy array), or None when it is not constant.

    The value comes from the constant op's interp rule, so it is exactly what the
    interpreter sees.
    """
    if not isinstance(value, OpResult) or not value.owner.has_trait(ConstantLike):
        return None
    rule = INTERP.find(value.owner)
    if rule is None:
        return None
    return np.asarray(rule(None, value.owner))


def make_constant(value: Any, type: Type, before: Operation, id: str) -> Value:
    """An `arith.constant` of `type` holding `value`, inserted before `before`."""
    assert isinstance(type, Scalar), f"constant of non-scalar type {type}"
    python_value = np.asarray(value).astype(type.dtype).item()
    op = Constant([], [type], {"value": python_value, "type": type}, loc=before.loc, id=id)
    assert before.parent is not None
    before.parent.insert_before(before, op)
    return op.result


def may_have_effects(op: Operation) -> bool:
    """Whether removing `op` (its results unused) could change what the program does.

    Ops without regions are effect-free only when a trait says so; ops with regions are
    effect-free when every nested op is and they surely terminate (a `while` may not).
    """
    if any(op.has_trait(trait) for trait in EFFECTS):
        return True
    if not op.regions:
        return not (op.has_trait(Terminator) or any(op.has_trait(t) for t in EFFECT_FREE))
    if op.has_trait(Loop) and not op.has_trait(CountedLoop):
        return True
    return any(may_have_effects(inner) for region in op.regions for inner in region.block.ops)


def is_inside(value: Value, op: Operation) -> bool:
    """Whether `value` is defined in one of the regions of `op` (at any depth)."""
    if isinstance(value, OpResult):
        return any(ancestor is op for ancestor in value.owner.ancestors())
    assert isinstance(value, BlockArgument)
    parent = value.block.parent_op
    return parent is op or (parent is not None and any(a is op for a in parent.ancestors()))


def rebuild(op: Operation, operands: list[Value], result_types: list[Type],
            keep_results: list[int]) -> Operation:
    """A copy of `op` with new operands and results that takes over its regions, id and place.

    The uses of `op.results[k]` for k in `keep_results` move to the new op's results, in
    order; every other result of `op` must be unused.
    """
    regions = op.regions
    op.regions = []  # the new op owns them now; erasing `op` must not touch their ops
    new = type(op)(operands, result_types, dict(op.attrs), regions, loc=op.loc, id=op.id)
    assert op.parent is not None
    op.parent.insert_before(op, new)
    for new_index, old_index in enumerate(keep_results):
        op.results[old_index].replace_all_uses_with(new.results[new_index])
    op.erase()
    return new


def terminator(region: Region) -> Operation:
    """The terminator that ends `region` (structured IR always has one)."""
    term = region.block.terminator
    assert term is not None, "region without a terminator"
    return term



def loop_step(loop: Operation, arg: BlockArgument, yielded: Value) -> Value | None:
    """`c` when `loop` updates its integer carried value `arg` to `yielded` = `arg + c`, with
    `c` defined outside the loop (an induction variable); else None."""
    if not isinstance(yielded, OpResult) or not isinstance(yielded.owner, Add):
        return None
    if not (isinstance(arg.type, Scalar) and arg.type.is_int):
        return None
    lhs, rhs = yielded.owner.operands
    step = rhs if lhs is arg else lhs if rhs is arg else None
    if step is None or is_inside(step, loop):
        return None
    return step
