"""Transposed adjoints of shared-memory reads: each thread leaves its cotangent in a slot of its
own, and the thread that stored the element sums the slots.

A shared tile is written once per element and then read by several threads: DG's `s_F[j, n, s]`
by the five threads of row j. The scatter adjoint adds every reader's cotangent into the shadow
element, and the readers collide: on GPUs without a native shared-memory float add (NVIDIA's,
where `atom.shared.add.f32` is a compare-and-swap loop) that costs an order of magnitude more
than the read. Turned around, the shadow of element e is `ds[e] + sum_f S[e, f]`: the reader
adds its cotangent to S[e, f], where f numbers the thread along the axes the read's index does
not use (its *free* axes), so no two threads share a slot, and the adjoint of the store that
wrote e reads the sum and zeroes the slots. The kernel's own barriers order the two: the store
was followed by a barrier before other threads read e, so in reverse the readers' slots are
written before a barrier that precedes the store's adjoint (a thread's reads of its own element
before the barrier come after the store in program order).

A read qualifies (`plan`) when the array is a static shared allocation only loaded from and
stored to (no atomics, in-place updates or views: their adjoints would read the shadow without
the slots), and its free axes (those no index component is exactly `threadIdx` along) have a
known bound whose product is at most MAX_SLOTS: the largest extent of a shared array the kernel
indexes by `threadIdx` along that axis, or 1 for an axis the kernel never reads. The element
and f then name one thread, whatever the read's other index components are. The launch checks
that the block stays within the bounds (`LaunchAssumptions.most`), else the all-atomic variant
runs.

ZYMO_AD_TRANSPOSE=0 turns it off (the reads keep their atomic modes), to measure it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.traits import Atomic, ReadsMemory, WritesMemory
from ..ir.types import Array, i32
from ..ops import arith, memory, thread
from ..passes.indexing import LaunchAssumptions, ThreadAffine
from ..switches import switch
from .activity import accessed_array
from .emit import Emitter

MAX_SLOTS = 32                # threads summed per element: the product of the free axes' bounds
MAX_BYTES = 32 * 1024         # the scratch arrays of one kernel together
AXES = "xyz"


@dataclass(frozen=True)
class TransposePlan:
    reads: dict               # read -> its free axes (a tuple in xyz order)
    bounds: dict              # axis -> the most threads a block has along it

    def slots(self, free: tuple) -> int:
        return _slots(self.bounds, free)

    def scratches(self, array) -> list:
        """The free-axis sets of `array`'s transposed reads: one scratch array each."""
        return sorted({free for op, free in self.reads.items() if op.array is array})

    def assumptions(self) -> LaunchAssumptions:
        used = {axis for free in self.reads.values() for axis in free}
        return LaunchAssumptions(most=frozenset((a, self.bounds[a]) for a in used))


def plan(func, forms, read_modes: dict) -> TransposePlan | None:
    """The shared reads (of the "uniform", "grouped" or "atomic" modes) whose adjoints are
    transposed, or None if there is none."""
    if not enabled():
        return None
    bounds = block_bounds(func, forms)
    candidates, arrays = {}, set()
    for op, mode in read_modes.items():
        if mode not in ("grouped", "atomic", "uniform") or not _staged(op.array):
            continue
        bound = {form.axis for form in map(forms.form, op.indices)
                 if isinstance(form, ThreadAffine) and form.base == "tid" and not form.parts}
        free = tuple(a for a in AXES if a not in bound)
        if all(a in bounds for a in free):
            candidates[op] = free
    found, total = {}, 0
    for op, free in candidates.items():
        count = _slots(bounds, free)
        if count > MAX_SLOTS:
            continue
        if (op.array, free) not in arrays:
            size = count * op.array.type.dtype.nbytes
            for extent in op.array.type.shape:
                size *= extent
            if total + size > MAX_BYTES:
                continue
            total += size
            arrays.add((op.array, free))
        found[op] = free
    return TransposePlan(found, bounds) if found else None


def enabled() -> bool:
    return switch("ZYMO_AD_TRANSPOSE", True)


