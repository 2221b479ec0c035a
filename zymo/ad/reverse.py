"""The reverse transform: a kernel's derivative as one new kernel, on the structured IR.

The derivative kernel runs the primal kernel (the forward sweep) and then the reverse sweep,
which visits the ops that carry derivatives in reverse order and applies each op's adjoint rule
(`ADJOINT` in `zymo/ops`). Structure makes the reversal local:

- an `if` reverses to an `if` on the same condition; a loop to a `range` loop over its trip
  count, run backwards (a `while` counts its trips in the forward sweep);
- adjoints of values defined and used in one block are SSA values; an adjoint accumulated from
  inside a nested region goes to a one-element local slot, which LLVM turns into registers;
- barriers reverse to barriers.

The transform is four parts, each owning its state and handed the others it uses:
- `AccessPlan` (`plan.py`): decided before anything is emitted and frozen: which strategy each
  memory access's adjoint gets, what can be recomputed, the launch conditions assumed;
- `PrimalValues` (`recompute.py`): primal values in the reverse sweep (forward sweep's copies,
  recomputed, reconstructed, replayed, or loaded from tapes);
- `MemoryAdjoints` (`shadows.py`): the shadows and the adjoints of loads, stores and atomics;
- `Reverse` (here): the sweeps, and the adjoints of values; the structural rules' handlers.
They emit through one `Site` (`site.py`): the builder and the scope being reversed.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from ..diagnostics import CompileError, Diagnostic, Loc
from ..ir.operation import Operation, Region
from ..ir.traits import (Aliases, Allocates, Atomic, Conditional, CountedLoop, Loop, OrderDependent,
                         Pure, ReadsMemory, Terminator, WritesMemory)
from ..ir.types import Array, FunctionType, Scalar, i32
from ..ir.values import BlockArgument, Value
from ..ops import arith, control, memory, sync, thread
from ..ops.registry import ADJOINT
from ..ops.views import array_origin
from ..ops.structural import (REVERSE_ATOMIC_ADD, REVERSE_ATOMIC_SUB, REVERSE_BARRIER,
                              REVERSE_GRID_BARRIER,
                              REVERSE_FOR, REVERSE_IF, REVERSE_LOAD, REVERSE_MODE, REVERSE_STORE,
                              REVERSE_VIEW, REVERSE_WHILE, handles, transform)
from ..passes.indexing import LaunchAssumptions
from . import gather
from .activity import ActivityAnalysis, accessed_array, lost_derivatives, reject_calls
from .emit import Emitter
from .loopsums import modes as loop_sum_modes
from .plan import plan_accesses
from .private import skip_zero
from .refill import tile_refill_enabled
from .transpose import enabled as transposed_reads
from .recompute import PrimalValues
from .shadows import MemoryAdjoints
from .site import LoopFrame, Scope, Site
from .tape import GlobalTape


@transform(REVERSE_MODE)
class Reverse(Emitter):
    """The sweeps: the context the ops' adjoint rules receive (`ad`)."""

    def __init__(self, func, arg_kinds: list[str], extra_types: list, noalias: bool = True,
                 plain_updates: bool = True, outputs=(), global_filter=None):
        self.primal_func = func
        self.kinds = list(arg_kinds)
        self.noalias = noalias
        self.extra_types = list(extra_types)
        self.activity = ActivityAnalysis(func, self.kinds, outputs=outputs)
        self.errors: list[Diagnostic] = []
        self.site = Site()
        self.b = self.site.b
        self.plan = plan_accesses(func, self.activity, noalias, plain_updates)
        self.values = PrimalValues(self.plan, self.site, self.error, global_filter)
        self.memory = MemoryAdjoints(self.plan, self.site, self.values, self.error)
        self.adjoint_outs: dict = {}
        self.slots: dict = {}        # primal value -> its one-element adjoint slot
        self.memory_active = bool(self.activity.arrays)

    # ---- the whole function -----------------------------------------------------------------
    def run(self):
        self._validate()
        func, site, plan = self.primal_func, self.site, self.plan
        private = plan.private is not None
        region = Region()
        block = region.block
        names: list[str] = []
        for arg, kind, name, extra in zip(func.args, self.kinds, func.arg_names,
                                          self.extra_types):
            self.values.fwd[arg] = block.add_arg(arg.type, name)
            names.append(name)
            if kind in ("dup", "dup_noneed"):
                self.memory.shadows[arg] = block.add_arg(extra, "d" + name)
                names.append("d" + name)
            elif kind == "active":
                self.adjoint_outs[arg] = block.add_arg(extra, "d" + name)
                names.append("d" + name)
        for k, tape in enumerate(self.values.global_tapes()):   # allocated by the launch
            tape.array = block.add_arg(Array(tape.dtype, 1, "global", "C"), f"tape{k}")
            names.append(f"tape{k}")
        site.start(block, func.body.block)
        if private and plan.fused:   # the forward sweep accumulates too
            self.memory.private.start(func.loc)
        self._forward_sweep(func.body.block, block)
        forward = set(block.ops)
        self._drop_unneeded_stores(forward)
        if private and not plan.fused:
            self.memory.private.start(func.loc)
        self._reverse_block(func.body.block)
        for arg, out in self.adjoint_outs.items():
            adjoint = self.take_adjoint(arg)
            if adjoint is not None:
                self.memory.sum_into(out, adjoint)
        if plan.gather is not None:
            with self.b.location(func.loc):
                self._gather_sweeps()
        if private:
            self.memory.private.flush(func.loc)
        with self.b.location(func.body.block.ops[-1].loc):
            self.b.create(control.Return)
        self._raise_errors()
        _mark_reverse_loops([op for op in block.ops if op not in forward])
        ftype = FunctionType(tuple(a.type for a in block.args), ())
        return control.Func([], [], dict(sym_name=func.sym_name, function_type=ftype,
                                         kind="kernel", arg_names=tuple(names)), [region],
                            loc=func.loc, id=func.id)

    def _forward_sweep(self, pblock, nblock) -> None:
        """The forward sweep of the whole body into `nblock`; the reverse sweep starts at
        the end of it, in the top scope."""
        exports, _ = self._forward_block(pblock, nblock, exporting=True)
        self.values.exported.update(exports)
        self.site.scope = self.site.top
        self.b.block, self.b.index = nblock, None

    def error(self, loc: Loc, message: str, hint: str = "") -> None:
        self.errors.append(Diagnostic(loc, message, hint))

    def _raise_errors(self) -> None:
        if self.errors:
            raise CompileError(sorted(set(self.errors), key=lambda d: (d.loc.line, d.loc.col)))

    # ---- what cannot be differentiated, all at once --------------------------------------
    def _validate(self) -> None:
        activity = self.activity
        for op in self.primal_func.body.walk():
            if op in activity.reversed_ops and not op.regions and ADJOINT.find(op) is None:
                reason = ADJOINT.absence_reason(type(op))
                self.error(op.loc, f"cannot differentiate `{op.name}`" +
                           (f": {reason}" if reason else ""),
                           "compute it from values that carry no derivative, or restructure")
            array = accessed_array(op)
            if array is not None and op in activity.reversed_ops and \
                    getattr(array.type.dtype, "is_complex", False):
                # a complex shadow would take its adjoints by atomic adds of complex values,
                # which no target has
                self.error(op.loc, f"the derivative through array `{array.name_hint}` of "
                           f"{array.type.dtype} values is not supported",
                           "pass the real and imaginary parts as two float arrays and build "
                           "the complex value with complex(re, im)")
            if op.has_trait(Atomic) and any(activity.active(r) and r.has_uses
                                            for r in op.results):
                self.error(op.loc, "the old value returned by an atomic on differentiated data "
                           "cannot be differentiated", "do not use the atomic's result")
        self._validate_views()
        for store, load, arg in lost_derivatives(self.primal_func, self.kinds, activity):
            self.error(store.loc, f"array `{arg.name_hint}` is Const but stores values that "
                       f"depend on active inputs and is read back (line {load.loc.line}): "
                       f"their derivatives would be lost",
                       f"pass it as zm.Duplicated({arg.name_hint}, d{arg.name_hint})")

    def _validate_views(self) -> None:
        """A differentiated array viewed in reverse mode (a reshape: its shadow is viewed
        alike) must be a kernel argument viewed at the top of the kernel, so that the shadow's
        view, made beside the primal's, reaches the whole reverse sweep; and every access to
        its memory must go through that one view (or the array itself, when not viewed), as
        the plan's analyses group accesses by the array value they name."""
        activity, top = self.activity, self.primal_func.body.block
        through: dict = {}   # origin -> {array value: first access}
        for op in self.primal_func.body.walk():
            array = accessed_array(op)
            if array is not None and activity.is_active_array(array):
                through.setdefault(array_origin(array), {}).setdefault(array, op)
            if not op.has_trait(Aliases) or not activity.is_active_array(op.operands[0]) \
                    or ADJOINT.find(op) is None:
                continue
            base, origin = op.operands[0], array_origin(op.operands[0])
            name = origin.name_hint or "an array"
            if op.parent is not top:
                self.error(op.loc, f"the reverse-mode derivative through this view of `{name}` "
                           f"needs the view taken at the top of the kernel",
                           "take the reshape once, before any if or loop, and use that view "
                           "everywhere")
            elif not isinstance(origin, BlockArgument):
                self.error(op.loc, f"the reverse-mode derivative through a view of `{name}`, "
                           f"which the kernel allocates, is not supported",
                           "index the array itself")
            elif base is not origin and ADJOINT.find(base.owner) is not None:
                self.error(op.loc, f"the reverse-mode derivative through a view of a view of "
                           f"`{name}` is not supported", "reshape the argument itself")
        for origin, arrays in through.items():
            if len(arrays) > 1:
                first, second = list(arrays.values())[:2]
                self.error(second.loc, f"`{origin.name_hint or 'an array'}` is accessed "
                           f"through two different views (or the array and a view of it, "
                           f"line {first.loc.line} and here): reverse mode follows one",
                           "take one view (e.g. x3 = x.reshape(...)) at the top of the kernel "
                           "and access the array only through it")

    # ---- forward sweep ----------------------------------------------------------------------
    def _forward_block(self, pblock, nblock, exporting: bool):
        """Clone `pblock` into `nblock`; with `exporting`, also return (key, value) pairs of
        values the reverse sweep will need that are visible only in this block."""
        exports: list = []
        terminator = None
        with self.b.at_end(nblock):
            for op in pblock.ops:
                if op.has_trait(Terminator):
                    terminator = op
                    continue
                with self.b.location(op.loc):
                    exports += self._forward_op(op, exporting)
        return exports, terminator

    def _forward_op(self, op: Operation, exporting: bool) -> list:
        fwd, plan = self.values.fwd, self.plan
        if self.memory.virtual is not None and (op.has_trait(WritesMemory) or op.results and all(
                r in fwd for r in op.results)):
            return []   # a virtual thread stores nothing; its global index is given
        if op.has_trait(Conditional) and exporting:
            return self._forward_if(op)
        if op in plan.fused:
            self._forward_fused(op)
            return []
        nested = op.parent is not self.primal_func.body.block
        if nested and _local_allocation(op):
            # made at the entry, a thread's array dominates the reverse sweep's regions too,
            # which recompute its reads (the forward sweep's copy of a branch does not)
            with self.site.at_entry():
                new = self.b.insert(op.clone(fwd))
            fwd[op.result] = new.result
            self.values.at_entry.add(op.result)
            if self.activity.is_active_array(op.result):
                self.memory.allocate(op)
            return []
        exports = []
        if op.has_trait(Loop) and not op.has_trait(CountedLoop):
            new, trips = self.values.clone_counting(op, fwd, keep=None)
            self.b.insert(new)
            self.values.record_tapes(op)
            exports.append((("trips", op), trips))
        else:
            new = op.clone(fwd)
            self.b.insert(new)
            if op.has_trait(Loop):
                self.values.record_tapes(op)
            elif op.has_trait(Aliases) and not nested:
                self.memory.view(op, fwd)
        for inner in op.walk():   # arrays allocated inside loops too (found by a held-out test)
            if inner.has_trait(Allocates) and inner.results \
                    and self.activity.is_active_array(inner.result):
                self.memory.allocate(inner)
        if exporting and nested and plan.not_recomputable(op):
            # visible only in this branch and not recomputable later: yield it out
            exports += [(old, res) for old, res in zip(op.results, new.results)
                        if isinstance(old.type, Scalar)]
        return exports if exporting else []

    def _drop_unneeded_stores(self, forward) -> None:
        """The forward sweep's plain stores to a `DuplicatedNoNeed` array that the kernel never
        reads: the caller does not want its primal values, nothing in the kernel reads them
        back, and a store's adjoint needs only the shadow. Only where the launch proved the
        arrays apart (`noalias`): else another argument could be the same memory, and read."""
        func = self.primal_func
        if not self.noalias or "dup_noneed" not in self.kinds:
            return
        read = {array_origin(accessed_array(op)) for op in func.walk()
                if op.has_trait(ReadsMemory) and accessed_array(op) is not None}
        unneeded = {self.values.fwd[arg] for arg, kind in zip(func.args, self.kinds)
                    if kind == "dup_noneed" and arg not in read}
        if not unneeded:
            return
        for top in forward:
            for op in list(top.walk()):
                if op.has_trait(WritesMemory) and not op.has_trait(ReadsMemory) \
                        and not op.has_trait(Atomic) and not op.regions \
                        and array_origin(accessed_array(op)) in unneeded:
                    op.erase()

    def _forward_fused(self, op: Operation) -> None:
        """The loop, each iteration followed by its own adjoint (`interleave`)."""
        self.memory.private.accumulators_start(op)
        new = self.b.insert(op.clone(self.values.fwd))
        self.values.record_tapes(op)
        body, nbody = op.regions[-1].block, new.regions[-1].block
        term = nbody.ops.pop()
        saved = self.site.scope
        with self.site.entered(body, nbody) as scope:
            scope.forward = True
            scope.pro = len(nbody.ops)
            self._reverse_block(body)
        self.site.scope = saved
        nbody.append(term)
        self.memory.private.accumulators_flush(op)

    def _forward_if(self, op: Operation) -> list:
        fwd = self.values.fwd
        regions = [Region(), Region()]
        branches = []
        for preg, nreg in zip(op.regions, regions):
            branches.append(self._forward_block(preg.block, nreg.block, exporting=True))
        (then_exports, then_term), (else_exports, else_term) = branches
        extra = [v.type for _, v in then_exports] + [v.type for _, v in else_exports]
        for nreg, term, own, before, after in (
                (regions[0], then_term, then_exports, [], else_exports),
                (regions[1], else_term, else_exports, then_exports, [])):
            with self.b.at_end(nreg.block), self.b.location(term.loc):
                values = [fwd.get(v, v) for v in term.operands]
                values += [self.zero(v.type) for _, v in before]
                values += [v for _, v in own]
                values += [self.zero(v.type) for _, v in after]
                self.b.create(control.Yield, *values)
        new = self.b.create(control.If, fwd.get(op.cond, op.cond),
                            result_types=[r.type for r in op.results] + extra, regions=regions)
        for old, res in zip(op.results, new.results):
            fwd[old] = res
        keys = [k for k, _ in then_exports] + [k for k, _ in else_exports]
        exports = list(zip(keys, new.results[len(op.results):]))
        if op.parent is not self.primal_func.body.block and self.plan.not_recomputable(op):
            exports += list(zip(op.results, new.results))
        return exports

    # ---- adjoints of values ---------------------------------------------------------------
    def primal(self, value: Value) -> Value:
        """`value` as the reverse sweep sees it at the current point."""
        return self.values.get(value)

    def is_active(self, value: Value) -> bool:
        return self.activity.active(value)

    def add_to(self, value: Value, cotangent: Value | None) -> None:
        if cotangent is None or not self.activity.active(value):
            return
        scope = self.site.scope
        if scope.defines(value):
            old = scope.adjoints.get(value)
            scope.adjoints[value] = cotangent if old is None else self.add(old, cotangent)
            return
        if value not in self.slots:
            self.slots[value] = self.site.local_slot(value.type, "adj")
        slot, zero = self.slots[value]
        self.b.create(memory.Store, slot, zero, self.add(
            self.b.value(memory.Load, slot, zero), cotangent))

    def take_adjoint(self, value: Value) -> Value | None:
        if not self.activity.active(value):
            return None
        adjoint = self.site.scope.adjoints.pop(value, None)
        if value in self.slots:
            slot, zero = self.slots[value]
            stored = self.b.value(memory.Load, slot, zero)
            self.b.create(memory.Store, slot, zero, self.zero(value.type))
            adjoint = stored if adjoint is None else self.add(adjoint, stored)
        return adjoint

    # ---- the reverse sweep ----------------------------------------------------------------
    def _reverse_block(self, block) -> None:
        reversed_ops = self.activity.reversed_ops
        grouped = self.memory.prefetch(block, reversed_ops)
        for op in reversed(block.ops):
            if op in reversed_ops and op not in self.plan.fused:
                rule = ADJOINT.find(op)
                if rule is None:
                    continue   # reported by _validate
                cotangents = [self.take_adjoint(r) for r in op.results]
                with self.b.location(op.loc):
                    rule(self, op, cotangents)
        self.memory.zero_grouped(grouped)   # the grouped stores' cotangents, read first

    @handles(REVERSE_IF)
    def reverse_if(self, op: Operation, cts: list) -> None:
        regions = [Region(), Region()]
        self.b.create(control.If, self.primal(op.cond), result_types=[], regions=regions)
        for preg, nreg in zip(op.regions, regions):
            with self.site.entered(preg.block, nreg.block):
                for ct, value in zip(cts, preg.block.ops[-1].operands):
                    self.add_to(value, ct)
                self._reverse_block(preg.block)
                self.b.create(control.Yield)

    @handles(REVERSE_FOR)
    def reverse_for(self, op: Operation, cts: list) -> None:
        lower, upper, step = (self.primal(v) for v in (op.lower, op.upper, op.step))
        self._reverse_loop(op, self.site.range_trips(lower, upper, step), cts, offset=1)

    @handles(REVERSE_WHILE)
    def reverse_while(self, op: Operation, cts: list) -> None:
        self._reverse_loop(op, self.values.while_trips(op), cts, offset=0)

    def _reverse_loop(self, op: Operation, trips: Value, cts: list, offset: int) -> None:
        body = op.regions[-1].block
        carried = body.args[offset:]
        active = [k for k, a in enumerate(carried) if self.activity.active(a)]
        inits = [cts[k] if cts[k] is not None else self.zero(carried[k].type) for k in active]
        own = self.memory.virtual is None
        private = self.memory.private
        if own:
            self.values.before_reverse(op)
            private.accumulators_start(op)
        frame = LoopFrame(op, offset)
        if own:
            private.tile_start(op, frame)
        fast = self._fast_condition(op, frame) if own else None
        if fast is None:
            results = self._reverse_iterations(op, trips, inits, active, frame)
        else:
            # versioned on conditions that hold for the whole loop (and the whole warp): the
            # common case's loop has no branch on them (LLVM will not unswitch a loop that
            # holds warp-synchronous operations)
            versions = [Region(), Region()]
            choice = self.b.create(control.If, fast, result_types=[v.type for v in inits],
                                   regions=versions)
            for region, assumed in zip(versions, (True, False)):
                with self.b.at_end(region.block):
                    version = LoopFrame(op, offset)
                    version.warp, version.whole, version.fast = frame.warp, frame.whole, assumed
                    self.b.create(control.Yield, *self._reverse_iterations(
                        op, trips, inits, active, version))
            results = choice.results
        self.memory.finish_batches(op)
        if own:
            private.accumulators_flush(op)
        for k, res in zip(active, results):
            self.add_to(op.inits[k], res)

    def _fast_condition(self, op: Operation, frame: LoopFrame) -> Value | None:
        """What the loop's reverse may be specialized on: its tiled read takes the tile path
        and its per-thread accumulators fit (None: nothing to specialize)."""
        conditions = self.memory.private.fits(op)
        if frame.whole is not None:
            conditions.append(frame.whole)
        fast = None
        for condition in conditions:
            fast = condition if fast is None else self.b.value(arith.BitAnd, fast, condition)
        return fast

    def _reverse_iterations(self, op: Operation, trips: Value, inits: list, active: list,
                            frame: LoopFrame) -> list:
        """The loop over the reverse iterations; its results (the carried adjoints)."""
        body = op.regions[-1].block
        carried = body.args[frame.offset:]
        region = Region()
        counter = region.block.add_arg(trips.type, "k")
        adjoints = [region.block.add_arg(carried[k].type, "d") for k in active]
        one = self.const(1, trips.type)
        loop = self.b.create(control.For, self.const(0, trips.type), trips, one, *inits,
                             result_types=[v.type for v in inits], regions=[region],
                             sweep="reverse")
        with self.site.entered(body, region.block, frame) as scope:
            frame.index = self.b.value(arith.Sub, self.b.value(arith.Sub, trips, one), counter)
            frame.counter, frame.trips = counter, trips
            scope.pro = len(region.block.ops)
            term = body.ops[-1]
            for k, adjoint in zip(active, adjoints):
                self.add_to(term.operands[k], adjoint)
            self._reverse_block(body)
            outs = [self.take_adjoint(carried[k]) for k in active]
            self.b.create(control.Yield, *[o if o is not None else self.zero(carried[k].type)
                                           for o, k in zip(outs, active)])
        return list(loop.results)

    # ---- the gather form's virtual threads --------------------------------------------------
    def _gather_sweeps(self) -> None:
        """For each offset o of a gathered read: the body and reverse sweep of virtual thread
        `p - o` (when the launch has it), keeping the cotangents of its reads with offset o,
        which reach this thread's element; then `d[p] += total` per gathered array."""
        plan_, func, memory_ = self.plan.gather, self.primal_func, self.memory
        own = dict(self.values.fwd)
        gids = {axis: own[value] for axis, value in plan_.gids.items()}
        for array in plan_.axes:
            memory_.gather_slot(array)
        for offset in plan_.distinct_offsets():
            shifted, inside = {}, None
            for axis, c in offset:
                gid = gids[axis]
                shifted[axis] = self.b.value(arith.Sub, gid, self.const(c, gid.type))
                extent = self.b.value(arith.Mul, self.b.value(thread.GridDim, axis=axis),
                                      self.b.value(thread.BlockDim, axis=axis))
                ok = self.b.value(arith.BitAnd, self.cmp(shifted[axis], self.const(0, gid.type),
                                                      "ge"),
                                  self.cmp(shifted[axis], self.cast(extent, gid.type), "lt"))
                inside = ok if inside is None else self.b.value(arith.BitAnd, inside, ok)
            then, other = Region(), Region()
            self.b.create(control.If, inside, result_types=[], regions=[then, other])
            fwd = {arg: own[arg] for arg in func.args}
            fwd.update({plan_.gids[axis]: v for axis, v in shifted.items()})
            with self._virtual_thread(offset, fwd, then.block):
                exports, _ = self._forward_block(func.body.block, then.block, exporting=True)
                self.values.exported.update(exports)
                with self.b.at_end(then.block):
                    self._reverse_block(func.body.block)
                    self.b.create(control.Yield)
            with self.b.at_end(other.block):
                self.b.create(control.Yield)
        for array, (slot, zero) in memory_.gather_slots.items():
            indices = [gids[axis] for axis in plan_.axes[array]]
            fits = None
            for k, index in enumerate(indices):
                extent = self.b.value(memory.Dim, own[array], axis=k)
                ok = self.cmp(self.cast(index, extent.type), extent, "lt")
                fits = ok if fits is None else self.b.value(arith.BitAnd, fits, ok)
            total = self.b.value(memory.Load, slot, zero)
            self.site.when(fits, lambda: self.b.create(memory.Update, memory_.shadows[array],
                                                       *indices, total))

    @contextmanager
    def _virtual_thread(self, offset, fwd: dict, block):
        """Sweeps of the virtual thread at `offset`, into `block`, with their own values."""
        values, site = self.values, self.site
        saved = (values.fwd, values.exported, self.slots, site.scope, site.top)
        values.fwd, values.exported, self.slots = fwd, {}, {}
        self.memory.virtual = offset
        site.top = site.scope = Scope(self.primal_func.body.block, block, None)
        try:
            yield
        finally:
            values.fwd, values.exported, self.slots, site.scope, site.top = saved
            self.memory.virtual = None

    # ---- structural rules: memory ---------------------------------------------------------
    @handles(REVERSE_LOAD)
    def reverse_load(self, op: Operation, cts: list) -> None:
        self.memory.load(op, cts[0])

    @handles(REVERSE_STORE)
    def reverse_store(self, op: Operation, cts: list) -> None:
        self.add_to(op.value, self.memory.store(op))

    @handles(REVERSE_ATOMIC_ADD)
    def reverse_atomic_add(self, op: Operation, cts: list) -> None:
        self.add_to(op.value, self.memory.atomic(op, sign=1))

    @handles(REVERSE_ATOMIC_SUB)
    def reverse_atomic_sub(self, op: Operation, cts: list) -> None:
        self.add_to(op.value, self.memory.atomic(op, sign=-1))

    @handles(REVERSE_VIEW)
    def reverse_view(self, op: Operation, cts: list) -> None:
        """Nothing: the view's cotangents are in the shadow's view (`MemoryAdjoints.view`),
        made in the forward sweep."""

    @handles(REVERSE_BARRIER)
    def reverse_barrier(self, op: Operation, cts: list) -> None:
        if self.memory_active:
            self.b.create(sync.Barrier)

    @handles(REVERSE_GRID_BARRIER)
    def reverse_grid_barrier(self, op: Operation, cts: list) -> None:
        if self.memory_active:
            self.b.create(sync.GridBarrier)

    def transpose_shuffle(self, op, ct, opposite, direction: int):
        """The adjoint of shfl_down (direction +1) or shfl_up (-1): the cotangent travels back
        with the opposite shuffle, and lanes whose source fell outside the warp kept their own."""
        mask, delta = self.primal(op.mask), self.primal(op.lane)
        lane = self.b.value(thread.LaneId)
        moved = self.b.value(opposite, mask, ct, delta)
        width = self.const(32, i32)
        zero = self.zero(ct.type)
        if direction > 0:
            came = self.cmp(lane, delta, "ge")
            own = self.cmp(self.add(lane, delta), width, "ge")
        else:
            came = self.cmp(self.add(lane, delta), width, "lt")
            own = self.cmp(lane, delta, "lt")
        return self.add(self.select(came, moved, zero), self.select(own, ct, zero))


