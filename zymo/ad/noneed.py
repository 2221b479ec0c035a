"""`zm.DuplicatedNoNeed(x, dx)`: the caller needs the adjoints that reach x's shadow but not
the values the launch leaves in x (zm.Tape puts them back itself), so the derivative skips
its stores into x.

That is sound only where no op of the kernel observes those stores: x must be write-only, its
memory (x or any view of it) only ever the array of a plain store. A load, an atomic, a call
or anything else that takes it keeps every store; so does a Const or Duplicated argument the
launch finds overlapping x (the launch takes the aliased build, whose derivative keeps them).
"""
from __future__ import annotations

from ..ir.operation import Block
from ..ir.traits import Aliases, ReadsMemory, WritesMemory
from ..ir.types import Array
from ..ir.values import Value
from ..ops.views import array_origin


def _plain_store(op) -> bool:
    return op.has_trait(WritesMemory) and not op.has_trait(ReadsMemory) and not op.results


def write_only(array: Value) -> bool:
    """Whether every use of `array`, through views, is the array operand of a plain store."""
    pending = [array]
    while pending:
        value = pending.pop()
        for use in value.uses:
            op = use.operation
            if op.has_trait(Aliases) and use.index == 0:
                pending.extend(r for r in op.results if isinstance(r.type, Array))
                if any(not isinstance(r.type, Array) for r in op.results):
                    return False
            elif not (_plain_store(op) and use.index == 0):
                return False
    return True


def drop_stores(block: Block, arrays: set) -> None:
    """Erase the plain stores into the memory of `arrays` in `block` and nested blocks."""
    for op in [op for top in list(block.ops) for op in top.walk()]:
        if _plain_store(op) and op.operands and array_origin(op.operands[0]) in arrays:
            op.erase()
