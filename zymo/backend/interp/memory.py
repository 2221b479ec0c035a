"""The interpreter's memory: arrays of every address space, checked loads, stores and atomics.

An array value of the IR is a `Buffer`. Shared arrays hold one copy per block of the batch
and local arrays one per thread, as a leading axis of the backing NumPy array that the kernel
does not see. Every access is checked against the array's shape for the active threads,
masked-off threads read from a safe index, and accesses are reported to the race detector.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...diagnostics import BoundsError, RaceError
from . import atomics
from .races import Access, Conflict
from .regions import Placement, place, place_view

if TYPE_CHECKING:
    from .driver import Interpreter

PER_BLOCK, PER_THREAD = "block", "thread"


class Buffer:
    """An array as kernels see it: `shape` is the kernel's view, `data` the backing array,
    whose leading axis is the block or the thread when `per` is PER_BLOCK or PER_THREAD."""

    def __init__(self, data: np.ndarray, name: str, shape: tuple[int, ...], per: str = "",
                 writable: bool = True, placement: Placement | None = None,
                 parent: Buffer | None = None, translate=None):
        self.data = data
        self.name = name
        self.shape = shape
        self.per = per
        self.writable = writable
        self.placement = placement   # where the race detector sees it; None: not watched
        # a view whose position or shape differs between threads (its extents may then be
        # vectors): `translate(indices)` gives the indices of `parent` its indices denote
        # (None: the same ones), and `data` is the parent's (or of its shape, another dtype's)
        self.parent = parent
        self.translate = translate
        # flat element number = sum(index[k] * strides[k]) over the axes of `data`
        self.strides = tuple(int(np.prod(data.shape[k + 1:])) for k in range(data.ndim))

    def __repr__(self) -> str:
        return f"<buffer {self.name} {self.data.dtype}{list(self.shape)}>"


def poisoned(shape: tuple[int, ...], dtype: np.dtype, byte: int | None = None) -> np.ndarray:
    """Uninitialised memory, filled so that reading it before writing shows: NaN for floats,
    the byte 0xA5 repeated for integers; or, given `byte`, that byte everywhere (False for
    bools): a second pattern, to tell whether a result depends on such reads."""
    data = np.empty(shape, dtype)
    if byte is not None:
        if dtype.kind == "b":
            data.fill(False)
        else:
            data.view(np.uint8).fill(byte)
    elif dtype.kind == "f":
        data.fill(np.nan)
    elif dtype.kind == "b":
        data.fill(True)
    else:
        data.view(np.uint8).fill(0xA5)
    return data


# ---- addressing ------------------------------------------------------------------------
class Lanes:
    """The threads that take part in one access: the active ones, less those out of bounds
    when bounds are not checked. `everyone` says the mask is all true (a fast path)."""

    def __init__(self, mask: np.ndarray, everyone: bool):
        self.mask = mask
        self.everyone = everyone

    def pick(self, value) -> np.ndarray:
        """The entries of the taking-part threads, `value` broadcast to every thread first."""
        if not (isinstance(value, np.ndarray) and value.shape == self.mask.shape):
            value = np.broadcast_to(value, self.mask.shape)     # costly: the common case skips it
        return value if self.everyone else value[self.mask]


def _index(ctx: Interpreter, op, buffer: Buffer, indices,
           lanes: Lanes | None = None) -> tuple[tuple, Lanes]:
    """Index vectors (or scalars) into `buffer.data` for every thread of the batch, and the
    threads that take part. An active thread out of bounds is a BoundsError (or, unchecked,
    sits the access out); masked-off threads use index 0, so that nothing faults."""
    lanes = lanes or Lanes(ctx.mask, ctx.everyone_active())
    parts = []
    for index, extent in zip(indices, buffer.shape):
        index = np.asarray(index)
        if index.dtype != np.int64:
            index = index.astype(np.int64)
        outside = (index < 0) | (index >= extent)
        if outside.any():
            bad = outside & lanes.mask
            if bad.any():
                if ctx.check_bounds:
                    _bounds_error(ctx, op, buffer, indices, bad)
                lanes = Lanes(lanes.mask & ~outside, False)
            index = np.where(outside, 0, index)
        parts.append(index)
    if buffer.parent is not None:
        inner = buffer.translate(parts) if buffer.translate is not None else parts
        return _index(ctx, op, buffer.parent, inner, lanes)
    if buffer.per == PER_BLOCK:
        blocks = ctx.batch.block_in_batch if ctx.batch.nblocks > 1 else np.int64(0)
        parts.insert(0, blocks)
    elif buffer.per == PER_THREAD:
        parts.insert(0, ctx.batch.thread_in_batch)
    return tuple(parts), lanes


def _bounds_error(ctx, op, buffer: Buffer, indices, bad: np.ndarray) -> None:
    n = ctx.batch.n
    thread = int(np.argmax(np.broadcast_to(bad, (n,))))
    index = tuple(int(np.broadcast_to(i, (n,))[thread]) for i in indices)
    who = ctx.batch.describe(ctx.batch.global_id[thread])
    shown = index[0] if len(index) == 1 else index
    raise ctx.error(op, f"index {shown} is out of bounds for `{buffer.name}` with shape "
                        f"{buffer.shape} (in {who})", BoundsError)


def _address(buffer: Buffer, parts: list[np.ndarray]) -> np.ndarray:
    if len(parts) == 1:
        return parts[0]
    address = np.zeros(len(parts[0]) if parts else 0, np.int64)
    for part, stride in zip(parts, buffer.strides):
        address += part * stride
    return address


def _report(ctx, op, buffer: Buffer, what: str, parts, thread: int, position: int,
            conflict: Conflict):
    """`position`: the racing element's entry in `parts`; `thread`: who accessed it."""
    index = tuple(int(p[position]) for p in parts)
    if buffer.per:
        index = index[1:]  # the block or thread axis is not the kernel's
    shown = ", ".join(map(str, index))
    me = ctx.batch.describe(thread)
    other = ctx.batch.describe(conflict.other_thread)
    other_op = ctx.op_by_number(conflict.other_op)
    other_loc = other_op.loc
    size = ctx.batch.block_size
    why = ("threads of different blocks are never ordered"
           if conflict.other_thread // size != thread // size
           else "no barrier between them")
    sharers = buffer.placement.sharers
    shared = (f" (memory shared with {', '.join(f'`{n}`' for n in sharers)})"
              if sharers else "")
    message = (f"data race on `{buffer.name}[{shown}]`{shared}: {me} {what} it here, and "
               f"{other} {conflict.other_did} it at {other_loc} ({why})")
    error = ctx.error(op, message, RaceError)
    error.ops = (op.id, other_op.id)
    raise error