class Pullback(Reverse):
    """A device function's pullback: (arguments..., one cotangent per float result) ->
    (results..., one adjoint per "active" argument). The forward sweep is the function itself,
    so once the pullback is inlined next to a call of the function, CSE shares the two."""

    def __init__(self, func, arg_kinds: list[str], seeded=None):
        returned = func.body.block.ops[-1].operands
        super().__init__(func, arg_kinds, [None] * len(arg_kinds), outputs=returned)
        floats = [k for k, v in enumerate(returned) if isinstance(v.type, Scalar)
                  and v.type.is_float]
        self.seeded = floats if seeded is None else list(seeded)

    def _validate(self) -> None:
        super()._validate()
        # the pullback runs the function's body again (its forward sweep), apart from the call
        for op in self.primal_func.body.walk():
            if op.has_trait(OrderDependent) and any(r.has_uses for r in op.results):
                self.error(op.loc, f"`{op.name}` gives a value that depends on how threads "
                           f"interleave, and the pullback of a device function runs the "
                           f"function again: it could get another value",
                           "call it in the kernel, outside the differentiated function, and "
                           "pass its value in as an argument")

    def run(self, name: str):
        self._validate()
        func = self.primal_func
        region = Region()
        block = region.block
        for arg, name_hint in zip(func.args, func.arg_names):
            self.values.fwd[arg] = block.add_arg(arg.type, name_hint)
        term = func.body.block.ops[-1]
        seeds = [(term.operands[k], block.add_arg(term.operands[k].type, f"ct{k}"))
                 for k in self.seeded]
        self.site.start(block, func.body.block)
        self._forward_sweep(func.body.block, block)
        results = [self.values.fwd[v] for v in term.operands]
        with self.b.location(term.loc):
            for value, seed in seeds:
                self.add_to(value, seed)
        self._reverse_block(func.body.block)
        with self.b.location(term.loc):
            adjoints = [self._adjoint_or_zero(arg)
                        for arg, kind in zip(func.args, self.kinds) if kind == "active"]
            self.b.create(control.Return, *results, *adjoints)
        self._raise_errors()
        ftype = FunctionType(tuple(a.type for a in block.args),
                             tuple(v.type for v in (*results, *adjoints)))
        names = tuple(a.name_hint or f"a{k}" for k, a in enumerate(block.args))
        attrs = dict(func.attrs, sym_name=name, function_type=ftype, arg_names=names)
        return control.Func([], [], attrs, [region], loc=func.loc)

    def _adjoint_or_zero(self, arg: Value) -> Value:
        adjoint = self.take_adjoint(arg)
        return self.zero(arg.type) if adjoint is None else adjoint


