"""Which threads have finished: the ones no barrier may wait for.

Structured IR has no early exit: the frontend lowers `if i >= n: return` into a flag and runs
the rest of the kernel under `control.if(not returned)`. A thread that skips such a region
has nothing left to do that another thread could observe, so, like a thread that exited on
a GPU, it must not count as missing at a barrier inside that region. This module finds the
regions for which that holds, by asking traits only.
"""
from __future__ import annotations

from ...ir.operation import Operation, Region
from ...ir.traits import (
    Allocates,
    Atomic,
    Barrier,
    Convergent,
    IsolatedFromAbove,
    Loop,
    Output,
    Pure,
    ReadsMemory,
    Terminator,
    WritesMemory,
)

EFFECTS = (WritesMemory, Atomic, Barrier, Convergent, Output)  # what others can observe
HARMLESS = (Pure, ReadsMemory, Allocates, Terminator)


def quiet(op: Operation) -> bool:
    """Whether running `op` can affect no other thread (ops of unknown effect, such as calls,
    are assumed to)."""
    if any(op.has_trait(trait) for trait in EFFECTS):
        return False
    if op.regions:
        return all(quiet(inner) for region in op.regions for inner in region.block.ops)
    return any(op.has_trait(trait) for trait in HARMLESS)


def _in_tail(op: Operation, kernel: Operation) -> bool:
    """Whether nothing observable follows `op` until the kernel ends (outside loops)."""
    block = op.parent
    if block is None or block.parent is None:
        return False
    following = block.ops[block.ops.index(op) + 1:]
    if not all(quiet(later) for later in following):
        return False
    owner = block.parent.parent
    if owner is kernel:
        return True
    if owner is None or owner.has_trait(Loop) or owner.has_trait(IsolatedFromAbove):
        return False
    return _in_tail(owner, kernel)


def others_finish(region: Region, kernel: Operation) -> bool:
    """Whether the threads that reach the op owning `region` but do not run `region` have
    finished while it runs: they run only quiet regions of that op, and nothing observable
    comes after it."""
    op = region.parent
    if op is None or op.has_trait(Loop) or op.has_trait(IsolatedFromAbove):
        return False
    others = [r for r in op.regions if r is not region]
    if not all(quiet(inner) for other in others for inner in other.block.ops):
        return False
    return _in_tail(op, kernel)
