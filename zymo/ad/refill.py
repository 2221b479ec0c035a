"""Thread-local arrays that every iteration of a loop fills whole before reading them: scratch
arrays of one iteration (RSBench's phase factors, filled per nuclide and read at indices taken
from memory). Later iterations overwrite such an array, so reading it again in the reverse sweep
would see the last iteration's contents; but whatever the iteration read, it had written itself
first, so the reverse sweep makes the reads again after running that iteration's fill again.
No tape is needed, whatever the loop's trip count (read from memory too).

An array qualifies when it is a 1-d local allocation with a static size N made outside the
loop L, and either all its writes are one store `a[k] = ...` directly in the body of a
`range(0, N)` loop (k its induction variable) that sits directly in the body of L, or all its
writes are stores at constant indices directly in L's body covering 0..N-1; every read of it
is inside L, after the fill."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.operation import Operation
from ..ir.traits import Allocates, CountedLoop, Loop, ReadsMemory, WritesMemory
from ..ir.types import Array
from ..ir.values import BlockArgument, Value
from ..passes.common import constant_of
from .activity import accessed_array


@dataclass(frozen=True)
class Fill:
    loop: Operation        # the loop each of whose iterations fills the array
    ops: tuple             # the ops directly in the loop's body that fill it, in order


def plan(func, writes: dict) -> dict:
    """array -> its Fill, for the local arrays that qualify (`writes`: array class -> ops)."""
    reads: dict = {}
    for op in func.body.walk():
        array = accessed_array(op)
        if array is not None and op.has_trait(ReadsMemory):
            reads.setdefault(array, []).append(op)
    fills = {}
    for array, stores in writes.items():
        size = _local_size(array)
        if size is None:
            continue
        fill = _fill(array, stores, size)
        if fill is None or fill.loop in array.owner.ancestors():
            continue   # an array made in each iteration: the reverse sweep cannot name it
        if all(_after(read, fill) for read in reads.get(array, ())):
            fills[array] = fill
    return fills


def _local_size(array) -> int | None:
    if not isinstance(array, Value) or isinstance(array, BlockArgument):
        return None
    t = array.type
    if not isinstance(t, Array) or t.space != "local" or t.ndim != 1 or not t.shape \
            or not array.owner.has_trait(Allocates):
        return None
    return t.shape[0]


def _int(value) -> int | None:
    found = constant_of(value)
    return None if found is None else int(found)


def _plain_store(op: Operation) -> bool:
    return op.has_trait(WritesMemory) and not op.has_trait(ReadsMemory) and not op.regions \
        and len(op.operands) == 3


def _fill(array, stores: list, size: int) -> Fill | None:
    if not all(_plain_store(s) for s in stores):
        return None
    if len(stores) == 1:   # a[k] = ... in `for k in range(0, N)`
        store = stores[0]
        inner = store.parent_op
        if inner is not None and inner.has_trait(CountedLoop):
            body = inner.regions[-1].block
            outer = inner.parent_op
            if store.parent is body and store.operands[1] is body.args[0] \
                    and (_int(inner.lower), _int(inner.upper), _int(inner.step)) == (0, size, 1) \
                    and outer is not None and outer.has_trait(Loop):
                return Fill(outer, (inner,))
    loop = stores[0].parent_op
    if loop is None or not loop.has_trait(Loop):
        return None
    body = stores[0].parent
    if any(s.parent is not body for s in stores):
        return None
    indices = {_int(s.operands[1]) for s in stores}
    if indices != set(range(size)):
        return None
    return Fill(loop, tuple(sorted(stores, key=body.ops.index)))


def _after(read: Operation, fill: Fill) -> bool:
    """`read` is in the fill's loop, in the same block as the fill and after it."""
    block = fill.ops[0].parent
    top = read
    while top.parent is not block:
        top = top.parent_op
        if top is None:
            return False
    return block.ops.index(top) > block.ops.index(fill.ops[-1])