def pullback_function(func, arg_kinds: list[str], name: str, seeded=None):
    """The reverse-mode derivative of a device function (optimized, inlined): arguments, then
    one cotangent per float result listed in `seeded` (positions among the results; default
    all float results, the others have a zero cotangent); returns the results, then the adjoint
    of each argument whose kind is "active" (float scalars; "const" ones get none)."""
    return Pullback(func, arg_kinds, seeded).run(name)


@dataclass
class Derivative:
    """What `differentiate` makes: the derivative's module; the launch conditions its plain
    shadow updates assume (`LaunchAssumptions`); the module of a kernel to launch right after
    it with the same arguments when it gathers (`zymo.ad.gather`: it zeroes the output
    cotangents), else None; the global tapes the launch allocates and passes after the other
    arguments (`GlobalTape`); the bytes of per-thread tapes each thread keeps; and the source
    locations of the loops reversed iteration by iteration (`zymo.ad.interleave`); and
    whether the derivative's only shared memory is its block-private shadows (`private`)."""
    module: object
    assumptions: LaunchAssumptions
    consume: object
    tapes: list
    local_tape_bytes: int
    interleaved: tuple = ()
    private_shared_only: bool = False


def derivation_switches() -> tuple:
    """The environment switches that change what `differentiate` makes (a derivation cached
    under other settings is another one)."""
    return tile_refill_enabled(), loop_sum_modes(), transposed_reads(), skip_zero()


