"""Memory adjoints: the shadow arrays and how each access's adjoint reaches them, by the
strategy the plan gave it (`AccessPlan.read_modes`): plain updates, batches over small static
loops (`Batch`), grouped stores, block-private copies and accumulators (`private.py`), the
gather form of stencil reads (`gather.py`), warp-aggregated atomics and atomics."""
from __future__ import annotations

import contextlib

from ..ir.operation import Operation, Region
from ..ir.traits import CountedLoop
from ..ir.types import i32, u32
from ..ir.values import Value
from ..ops import arith, atomic, control, memory, sync, warp
from .emit import Emitter
from .plan import AccessPlan, in_loop
from .private import PrivateCopies
from .recompute import PrimalValues
from .site import LoopFrame, Site
from .transpose import ScratchShadows


class Batch:
    """The shadow accesses of one read or store, one per iteration of a loop with a static trip
    count, in per-thread arrays indexed by iteration (registers once unrolled). Before the loop
    reverses, one loop loads every element it will touch into `loaded` (and keeps the indices):
    the loads overlap instead of each waiting for a store before it, which the compiler keeps
    in order as it cannot see that the addresses differ per iteration; a load and then a store
    to one address also wait for each other. A store's adjoint then takes its cotangent from
    `loaded` and the shadow is zeroed after the loop; a read's adjoint leaves its cotangent in
    `cotangents`, and after the loop the sums are stored."""

    def __init__(self, op: Operation, shadow: Value, trips: int, loaded: Value,
                 indices: list[Value], cotangents: Value | None):
        self.op, self.shadow, self.trips = op, shadow, trips
        self.loaded, self.indices, self.cotangents = loaded, indices, cotangents