def _track(ctx, op, buffer: Buffer, lanes: Lanes, parts, kind: str, *values) -> None:
    """Tell the race detector about an access (`parts`: the taking-part threads' indices;
    `values`: for a write, what is written and the elements before and after)."""
    placement = buffer.placement
    if placement is None:
        return
    batch = ctx.batch
    ids, epochs, warp_epochs, firsts = (lanes.pick(v) for v in (
        batch.global_id, ctx.thread_epoch(), ctx.thread_warp_epoch(), batch.block_first_id))
    address = _address(buffer, parts) if placement.identity else placement.slots(parts)
    span = placement.span
    if span > 1:  # an element covers several slots: each is accessed
        address = placement.covered(address)
        ids, epochs, warp_epochs, firsts = (np.repeat(v, span)
                                            for v in (ids, epochs, warp_epochs, firsts))
        values = tuple(np.repeat(v, span) for v in values)
    access = Access(address, ids, epochs, warp_epochs, firsts, ctx.op_number(op))
    conflict = getattr(placement.shadow, kind)(access, *values)
    if conflict is not None:
        what = {"read": "reads", "write": "writes", "atomic": "atomically updates"}[kind]
        _report(ctx, op, buffer, what, parts, int(ids[conflict.position]),
                conflict.position // span, conflict)


# ---- the accesses ----------------------------------------------------------------------
def load(ctx: Interpreter, op, buffer: Buffer, indices):
    index, lanes = _index(ctx, op, buffer, indices)
    if buffer.data.size == 0:
        return np.zeros((), buffer.data.dtype)
    if buffer.placement is not None:
        _track(ctx, op, buffer, lanes, [lanes.pick(p) for p in index], "read")
    return buffer.data[index]


def store(ctx: Interpreter, op, buffer: Buffer, indices, value) -> None:
    if not buffer.writable:
        raise ctx.error(op, f"`{buffer.name}` is a constant array and cannot be written")
    index, lanes = _index(ctx, op, buffer, indices)
    if buffer.data.size == 0:
        return
    parts = [lanes.pick(p) for p in index]
    where, written = tuple(parts), lanes.pick(value)
    if buffer.placement is None:
        buffer.data[where] = written
        return
    before = buffer.data[where]       # a copy: `where` is an index array
    buffer.data[where] = written
    # reported after the write: a race stops the run, so the data no longer matters
    _track(ctx, op, buffer, lanes, parts, "write", written, before, buffer.data[where])


def atomic(ctx: Interpreter, op, buffer: Buffer, indices, combine, operands):
    """Apply `combine(old, *operands)` per active thread, in thread order; the old values."""
    index, lanes = _index(ctx, op, buffer, indices)
    dtype = buffer.data.dtype
    if buffer.data.size == 0:
        return np.zeros((), dtype)
    parts = [lanes.pick(p) for p in index]
    _track(ctx, op, buffer, lanes, parts, "atomic")
    olds = atomics.apply(buffer.data, tuple(parts), _address(buffer, parts), combine,
                         [lanes.pick(o) for o in operands])
    if lanes.everyone:
        return olds
    result = np.zeros(ctx.batch.n, dtype)
    result[lanes.mask] = olds
    return result


# ---- allocation ------------------------------------------------------------------------
def arguments(arrays: list[np.ndarray], names: list[str], block_size: int,
              check_races: bool, grain: int = 0) -> list[Buffer]:
    """Buffers of the array arguments; arrays that share memory share its race shadow
    (`grain`: see `regions.place`)."""
    placements = place(arrays, names, block_size, grain) if check_races \
        else [None] * len(arrays)
    return [Buffer(a, name, tuple(a.shape), placement=placement)
            for a, name, placement in zip(arrays, names, placements)]


def shared(shape, dtype: np.dtype, nblocks: int, name: str, block_size: int,
           check_races: bool, poison: int | None = None, grain: int = 0) -> Buffer:
    data = poisoned((nblocks, *shape), dtype, poison)
    placement = place([data], [name], block_size, grain)[0] if check_races else None
    return Buffer(data, name, tuple(shape), PER_BLOCK, placement=placement)


def dynamic_shared(memory: np.ndarray, dtypes: list[np.dtype], names: list[str],
                   block_size: int, check_races: bool, grain: int = 0) -> list[Buffer]:
    """Views of the per-block dynamic shared bytes as arrays of each of `dtypes`, which all
    start there (one race shadow sees their bytes; they read as NaN or -1 until written)."""
    views = []
    for dtype in dtypes:
        usable = memory.shape[1] - memory.shape[1] % dtype.itemsize
        views.append(memory[:, :usable].view(dtype))
    placements = place(views, names, block_size, grain) if check_races \
        else [None] * len(views)
    return [Buffer(data, name, (data.shape[1],), PER_BLOCK, placement=placement)
            for data, name, placement in zip(views, names, placements)]


def view(ctx: Interpreter, op, base: Buffer, make, name: str) -> Buffer:
    """A buffer over `base`'s memory: `make(data, lead)` is the NumPy view of `base.data`
    (whose first `lead` axes are the block or thread axis, kept) as the kernel sees it. The
    race detector sees the view's accesses as accesses to `base`'s bytes."""
    lead = 1 if base.per else 0
    try:
        data = make(base.data, lead)
    except (ValueError, IndexError, AttributeError) as error:
        raise ctx.error(op, f"cannot view `{base.name}` this way: {error}") from None
    assert np.shares_memory(data, base.data) or data.size == 0 or base.data.size == 0
    if base.parent is not None and data.shape != base.data.shape:
        raise ctx.error(op, f"the interpreter cannot change the shape of `{base.name}`, a view "
                            "whose position differs between threads, by its dtype")
    placement = None
    if base.placement is not None and data.size:
        placement = place_view(base.placement, base.data, data, base.name, name)
        if placement is None:
            raise ctx.error(op, f"the race detector cannot place this view of `{base.name}` "
                                "(its elements split the units it watches)")
    if base.parent is not None:   # the same indices as `base`, which translates them
        return Buffer(data, name, base.shape, base.per, base.writable, placement, base)
    return Buffer(data, name, tuple(data.shape[lead:]), base.per, base.writable, placement)


def translated(base: Buffer, shape: tuple, translate, name: str) -> Buffer:
    """A view of `base` whose position or shape differs between threads: `shape` holds an
    extent (a vector over the threads, or a number) per axis, `translate(indices)` the
    indices of `base` that its indices denote."""
    return Buffer(base.data, name, shape, base.per, base.writable, base.placement, base,
                  translate)


def local(shape, dtype: np.dtype, nthreads: int, name: str, poison: int | None = None) -> Buffer:
    return Buffer(poisoned((nthreads, *shape), dtype, poison), name, tuple(shape), PER_THREAD)


def constant(data: np.ndarray, name: str) -> Buffer:
    return Buffer(data, name, tuple(data.shape), writable=False)