def differentiate(module, arg_kinds: list[str], extra_types: list, noalias: bool = True,
                  plain_updates: bool = True) -> Derivative:
    """The reverse-mode derivative of `module`'s kernel (optimized, inlined)."""
    from ..ir.module import Module
    reject_calls(module.kernel)
    transform = Reverse(module.kernel, arg_kinds, extra_types, noalias, plain_updates)
    func = transform.run()
    values = transform.values
    unread = [v for v, t in values.tapes.items()
              if t.trips is not None and v not in values.tapes_loaded]
    if unread:   # a global tape's stores cost memory traffic even when nothing reads them
        transform = Reverse(module.kernel, arg_kinds, extra_types, noalias, plain_updates,
                            global_filter=values.tapes_loaded)
        func = transform.run()
        values = transform.values
    plan = transform.plan
    out = Module(module.entry)
    out.add(func)
    consume = None
    if plan.gather is not None:
        consume = Module(module.entry)
        consume.add(gather.consume_function(module.kernel, func, arg_kinds, module.entry))
    tapes = [GlobalTape(t.dtype, _product(t.trips)) for t in values.global_tapes()]
    local = sum(t.size * v.type.bits // 8 for v, t in values.tapes.items()
                if t.trips is None and v in values.tapes_loaded)
    interleaved = tuple(sorted((op.loc for op in plan.fused),
                               key=lambda loc: (loc.line, loc.col)))
    private_only = plan.private is not None and not any(
        isinstance(op, memory.SharedAlloc) for op in module.kernel.body.walk())
    return Derivative(out, plan.assumptions, consume, tapes, local, interleaved,
                      private_only)


def _mark_reverse_loops(ops) -> None:
    """Give the primal loops that the reverse sweep runs again to recompute values
    `sweep="recompute"` (the loops it runs backwards have `sweep="reverse"`): a target unrolls
    them on a budget of their own, since each copy sits in a reverse loop's body beside the
    adjoints, a second or third copy of code the forward sweep has already unrolled."""
    for top in ops:
        for inner in top.walk():
            if inner.has_trait(CountedLoop) and "sweep" not in inner.attrs:
                inner.attrs["sweep"] = "recompute"


def _product(trips: tuple) -> tuple:
    total = ("const", 1)
    for t in trips:
        total = ("apply", arith.Mul, total, t)
    return total


def _local_allocation(op: Operation) -> bool:
    """A thread's own array (not a constant table, which is remade where needed)."""
    return op.has_trait(Allocates) and not op.has_trait(Pure) and len(op.results) == 1 \
        and isinstance(op.result.type, Array) and op.result.type.space == "local"
