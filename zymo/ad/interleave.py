"""Loops whose iterations are reversed one at a time, inside the forward sweep.

The plain reverse sweep runs a loop's iterations forward (F0 F1 ... Fn) and, after everything
that follows the loop, their adjoints backward (Rn ... R0); each Rj needs the values of Fj
again, so they are recomputed or cached. When the iterations share nothing, the order
F0 R0 F1 R1 ... Fn Rn gives the same derivatives, and each Rj finds every value of Fj still
live: nothing is recomputed or cached. The dense layer's `for j` over output features is such
a loop; the plain order reruns each feature's inner product over `x` to get the `tanh`'s
argument back (Tapenade's "II-loops", independent iterations, are reversed this way too).

It pays where the plain order would replay a loop: the loop's body holds a loop with carried
values (a reduction). Other loops keep the plain order, where the reverse sweep batches their
shadow accesses (`Batch`) so that the loads overlap.

A loop qualifies when the order cannot matter:
- it is a `range` loop with no carried values, not inside another loop (so it runs once, and
  the rest of the reverse sweep comes after all its adjoints in both orders);
- no barrier, warp operation, call or allocation is inside it;
- no array (aliasing class) is both read and written inside it; each class it writes holds
  one array, written only by stores or only by atomics; and an array it stores to is stored
  at an index whose value on one axis is the loop variable (through casts that keep every
  value), the same axis for every store to it (distinct iterations store distinct elements:
  each store's adjoint, which reads and zeroes the cotangent, sees only its own);
- after the loop (in program order), nothing accesses an array the loop writes, and nothing
  writes an array the loop reads: the adjoints of what follows would otherwise touch the
  cotangents these iterations read or accumulate, before them in the plain order, after them
  here.
"""
from __future__ import annotations

from ..ir.operation import Operation
from ..ir.traits import (Allocates, Atomic, Barrier, CallsFunction, Convergent, CountedLoop,
                         Loop, ReadsMemory, Terminator, WritesMemory)
from ..ir.values import BlockArgument, Value
from ..ops import arith
from .activity import accessed_array


def plan(func, reversed_ops: set, array_class, batched) -> set:
    """The loops of `func` to reverse iteration by iteration; `array_class(array)` names the
    memory an array may share (one class for all arguments when they may alias); `batched`
    holds the accesses whose shadows a plain-order loop batches."""
    found = set()
    for op in func.body.walk():
        if op in reversed_ops and _pays(op, batched) and _qualifies(op, func, array_class):
            found.add(op)
    return found


def _pays(loop: Operation, batched) -> bool:
    if not loop.has_trait(CountedLoop):
        return False
    inner = list(loop.regions[-1].walk())
    return not any(op in batched for op in inner) \
        and any(op.has_trait(Loop) and op.results for op in inner)


def _qualifies(loop: Operation, func, array_class) -> bool:
    if not loop.has_trait(CountedLoop) or loop.results \
            or any(a.has_trait(Loop) for a in loop.ancestors()):
        return False
    iv = loop.regions[-1].block.args[0]
    reads, writes, axes = set(), set(), {}
    stored: dict = {}    # aliasing class -> the arrays stored to, and how ("plain", "atomic")
    for inner in loop.regions[-1].walk():
        if inner.has_trait(Terminator):
            continue
        if any(inner.has_trait(t) for t in (Barrier, Convergent, CallsFunction, Allocates)):
            return False
        if not (inner.has_trait(ReadsMemory) or inner.has_trait(WritesMemory)):
            continue
        array = accessed_array(inner)
        if array is None:
            return False
        kind = array_class(array)
        if inner.has_trait(WritesMemory):
            writes.add(kind)
            stored.setdefault(kind, set()).add(
                (array, "atomic" if inner.has_trait(Atomic) else "plain"))
            if not inner.has_trait(Atomic):
                own = {k for k, index in enumerate(inner.indices) if _is(index, iv)}
                axes[kind] = axes.get(kind, own) & own
                if not axes[kind]:
                    return False
        else:
            reads.add(kind)
    if reads & writes:
        return False
    # one array per aliasing class, written one way: the axis condition speaks of its elements
    # (two arguments that may overlap are one class; an atomic's adjoint reads the cotangent
    # that a plain store's adjoint, in another iteration, would zero)
    if any(len(ways) > 1 for ways in stored.values()):
        return False
    for later in _after(loop, func):
        if not (later.has_trait(ReadsMemory) or later.has_trait(WritesMemory)):
            continue
        array = accessed_array(later)
        if array is None:
            return False
        kind = array_class(array)
        if kind in writes or kind in reads and later.has_trait(WritesMemory):
            return False
    return True


def _is(index: Value, iv: Value) -> bool:
    """Whether `index` is the loop variable, through casts that keep every value (a narrowing
    cast would map two iterations to one element)."""
    while not isinstance(index, BlockArgument) and isinstance(index.owner, arith.Cast) \
            and _keeps_values(index.owner.x.type, index.type):
        index = index.owner.x
    return index is iv


def _keeps_values(source, target) -> bool:
    if not (source.is_int and target.is_int) or target.bits < source.bits:
        return False
    if source.is_signed:
        return target.is_signed
    return target.bits > source.bits or not target.is_signed


def _after(op: Operation, func):
    """Every op that runs after `op` in program order (`op` is in no loop)."""
    while op.parent is not None:
        block = op.parent
        for later in block.ops[block.ops.index(op) + 1:]:
            yield from later.walk()
        if block is func.body.block:
            return
        op = op.parent_op
