"""Codegen rewrites that let loads start early: adjacent `if`s on one condition merged, and
loads (and loops that only load, into local arrays) moved above the loops before them.

A derivative kernel runs its forward sweep and then its reverse sweep, each under the kernel's
own guard (`if i < n`): two `if`s on one condition, and in the second the loads of the output
cotangents and the primal inputs sit after everything the first one did. A GPU thread then
waits for each of those loads in turn after its loops (in a kernel with a per-thread loop, the
wait was most of the derivative's time). Merged into one block, the loads can move above the
loops, where their latency overlaps the loops' work; LLVM then also merges the loads the two
sweeps repeat.
"""
from __future__ import annotations

from ..ir.module import Module
from ..ir.operation import Block, Operation
from ..ir.traits import (Allocates, Atomic, Conditional, Convergent, Fence, Loop,
                         ReadsMemory, WritesMemory)
from ..ir.values import BlockArgument, Value
from ..ops.views import array_origin
from .common import rebuild


class MergeIfs:
    """`if c {A} else {B}` followed at once by `if c {C} else {D}` on the same condition value
    becomes `if c {A; C} else {B; D}`, yielding the results of both; the second's uses of the
    first's results take the values the first's branches yielded. Verified IR in, verified IR
    out."""

    name = "merge-ifs"

    def run(self, module: Module) -> bool:
        changed = False
        for func in module:
            for block in _blocks(func):
                changed |= self._merge_in(block)
        return changed

    def _merge_in(self, block: Block) -> bool:
        changed = False
        index = 0
        while index + 1 < len(block.ops):
            first, second = block.ops[index], block.ops[index + 1]
            if first.has_trait(Conditional) and type(second) is type(first) \
                    and len(first.regions) == len(second.regions) == 2 \
                    and first.operands[0] is second.operands[0]:
                _merge(first, second)
                changed = True
            else:
                index += 1
        return changed


def _merge(first: Operation, second: Operation) -> None:
    count = len(first.results)
    inner = [set(region.walk()) for region in second.regions]
    for k, result in enumerate(first.results):
        for use in list(result.uses):
            for region, ops in zip(first.regions, inner):
                if use.operation in ops:   # the value the first `if` yielded on this side
                    use.operation.set_operand(use.index, region.block.terminator.operands[k])
    for mine, theirs in zip(first.regions, second.regions):
        yielded = list(mine.block.terminator.operands)
        mine.block.terminator.erase()
        for op in list(theirs.block.ops):
            op.detach()
            mine.block.append(op)
        last = mine.block.terminator
        last.set_operands(yielded + list(last.operands))
    types = [r.type for r in first.results] + [r.type for r in second.results]
    merged = rebuild(first, list(first.operands), types, list(range(count)))
    for k, result in enumerate(second.results):
        result.replace_all_uses_with(merged.results[count + k])
    second.erase()


class EarlyLoads:
    """Move each load, and each loop that only loads (into local arrays of its own, as a
    derivative's prefetch loops do), above the loops before it in its block, as far as its
    operands and the memory effects in between allow: not past an op that may write what it
    reads, nor past one that touches the local arrays it fills, nor past a fence (barriers
    are fences: other threads' writes become visible there) or a write the pass cannot name.
    With `noalias` (distinct array arguments do not overlap: a derivative the launch
    checked), only writes to the same array stop a load; without, any write to global memory
    does. An op moves only where it passes a loop. Verified IR in, verified IR out."""

    name = "early-loads"

    def __init__(self, noalias: bool = False):
        self.noalias = noalias

    def run(self, module: Module) -> bool:
        changed = False
        for func in module:
            for block in _blocks(func):
                changed |= self._hoist_in(block)
        return changed

    def _hoist_in(self, block: Block) -> bool:
        changed = False
        for op in list(block.ops):
            footprint = _footprint(op)
            if footprint is None:
                continue
            needs = _free_values(op)
            position = block.ops.index(op)
            target, passes_loop = position, False
            while target > 0:
                before = block.ops[target - 1]
                if any(r in needs for r in before.results) or self._blocks(before, *footprint):
                    break
                passes_loop |= before.has_trait(Loop)
                target -= 1
            if passes_loop:
                op.detach()
                block.insert(target, op)
                changed = True
        return changed

    def _blocks(self, op: Operation, reads: set, fills: set) -> bool:
        shared = any(_allocation(array_origin(r)) and r.type.space == "shared" for r in reads)
        for inner in op.walk():
            if inner.has_trait(Fence) or shared and inner.has_trait(Convergent):
                return True     # warp-synchronous code may exchange shared data at a warp op
            touched = array_origin(inner.operands[0]) if inner.operands else None
            if (inner.has_trait(ReadsMemory) or inner.has_trait(WritesMemory)) \
                    and touched in {array_origin(f) for f in fills}:
                return True
            if inner.has_trait(WritesMemory) or inner.has_trait(Atomic):
                if touched is None or any(self._may_alias(touched, r) for r in reads):
                    return True
        return False

    def _may_alias(self, written: Value, read: Value) -> bool:
        written, read = array_origin(written), array_origin(read)   # views: their memory
        if written is read or _dynamic_shared(written) and _dynamic_shared(read):
            return True             # every `zm.shared.array(0, ...)` starts at the same byte
        if _allocation(written) or _allocation(read):
            return False            # a shared or local array is its own memory
        if not (_argument(written) and _argument(read)):
            return True             # an array the pass cannot trace to its origin
        return not self.noalias


def _footprint(op: Operation):
    """(arrays read, local arrays written) of a load or of a loop that only loads and fills
    local arrays; None for anything else."""
    if not op.regions:
        if op.results and op.has_trait(ReadsMemory) and not op.has_trait(WritesMemory) \
                and not op.has_trait(Atomic):
            return {op.operands[0]}, set()
        return None
    if not op.has_trait(Loop):
        return None
    reads, fills = set(), set()
    for inner in op.walk():
        if inner is op:
            continue
        if inner.has_trait(Fence) or inner.has_trait(Atomic) or inner.has_trait(Convergent):
            return None
        if inner.has_trait(WritesMemory):
            array = inner.operands[0]
            if not (_allocation(array) and array.type.space == "local"):
                return None
            fills.add(array)
        elif inner.has_trait(ReadsMemory):
            reads.add(inner.operands[0])
    return (reads - fills, fills) if fills else None


def _free_values(op: Operation) -> set:
    """The values `op` and the ops nested in it use that are defined outside it."""
    inside = set()
    for inner in op.walk():
        inside.update(inner.results)
        for region in inner.regions:
            inside.update(region.block.args)
    return {v for inner in op.walk() for v in inner.operands if v not in inside}


def _allocation(array: Value) -> bool:
    return not isinstance(array, BlockArgument) and array.owner.has_trait(Allocates)


def _dynamic_shared(array: Value) -> bool:
    return _allocation(array) and array.type.space == "shared" \
        and 0 in tuple(array.owner.attrs.get("shape", ()))


def _argument(array: Value) -> bool:
    return isinstance(array, BlockArgument) and array.block.parent_op is not None \
        and array.block.parent_op.parent_op is None


def _blocks(func: Operation):
    yield from (region.block for op in func.walk() for region in op.regions)
