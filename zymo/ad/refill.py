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
is inside L, after the fill.

Shared tiles (`plan_shared`; the DG kernel's flux tiles s_F, s_G): each iteration of L has
every thread store its part of the tile, a barrier, and threads read other threads' parts.
Cached, each thread's reads were a per-thread tape (DG: 250 floats a thread, 500 MB at 20 k
elements, written and read through local memory). Instead the reverse iteration runs the fill
again (each thread recomputes and stores its part) and a barrier, and the reads are made again
from the tile. An array qualifies when it is a static shared allocation whose every write is a
plain store in L, reached on every iteration (inside L's body or inside constant `range`
loops there, no branch), each index the thread index along an axis or the variable of one of
those loops spanning the extent (so the block's threads cover the tile: the launch checks that
the block has as many threads along each axis, `LaunchAssumptions.blocks`); every read is in
L after a barrier that follows the fill in L's body. The barrier between an iteration's reads
and the next iteration's fill, which the kernel has, keeps the reverse iterations apart; one
barrier before L's reverse parts the forward sweep's last reads from the first refill.
ZYMO_AD_TILE_REFILL=0 turns it off (the reads are then kept on tapes, as before)."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.operation import Operation
from ..ir.traits import Allocates, Atomic, Barrier, CountedLoop, Loop, ReadsMemory, WritesMemory
from ..ir.types import Array
from ..ir.values import BlockArgument, Value
from ..switches import switch
from ..passes.common import constant_of
from ..passes.indexing import ThreadAffine
from .activity import accessed_array


@dataclass(frozen=True)
class Fill:
    loop: Operation        # the loop each of whose iterations fills the array
    ops: tuple             # the ops directly in the loop's body that fill it, in order
    stores: tuple = ()     # a shared tile: its stores (the refill keeps only these writes)


def tile_refill_enabled() -> bool:
    return switch("ZYMO_AD_TILE_REFILL", True)


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


# ---- shared tiles -------------------------------------------------------------------------
def plan_shared(func, writes: dict, forms) -> tuple[dict, frozenset]:
    """(array -> its Fill, the launch's (axis, threads) conditions) for the shared tiles
    that qualify (`writes`: array class -> ops; `forms`: the index forms)."""
    fills, blocks = {}, set()
    if not tile_refill_enabled():
        return fills, frozenset()
    reads: dict = {}
    for op in func.body.walk():
        array = accessed_array(op)
        if array is not None and op.has_trait(ReadsMemory):
            reads.setdefault(array, []).append(op)
    for array, stores in writes.items():
        t = getattr(array, "type", None)
        if isinstance(array, BlockArgument) or not isinstance(t, Array) \
                or t.space != "shared" or not t.shape or array.owner.parent is not func.body.block \
                or not all(_plain_store_nd(s) for s in stores) or not reads.get(array):
            continue
        for loop in _candidate_loops(stores[0]):
            fill = _tile_fill(loop, stores, reads[array])
            found = [_covered(s, loop, t.shape, forms) for s in stores] \
                if fill is not None else [None]
            if None not in found:
                fills[array] = fill
                for needed in found:
                    blocks |= needed
                break
    return fills, frozenset(blocks)


def _candidate_loops(store: Operation):
    """The loops around `store` from the innermost out, as long as what lies between is a
    constant `range` (reached on every iteration, no branch)."""
    op = store.parent_op
    while op is not None and op.has_trait(Loop):
        yield op
        if _static_range(op) is None:
            return
        op = op.parent_op


def _tile_fill(loop: Operation, stores: list, reads: list) -> Fill | None:
    """The Fill of the tile in `loop` when every store is in it and every read comes after
    a barrier in its body that follows the stores."""
    body = loop.regions[-1].block
    tops = [_top(s, body) for s in stores]
    if None in tops:
        return None
    ops = tuple(sorted(set(tops), key=body.ops.index))
    last = body.ops.index(ops[-1])
    barriers = [k for k, op in enumerate(body.ops) if op.has_trait(Barrier) and k > last]
    if not barriers:
        return None
    for read in reads:
        top = _top(read, body)
        if top is None or body.ops.index(top) <= barriers[0]:
            return None
    return Fill(loop, ops, tuple(stores))


def _plain_store_nd(op: Operation) -> bool:
    """A store of any rank (no read, no atomic, no result)."""
    return op.has_trait(WritesMemory) and not op.has_trait(ReadsMemory) \
        and not op.has_trait(Atomic) and not op.regions and not op.results \
        and hasattr(op, "indices")


def _static_range(op: Operation):
    if not op.has_trait(CountedLoop):
        return None
    bounds = (_int(op.lower), _int(op.upper), _int(op.step))
    return bounds if None not in bounds else None


def _top(op: Operation, body):
    """The op of `body` that holds `op` (None if `body` does not)."""
    while op is not None and op.parent is not body:
        op = op.parent_op
    return op


def _covered(store: Operation, loop: Operation, shape, forms):
    """The (axis, threads) the block needs for the store to write every element of the tile
    in each iteration of `loop`, or None when its indices do not cover it or a branch lies
    between them (only constant `range`s may)."""
    ivs, op = {}, store.parent_op
    while op is not loop:
        if _static_range(op) is None:
            return None
        ivs[op.regions[-1].block.args[0]] = _static_range(op)
        op = op.parent_op
    needed, used = set(), set()
    for extent, index in zip(shape, store.indices):
        form = forms.form(index)
        if ivs.get(index) == (0, extent, 1) and index not in used:
            used.add(index)
        elif isinstance(form, ThreadAffine) and form.base == "tid" and not form.offset \
                and not form.parts and form.axis not in {a for a, _ in needed}:
            needed.add((form.axis, extent))
        else:
            return None
    return needed