class MemoryAdjoints(Emitter):
    """`shadows`: primal array -> its shadow; `virtual`: the offset of the gather form's
    virtual thread being reversed (None: this thread's own sweep)."""

    def __init__(self, plan: AccessPlan, site: Site, values: PrimalValues, error):
        self.plan, self.site, self.b = plan, site, site.b
        self.values, self.error = values, error
        self.shadows: dict = {}
        self.batches: dict = {}      # read or store -> its Batch, while its loop reverses
        self.preloaded: dict = {}    # grouped store -> (its cotangent, its indices)
        self.gather_slots: dict = {}
        self.virtual = None
        self.scratch = ScratchShadows(plan.transposed, site)
        self.private = PrivateCopies(plan, site, values, self.shadows, self.scratch)

    # ---- shadows ------------------------------------------------------------------------
    def allocate(self, op: Operation) -> None:
        """The shadow of an array the kernel allocates, zeroed."""
        shared = op.result.type.space == "shared"
        if shared and op.result.type.shape is None:
            # its shadow would need dynamic shared memory of its own, which the launch does
            # not size (all `shared.array(0, ...)` start at the same byte)
            self.error(op.loc, "a differentiated dynamic shared array (shared.array(0, ...))",
                       "give the shared array a static size")
            return
        if shared and op.parent is not self.plan.func.body.block:
            self.error(op.loc, "a differentiated shared array must be allocated at the top of "
                       "the kernel, outside if and loops (its shadow is zeroed there)")
            return
        # a local array is one per thread wherever it is allocated (its storage is made at
        # function entry), so its shadow is made and zeroed at entry
        shadow = op.clone({})
        shadow.results[0].name_hint = "d" + (op.result.name_hint or "array")
        with (contextlib.nullcontext() if shared else self.site.at_entry()):
            self.b.insert(shadow)
            for array in (shadow.result, *self.scratch.allocate(op.result)):
                self._zero(array, shared)
            if shared:
                self.b.create(sync.Barrier)
        self.shadows[op.result] = shadow.result

    def view(self, op: Operation, fwd: dict) -> None:
        """The same view of the shadow as `op` takes of its array (a differentiated one), made
        after the forward sweep's copy of `op` (at the top of the kernel: it reaches the whole
        reverse sweep)."""
        base = self.shadows.get(op.operands[0])
        if base is None:
            return
        mapping = {v: fwd.get(v, v) for v in op.operands}
        mapping[op.operands[0]] = base
        shadow = op.clone(mapping)
        shadow.results[0].name_hint = "d" + (op.result.name_hint or "view")
        self.b.insert(shadow)
        self.shadows[op.result] = shadow.result

    def _zero(self, array: Value, shared: bool) -> None:
        shape = array.type.shape or ()
        count = 1
        for extent in shape:
            count *= extent
        if shared:
            start, stride = self.site.linear_thread()
        else:
            start, stride = self.const(0, i32), self.const(1, i32)

        def zero(k):
            indices, rest = [], k
            for extent in reversed(shape[1:]):
                e = self.const(extent, i32)
                indices.append(self.b.value(arith.Mod, rest, e))
                rest = self.b.value(arith.FloorDiv, rest, e)
            indices.append(rest)
            self.b.create(memory.Store, array, *reversed(indices), self.zero(array.type.dtype))

        self.site.loop(start, count, stride, zero)

    def _access(self, op: Operation):
        shadow = self.shadows.get(op.array)
        if shadow is None:
            return None, []
        return shadow, [self.values.get(i) for i in op.indices]

    # ---- adjoints of accesses -------------------------------------------------------------
    def load(self, op: Operation, ct: Value | None) -> None:
        """The read's cotangent into the shadow, as the plan says."""
        plan = self.plan
        shadow, indices = self._access(op) if ct is not None else (None, [])
        if shadow is None:
            return
        mode = plan.read_modes.get(op, "atomic")
        if mode == "gather":
            if plan.gather.offsets[op] == (self.virtual or plan.gather.zero):
                slot, zero = self.gather_slot(op.array)
                self.b.create(memory.Store, slot, zero, self.add(
                    self.b.value(memory.Load, slot, zero), ct))
        elif self.virtual is not None:
            return   # a virtual thread only yields the cotangents of gathered reads
        elif mode == "batched":
            self.b.create(memory.Store, self.batches[op].cotangents, self.site.scope.loop.index, ct)
        elif op in self.private.accumulators:   # summed per thread over loops (`loopsums`)
            self.private.accumulate_owned(op, shadow, indices, ct)
        elif op in plan.written_back:   # the store's adjoint left the element zero
            self.b.create(memory.Store, shadow, *indices, ct)
        elif mode == "plain":
            self.b.create(memory.Update, shadow, *indices, ct, chained=in_loop(op))
        else:
            self.private.shared_update(op, mode, shadow, indices, ct)

    def store(self, op: Operation) -> Value | None:
        """The stored value's adjoint, read from the shadow, which is then zeroed."""
        if op in self.batches:
            return self.b.value(memory.Load, self.batches[op].loaded, self.site.scope.loop.index)
        if op in self.preloaded:
            return self.preloaded[op][0]
        shadow, indices = self._access(op)
        if shadow is None:
            return None
        adjoint = self.scratch.drain(op.array, indices,
                                     self.b.value(memory.Load, shadow, *indices))
        if self.plan.gather is None:   # else neighbours read it: the consuming kernel zeroes it
            self.b.create(memory.Store, shadow, *indices, self.zero(op.value.type))
        return adjoint

    def atomic(self, op: Operation, sign: int) -> Value | None:
        """The adjoint of an atomic add's (sign 1) or sub's (-1) value: d value += shadow[i]."""
        shadow, indices = self._access(op)
        if shadow is None or not self.plan.activity.active(op.value):
            return None
        adjoint = self.b.value(memory.Load, shadow, *indices)
        return adjoint if sign > 0 else self.site.neg(adjoint)

    # ---- batches and groups ---------------------------------------------------------------
    def prefetch(self, block, reversed_ops) -> list:
        """Before `block` reverses: the batched accesses of its loops load their elements (so
        the loads of all the block's loops overlap too), and the grouped stores their
        cotangents; the grouped stores are returned (`zero_grouped` after the block)."""
        for op in block.ops:
            if op.has_trait(CountedLoop) and op in reversed_ops and op not in self.plan.fused:
                for inner in op.regions[-1].block.ops:
                    if inner in self.plan.batched and inner in reversed_ops:
                        self.batches[inner] = self._prefetch(op, inner)
        grouped = [op for op in block.ops if op in self.plan.store_groups
                   and op in reversed_ops]
        for op in grouped:
            with self.b.location(op.loc):
                indices = [self.values.get(i) for i in op.indices]
                self.preloaded[op] = (self.b.value(memory.Load, self.shadows[op.array],
                                                   *indices), indices)
        return grouped

    def zero_grouped(self, grouped: list) -> None:
        for op in grouped:
            _, indices = self.preloaded.pop(op)
            with self.b.location(op.loc):
                self.b.create(memory.Store, self.shadows[op.array], *indices,
                              self.zero(op.value.type))

    def _prefetch(self, loop: Operation, op: Operation) -> Batch:
        """The loop that loads, before `loop` reverses, the shadow elements batched `op` will
        touch (its indices recomputed as the reverse sweep recomputes values)."""
        trips = self.plan.batched[op]
        shadow = self.shadows[op.array]
        reads = bool(op.results)
        dtype = op.result.type if reads else op.value.type
        types = [dtype, *(i.type for i in op.indices)] + ([dtype] if reads else [])
        with self.site.at_entry():
            arrays = [self.b.value(memory.LocalAlloc, shape=(trips,), dtype=t) for t in types]
        batch = Batch(op, shadow, trips, arrays[0], arrays[1:1 + len(op.indices)],
                      arrays[-1] if reads else None)
        region = Region()
        t = region.block.add_arg(i32, "t")
        self.b.create(control.For, self.const(0, i32), self.const(trips, i32),
                      self.const(1, i32), result_types=[], regions=[region])
        frame = LoopFrame(loop, 1)
        with self.site.entered(loop.regions[-1].block, region.block, frame) as scope:
            frame.index = t
            scope.pro = 0
            indices = [self.values.get(i) for i in op.indices]
            values = [self.b.value(memory.Load, shadow, *indices), *indices]
            if reads:
                values.append(self.zero(dtype))   # iterations that add nothing
            for array, value in zip(arrays, values):
                self.b.create(memory.Store, array, t, value)
            self.b.create(control.Yield)
        return batch

    def finish_batches(self, loop: Operation) -> None:
        """After `loop` reversed: its batched reads' sums stored, its stores' shadows zeroed."""
        for inner in loop.regions[-1].block.ops:
            if inner not in self.batches:
                continue
            batch = self.batches.pop(inner)
            dtype = batch.loaded.type.dtype
            zero, one = self.const(0, i32), self.const(1, i32)
            region = Region()
            t = region.block.add_arg(i32, "t")
            with self.b.at_end(region.block):
                indices = [self.b.value(memory.Load, a, t) for a in batch.indices]
                if batch.cotangents is not None:
                    value = self.add(self.b.value(memory.Load, batch.loaded, t),
                                     self.b.value(memory.Load, batch.cotangents, t))
                else:
                    value = self.zero(dtype)
                self.b.create(memory.Store, batch.shadow, *indices, value)
                self.b.create(control.Yield)
            self.b.create(control.For, zero, self.const(batch.trips, i32), one, result_types=[],
                          regions=[region])

    # ---- gather form and output adjoints --------------------------------------------------
    def gather_slot(self, array: Value):
        if array not in self.gather_slots:
            self.gather_slots[array] = self.site.local_slot(array.type.dtype, "gathered")
        return self.gather_slots[array]

    def sum_into(self, out: Value, value: Value) -> None:
        """out[0] += the sum of `value` over the block: every thread reaches the kernel's end,
        so a shuffle tree per warp, per-warp partials in shared memory behind a barrier, and
        one atomic per block. Blocks whose size is not a multiple of 32 use one atomic per
        thread (their last warp is partial, which full-warp shuffles do not allow)."""
        zero = self.const(0, i32)
        linear, count = self.site.linear_thread()
        whole = self.cmp(self.b.value(arith.Mod, count, self.const(32, i32)), zero, "eq")
        partials = self.b.value(memory.SharedAlloc, shape=(32,), dtype=value.type)
        partials.name_hint = "block_partials"
        full = self.const(0xFFFFFFFF, u32)
        lane = self.b.value(arith.Mod, linear, self.const(32, i32))
        then, other = Region(), Region()
        self.b.create(control.If, whole, result_types=[], regions=[then, other])

        def warp_sum(v):
            for offset in (16, 8, 4, 2, 1):
                v = self.add(v, self.b.value(warp.ShflDown, full, v, self.const(offset, i32)))
            return v

        with self.b.at_end(then.block):
            total = warp_sum(value)
            first = self.cmp(lane, zero, "eq")
            warp_index = self.b.value(arith.FloorDiv, linear, self.const(32, i32))
            self.site.when(first, lambda: self.b.create(memory.Store, partials, warp_index, total))
            self.b.create(sync.Barrier)
            warps = self.b.value(arith.FloorDiv, count, self.const(32, i32))

            def leader_warp():
                mine = self.b.value(arith.Min, lane, self.b.value(arith.Sub, warps, self.const(
                    1, i32)))
                part = self.select(self.cmp(lane, warps, "lt"),
                                   self.b.value(memory.Load, partials, mine), self.zero(value.type))
                block_total = warp_sum(part)
                self.site.when(first, lambda: self.b.create(atomic.AtomicAdd, out, zero,
                                                            block_total))

            self.site.when(self.cmp(linear, self.const(32, i32), "lt"), leader_warp)
            self.b.create(control.Yield)
        with self.b.at_end(other.block):
            self.b.create(atomic.AtomicAdd, out, zero, value)
            self.b.create(control.Yield)
