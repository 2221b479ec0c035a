"""The race detector's shadow memory: per slot, who last wrote it and the last two readers.

A slot is a unit of bytes (see `regions`: arrays that share memory share its shadow); an
access of an element touches every slot its bytes cover.

Two accesses of one element race when they come from different threads, at least one writes,
and nothing orders them: threads of one block are ordered only by a barrier between the
accesses (each block counts its barriers in an epoch), or, for lanes of one warp, by a
`syncwarp` between them (each warp counts those in a warp epoch; a partial mask counts for the
whole warp, so a race between a lane in the mask and one outside it goes unseen); threads of
different blocks only by a grid barrier (`cg.this_grid().sync()`: counted in the epoch's bits
from GRID_EPOCH_SHIFT up).
Atomics never race with atomics, but do with plain reads and writes. Plain writes of the value
the element already holds (every thread clearing one array) are not reported against other
writes: whatever their order, memory ends the same.

Everything is vectorised over the active threads of one access. Keeping two readers (not all)
finds every write-after-read race against another thread of the current epoch except where the
two most recent readers were overwritten by later reads; it never reports a false race.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NOBODY = -1
WARP = 32
GRID_EPOCH_SHIFT = 32


@dataclass(frozen=True)
class Access:
    """One memory op's accesses by its active threads (all arrays have one entry per slot
    accessed: per thread, or per slot of each thread's element where it covers several)."""

    address: np.ndarray  # slot number in the shadow
    thread: np.ndarray   # launch-wide thread id
    epoch: np.ndarray    # the barrier epoch of the thread's block
    warp_epoch: np.ndarray   # the syncwarp epoch of the thread's warp
    block_first: np.ndarray  # the launch-wide id of thread 0 of the thread's block
    op: int              # number of the op (for its source location)


@dataclass(frozen=True)
class Conflict:
    """Thread `access.thread[position]` races with an earlier access by `other_thread`."""

    position: int
    other_thread: int
    other_op: int
    other_did: str  # "wrote", "read", "atomically updated", or "writes" in the same op


class Slot:
    """One remembered access per element: thread, epochs and op number."""

    def __init__(self, size: int):
        self.thread = np.full(size, NOBODY, np.int64)
        self.epoch = np.zeros(size, np.int64)
        self.warp_epoch = np.zeros(size, np.int32)
        self.op = np.zeros(size, np.int32)

    def record(self, address, thread, epoch, warp_epoch, op) -> None:
        self.thread[address] = thread
        self.epoch[address] = epoch
        self.warp_epoch[address] = warp_epoch
        self.op[address] = op


class Shadow:
    """Shadow memory of one array of `size` elements, in a launch of blocks of `block_size`."""

    def __init__(self, size: int, block_size: int):
        self.block_size = block_size
        self.writer = Slot(size)
        self.write_is_atomic = np.zeros(size, bool)
        self.reader = Slot(size)
        self.other_reader = Slot(size)  # a reader other than `reader`, where there was one

    def _unordered(self, slot: Slot, access: Access) -> np.ndarray:
        """Where the access and the slot's remembered access may happen in either order."""
        other = slot.thread[access.address]
        # a range test rather than dividing ids by the block size: much cheaper
        same_block = (other >= access.block_first) & (other < access.block_first + self.block_size)
        epoch = slot.epoch[access.address]
        same_epoch = epoch == access.epoch
        same_grid_epoch = (epoch >> GRID_EPOCH_SHIFT) == (access.epoch >> GRID_EPOCH_SHIFT)
        unordered = (other != NOBODY) & (other != access.thread) & \
            (~same_block & same_grid_epoch | same_epoch)
        if not access.warp_epoch.any():   # no syncwarp yet in these warps: nothing it orders
            return unordered
        same_warp = same_block & ((other - access.block_first) // WARP
                                  == (access.thread - access.block_first) // WARP)
        return unordered & ~(same_warp & (slot.warp_epoch[access.address] != access.warp_epoch))

    def _conflict(self, slot: Slot, access: Access, hits: np.ndarray, did: str) -> Conflict | None:
        if not hits.any():
            return None
        position = int(np.argmax(hits))
        address = access.address[position]
        if did == "wrote" and self.write_is_atomic[address]:
            did = "atomically updated"
        return Conflict(position, int(slot.thread[address]), int(slot.op[address]), did)

    def read(self, access: Access) -> Conflict | None:
        hits = self._unordered(self.writer, access)
        conflict = self._conflict(self.writer, access, hits, "wrote")
        if conflict is not None:
            return conflict
        address = access.address
        previous = self.reader.thread[address]
        previous_epoch = self.reader.epoch[address]
        previous_warp_epoch = self.reader.warp_epoch[address]
        previous_op = self.reader.op[address]
        self.reader.record(address, access.thread, access.epoch, access.warp_epoch, access.op)
        winner = self.reader.thread[address]  # one reader per element when several read it now
        kept = (previous != NOBODY) & (previous != winner)
        if kept.any():
            where = address[kept]
            self.other_reader.record(where, previous[kept], previous_epoch[kept],
                                     previous_warp_epoch[kept], previous_op[kept])
        others = winner != access.thread
        if others.any():
            self.other_reader.record(address[others], access.thread[others],
                                     access.epoch[others], access.warp_epoch[others], access.op)
        return None

    def _check_readers(self, access: Access) -> Conflict | None:
        for slot in (self.reader, self.other_reader):
            conflict = self._conflict(slot, access, self._unordered(slot, access), "read")
            if conflict is not None:
                return conflict
        return None

    def write(self, access: Access, values=None, before=None, after=None) -> Conflict | None:
        """`values`: what each thread writes; `before`/`after`: the elements' values before and
        after this op's writes (where given, writes of one value to one element are benign)."""
        same = (values == before) if values is not None else False
        hits = self._unordered(self.writer, access) & ~(same & ~self.write_is_atomic[
            access.address])
        conflict = self._conflict(self.writer, access, hits, "wrote")
        if conflict is None:
            conflict = self._check_readers(access)
        if conflict is not None:
            return conflict
        address = access.address
        self.writer.thread[address] = access.thread
        winner = self.writer.thread[address]
        twice = winner != access.thread  # two threads of this one op write the same element
        if values is not None:
            twice &= values != after
        if twice.any():
            position = int(np.argmax(twice))
            return Conflict(position, int(winner[position]), access.op, "writes")
        self.writer.record(address, access.thread, access.epoch, access.warp_epoch, access.op)
        self.write_is_atomic[address] = False
        return None

    def atomic(self, access: Access) -> Conflict | None:
        address = access.address
        hits = self._unordered(self.writer, access) & ~self.write_is_atomic[address]
        conflict = self._conflict(self.writer, access, hits, "wrote")
        if conflict is None:
            conflict = self._check_readers(access)
        if conflict is not None:
            return conflict
        self.writer.record(address, access.thread, access.epoch, access.warp_epoch, access.op)
        self.write_is_atomic[address] = True
        return None