def _slots(bounds: dict, free: tuple) -> int:
    count = 1
    for axis in free:
        count *= bounds[axis]
    return count


def block_bounds(func, forms) -> dict:
    """axis -> at most how many threads a block has along it for the kernel's shared indexing
    to stay in bounds: the largest static extent indexed by exactly `threadIdx` along the axis;
    1 for an axis along which the kernel reads neither `threadIdx` nor `blockDim` (nor the lane
    id, which depends on every axis). Axes with neither are absent."""
    bounds: dict = {}
    read_axes = set()
    for op in func.body.walk():
        if isinstance(op, thread.LaneId):
            read_axes.update(AXES)
        elif isinstance(op, (thread.ThreadIdx, thread.BlockDim)):
            read_axes.add(op.axis)
        array = accessed_array(op)
        if array is None or array.type.space != "shared" or array.type.shape is None:
            continue
        for index, extent in zip(op.indices, array.type.shape):
            form = forms.form(index)
            if isinstance(form, ThreadAffine) and form.base == "tid" and not form.parts:
                bounds[form.axis] = max(bounds.get(form.axis, 0), extent)
    for axis in AXES:
        if axis not in read_axes and axis not in bounds:
            bounds[axis] = 1
    return bounds


def _staged(array) -> bool:
    """A static shared allocation that every use loads from or plainly stores to."""
    if not isinstance(array.type, Array) or array.type.space != "shared" \
            or array.type.shape is None or not isinstance(array.owner, memory.SharedAlloc):
        return False
    for user in array.users():
        if accessed_array(user) is not array:
            if any(isinstance(r.type, Array) for r in user.results):
                return False   # a view: its accesses reach the shadow another way
            continue
        reads, writes = user.has_trait(ReadsMemory), user.has_trait(WritesMemory)
        if user.has_trait(Atomic) or reads and writes:
            return False
    return True


class ScratchShadows(Emitter):
    """The slots of the transposed reads: allocated with the shadow, added to by the reads'
    adjoints, drained by the stores' adjoints."""

    def __init__(self, plan: TransposePlan | None, site):
        self.plan, self.site, self.b = plan, site, site.b
        self.arrays: dict = {}    # primal array -> {free axes: its scratch array}

    def allocate(self, array) -> list:
        """The scratch arrays of `array`'s transposed reads (to be zeroed by the caller)."""
        if self.plan is None:
            return []
        made = self.arrays[array] = {}
        for free in self.plan.scratches(array):
            shape = tuple(array.type.shape) + (self.plan.slots(free),)
            made[free] = self.b.value(memory.SharedAlloc, shape=shape, dtype=array.type.dtype)
            made[free].name_hint = "t" + (array.name_hint or "array")
        return list(made.values())

    def accumulate(self, op, indices: list, value) -> None:
        """The read's cotangent into this thread's slot (no other thread writes it before the
        next barrier)."""
        free = self.plan.reads[op]
        scratch = self.arrays[op.array][free]
        slot = [*indices, self._slot(free)]
        old = self.b.value(memory.Load, scratch, *slot)
        self.b.create(memory.Store, scratch, *slot, self.add(old, value))

    def drain(self, array, indices: list, adjoint):
        """`adjoint` (the shadow element's value) plus the element's slots, which are zeroed."""
        for free, scratch in self.arrays.get(array, {}).items():
            zero = self.zero(array.type.dtype)
            for f in range(self.plan.slots(free)):
                slot = [*indices, self.const(f, i32)]
                adjoint = self.add(adjoint, self.b.value(memory.Load, scratch, *slot))
                self.b.create(memory.Store, scratch, *slot, zero)
        return adjoint

    def _slot(self, free: tuple):
        """This thread's number along the free axes."""
        slot, stride = None, 1
        for axis in free:
            tid = self.b.value(thread.ThreadIdx, axis=axis)
            term = tid if stride == 1 else self.b.value(
                arith.Mul, tid, self.const(stride, i32))
            slot = term if slot is None else self.add(slot, term)
            stride *= self.plan.bounds[axis]
        return slot if slot is not None else self.const(0, i32)
