"""The reverse transform: a kernel's derivative as one new kernel, on the structured IR.

The derivative kernel runs the primal kernel (the forward sweep) and then the reverse sweep,
which visits the ops that carry derivatives in reverse order and applies each op's adjoint rule
(`ADJOINT` in `zymo/ops`). Structure makes the reversal local:

- an `if` reverses to an `if` on the same condition; a loop to a `range` loop over its trip
  count, run backwards (a `while` counts its trips in the forward sweep);
- adjoints of values defined and used in one block are SSA values; an adjoint accumulated from
  inside a nested region goes to a one-element local slot, which LLVM turns into registers;
- a primal value the reverse sweep needs is taken from the forward sweep where it is visible
  (top level, or yielded out of an `if`: loads of memory written later are exported that way),
  else recomputed at the start of the reverse region that needs it: pure ops and loads of memory
  not written later are cloned; a loop's induction variable and integer counters of the form
  `i += c` follow from the iteration number; other loop-carried values are replayed from the
  loop's start along their slice. What cannot be recomputed is a compile error naming the line.
- reads accumulate into shadows with plain adds where each thread owns its elements, warp-
  aggregated atomics where the address is uniform, atomics otherwise; stores read and zero the
  shadow; barriers reverse to barriers; shared and local arrays get shadows zeroed at entry.
"""
from __future__ import annotations

import contextlib
from contextlib import contextmanager
from dataclasses import dataclass

from ..diagnostics import CompileError, Diagnostic, Loc
from ..ir.builder import Builder
from ..ir.operation import Operation, Region
from ..ir.traits import (Allocates, Atomic, Barrier, Conditional, ConstantLike, CountedLoop, Loop,
                         OrderDependent, Pure, ReadsMemory, Terminator, WritesMemory)
from ..ir.types import Array, FunctionType, Scalar, i32, u32
from ..ir.values import BlockArgument, Value
from ..ops import arith, atomic, control, memory, sync, thread, warp
from ..ops.registry import ADJOINT
from ..ops.structural import (REVERSE_ATOMIC_ADD, REVERSE_ATOMIC_SUB, REVERSE_BARRIER,
                              REVERSE_FOR, REVERSE_IF, REVERSE_LOAD, REVERSE_MODE, REVERSE_STORE,
                              REVERSE_WHILE, handles, transform)
from ..passes.common import loop_step
from .activity import ActivityAnalysis, accessed_array, lost_derivatives
from . import gather, interleave, private
from .emit import Emitter
from .private import PrivateShadows
from .tape import GlobalTape, LocalTapes
from ..passes.indexing import IndexForms, LaunchAssumptions, uniform


MAX_BATCHED = 64   # loop trips whose shadow updates are batched (per-thread arrays of this size)


class Scope:
    """A primal block being reversed into `rev`; recomputed values go to its prologue."""

    def __init__(self, block, rev, parent: "Scope | None", loop: "LoopFrame | None" = None):
        self.block, self.rev, self.parent, self.loop = block, rev, parent, loop
        self.pro = 0
        self.forward = False       # reversed inside the forward sweep: its values are there
        self.values: dict = {}     # primal value (or ("trips", op)) -> value usable in rev
        self.adjoints: dict = {}   # primal value -> cotangent accumulated so far (SSA)


class LoopFrame:
    def __init__(self, op: Operation, offset: int):
        self.op = op
        self.offset = offset       # body arguments before the carried values (1: the iv)
        self.index: Value | None = None   # forward iteration number of this reverse iteration
        self.counter: Value | None = None  # reverse iteration number, and the trip count
        self.trips: Value | None = None
        self.warp = self.whole = None      # the tile path's (`PrivateShadows._tile_start`)
        self.fast = False          # this copy of the loop runs where the tile path is taken
                                   # and the accumulators fit (`Reverse._fast_condition`)


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


@transform(REVERSE_MODE)
class Reverse(Emitter, PrivateShadows, LocalTapes):
    def __init__(self, func, arg_kinds: list[str], extra_types: list, noalias: bool = True,
                 plain_updates: bool = True, outputs=(), global_filter=None):
        self.global_filter = global_filter
        self.primal_func = func
        self.kinds = list(arg_kinds)
        self.extra_types = list(extra_types)
        self.noalias = noalias
        self.activity = ActivityAnalysis(func, self.kinds, outputs=outputs)
        self.forms = IndexForms(func)
        self.b = Builder()
        self.errors: list[Diagnostic] = []
        self.fwd: dict = {}          # primal value -> forward-sweep value
        self.exported: dict = {}     # primal value or ("trips", op) -> top-level forward value
        self.shadows: dict = {}      # primal array -> shadow array
        self.adjoint_outs: dict = {}
        self.slots: dict = {}
        self.top_index = {op: k for k, op in enumerate(func.body.block.ops)}
        self.writes = self._writes()
        self.batched: dict = {}      # read or store -> static trips of its batched loop
        self.read_modes, self.assumptions = self._read_modes(plain_updates)
        self._batch_stores(plain_updates, self._loaded_arrays())
        self.batches: dict = {}      # read or store -> its Batch, while its loop reverses
        self.store_groups = self._store_groups(plain_updates)
        self.preloaded: dict = {}    # grouped store -> (its cotangent, its indices)
        self.memory_active = bool(self.activity.arrays)
        self.scope: Scope | None = None
        self.gather = self._gather_plan() if plain_updates else None
        if self.gather is not None:   # neighbours read the output cotangents: no zeroing here
            self.store_groups = set()
        # loops reversed iteration by iteration inside the forward sweep (`interleave`)
        self.fused = interleave.plan(func, self.activity.reversed_ops, self._array_class,
                                    self.batched) \
            if self.gather is None and self.noalias and func.attrs.get("kind") == "kernel" \
            else set()
        self.tapes = self._plan_tapes()
        self.private = private.plan(func, self.activity, self.read_modes, self.writes) \
            if plain_updates else None
        loads: dict = {}
        for op in self.read_modes:
            loads.setdefault(op.array, []).append(op)
        self.accumulators = private.plan_accumulators(func, self.forms, self.read_modes,
                                                      self.writes, loads)
        self.tiled = private.plan_tile(func, self.forms, self.read_modes, self.private)
        if self.private is not None:
            self.assumptions = self.assumptions.combine(
                LaunchAssumptions(budgets=frozenset({private.budget(self.private)})))
        self.virtual = None          # the offset of the virtual thread being reversed (gather)
        self.gather_slots: dict = {}

    # ---- the whole function -----------------------------------------------------------------
    def run(self):
        self._validate()
        func = self.primal_func
        region = Region()
        block = region.block
        names: list[str] = []
        for arg, kind, name, extra in zip(func.args, self.kinds, func.arg_names,
                                          self.extra_types):
            self.fwd[arg] = block.add_arg(arg.type, name)
            names.append(name)
            if kind in ("dup", "dup_noneed"):
                self.shadows[arg] = block.add_arg(extra, "d" + name)
                names.append("d" + name)
            elif kind == "active":
                self.adjoint_outs[arg] = block.add_arg(extra, "d" + name)
                names.append("d" + name)
        for k, tape in enumerate(self.global_tapes()):   # allocated by the launch
            tape.array = block.add_arg(Array(tape.dtype, 1, "global", "C"), f"tape{k}")
            names.append(f"tape{k}")
        self.block = block
        self.entry = 0
        self.top = Scope(func.body.block, block, None)
        self.b.block, self.b.index = block, None
        if self.private is not None and self.fused:   # the forward sweep accumulates too
            self._private_start()
        exports, _ = self._forward_block(func.body.block, block, exporting=True)
        self.exported.update(exports)
        self.scope = self.top
        self.b.block, self.b.index = block, None
        if self.private is not None and not self.fused:
            self._private_start()
        self._reverse_block(func.body.block)
        for arg, out in self.adjoint_outs.items():
            adjoint = self.take_adjoint(arg)
            if adjoint is not None:
                self._block_sum_into(out, adjoint)
        if self.gather is not None:
            with self.b.location(func.loc):
                self._gather_sweeps()
        if self.private is not None:
            self._private_flush()
        with self.b.location(func.body.block.ops[-1].loc):
            self.b.create(control.Return)
        if self.errors:
            raise CompileError(sorted(set(self.errors), key=lambda d: (d.loc.line, d.loc.col)))
        ftype = FunctionType(tuple(a.type for a in block.args), ())
        return control.Func([], [], dict(sym_name=func.sym_name, function_type=ftype,
                                         kind="kernel", arg_names=tuple(names)), [region],
                            loc=func.loc, id=func.id)

    def error(self, loc: Loc, message: str, hint: str = "") -> None:
        self.errors.append(Diagnostic(loc, message, hint))

    # ---- what cannot be differentiated, all at once --------------------------------------
    def _validate(self) -> None:
        activity = self.activity
        for op in self.primal_func.body.walk():
            if op in activity.reversed_ops and not op.regions and ADJOINT.find(op) is None:
                reason = ADJOINT.absence_reason(type(op))
                self.error(op.loc, f"cannot differentiate `{op.name}`" +
                           (f": {reason}" if reason else ""),
                           "compute it from values that carry no derivative, or restructure")
            if op.has_trait(Atomic) and any(activity.active(r) and r.has_uses
                                            for r in op.results):
                self.error(op.loc, "the old value returned by an atomic on differentiated data "
                           "cannot be differentiated", "do not use the atomic's result")
        for store, load, arg in lost_derivatives(self.primal_func, self.kinds, activity):
            self.error(store.loc, f"array `{arg.name_hint}` is Const but stores values that "
                       f"depend on active inputs and is read back (line {load.loc.line}): "
                       f"their derivatives would be lost",
                       f"pass it as zm.Duplicated({arg.name_hint}, d{arg.name_hint})")

    # ---- memory facts ---------------------------------------------------------------------
    def _array_class(self, array: Value):
        if not self.noalias and isinstance(array, BlockArgument):
            return "arguments"   # arguments may overlap: one class
        return array

    def _writes(self) -> dict:
        writes: dict = {}
        for op in self.primal_func.body.walk():
            array = accessed_array(op)
            if array is not None and op.has_trait(WritesMemory):
                writes.setdefault(self._array_class(array), []).append(op)
        return writes

    def _top(self, op: Operation) -> int:
        while op.parent is not self.primal_func.body.block:
            op = op.parent_op
        return self.top_index[op]

    def safe_load(self, op: Operation) -> bool:
        """No write to the loaded array can follow this load (so reading it again later in
        the reverse sweep gives the same value)."""
        writes = self.writes.get(self._array_class(op.array), ())
        here = self._top(op)
        return all(self._top(w) < here for w in writes) and self._racing_update(op) is None

    def _racing_update(self, op: Operation) -> Operation | None:
        """An update of the array `op` reads whose effect on the read depends on how threads
        interleave (an atomic: other threads' atomics may land after this thread's read, in
        any order), so reading it again need not give the value the forward sweep saw."""
        for write in self.writes.get(self._array_class(op.array), ()):
            if write.has_trait(OrderDependent):
                return write
        return None

    def _read_modes(self, plain_updates: bool):
        """How each read's adjoint updates the shadow ("plain", "uniform" or "atomic"), and
        the launch conditions the plain ones assume (thread axes used, wrap-around bounds)."""
        modes: dict = {}
        assumed = LaunchAssumptions()
        loads: dict = {}
        for op in self.primal_func.body.walk():
            array = accessed_array(op)
            if array is None or op.has_trait(WritesMemory) or not op.results:
                continue
            if self.activity.is_active_array(array) and self.activity.active(op.result):
                loads.setdefault(array, []).append(op)
        for array, ops in loads.items():
            forms = [tuple(self.forms.form(i) for i in op.indices) for op in ops]
            space = array.type.space
            owned = None
            if space == "local" or plain_updates and len(set(forms)) == 1:
                owned = self.forms.ownership(list(ops[0].indices), space)
            if owned is not None:
                trips = self._batched_trips(array, ops) if space == "global" else None
                for op in ops:
                    modes[op] = "batched" if trips else "plain"
                    if trips:
                        self.batched[op] = trips
                if space != "local":
                    assumed = assumed.combine(LaunchAssumptions.owning(owned))
                continue
            for op, form in zip(ops, forms):
                modes[op] = "uniform" if uniform(list(form)) else "atomic"
        return modes, assumed

    def _gather_plan(self):
        found = gather.plan(self.primal_func, self.activity, self.forms, self.writes)
        if found is None:
            return None
        stores = [op for op in self.primal_func.body.walk() if op.has_trait(WritesMemory)
                  and self.activity.is_active_array(accessed_array(op))]
        assumed = gather.launch_assumptions(found, stores, self.forms)
        if assumed is None:
            return None
        self.assumptions = self.assumptions.combine(assumed)
        for op in found.offsets:
            self.read_modes[op] = "gather"
        self.batched = {op: t for op, t in self.batched.items() if op not in found.offsets}
        return found

    def _store_groups(self, plain_updates: bool) -> set:
        """Stores whose cotangents are all read when their block's reversal starts and zeroed
        when it ends (a read then a zero of one address wait for each other, and a read after
        a store the compiler cannot prove distinct waits too): several stores, in one block
        outside loops, of an array nothing reads and nothing else writes, at elements each
        thread owns and that differ by a constant index (out[e, 0], out[e, 1], ...)."""
        grouped: set = set()
        if not plain_updates:
            return grouped
        loaded = self._loaded_arrays()
        for array, ops in self.writes.items():
            if array == "arguments" or array in loaded or len(ops) < 2 \
                    or array.type.space != "global" or not self.activity.is_active_array(array):
                continue
            if len({op.parent for op in ops}) != 1 or any(
                    op.has_trait(ReadsMemory) or op.has_trait(Atomic) or _in_loop(op)
                    for op in ops):
                continue
            if not all(_distinct(a, b) for k, a in enumerate(ops) for b in ops[k + 1:]):
                continue
            owned = [self.forms.ownership(list(op.indices), "global") for op in ops]
            if None in owned:
                continue
            for found in owned:
                self.assumptions = self.assumptions.combine(LaunchAssumptions.owning(found))
            grouped.update(ops)
        return grouped

    def _loaded_arrays(self) -> set:
        return {self._array_class(accessed_array(op)) for op in self.primal_func.body.walk()
                if accessed_array(op) is not None and op.has_trait(ReadsMemory)}

    def _batched_trips(self, array: Value, ops: list) -> int | None:
        """The static trip count of the loop over which the plain updates of `array`'s single
        read can be batched (see `_loop_trips`); nothing else may touch the shadow (the
        array is never written)."""
        if len(ops) != 1 or self.writes.get(self._array_class(array)):
            return None
        return _loop_trips(ops[0])

    def _batch_stores(self, plain_updates: bool, loaded: set) -> None:
        """Batch the adjoints of stores (`Batch`) that sit in a loop as `_loop_trips` requires,
        write an array nothing reads and no other store writes, at an index each thread owns."""
        if not plain_updates:
            return
        for array, ops in self.writes.items():
            if array == "arguments" or array in loaded or len(ops) != 1 \
                    or array.type.space != "global" or not self.activity.is_active_array(array):
                continue
            op = ops[0]
            plain_store = not op.has_trait(ReadsMemory) and not op.has_trait(Atomic)
            trips = _loop_trips(op) if plain_store else None
            owned = self.forms.ownership(list(op.indices), "global") if trips else None
            if owned is None:
                continue
            self.batched[op] = trips
            self.assumptions = self.assumptions.combine(LaunchAssumptions.owning(owned))

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
        if self.virtual is not None and (op.has_trait(WritesMemory) or op.results and all(
                r in self.fwd for r in op.results)):
            return []   # a virtual thread stores nothing; its global index is given
        if op.has_trait(Conditional) and exporting:
            return self._forward_if(op)
        if op in self.fused:
            self._forward_fused(op)
            return []
        nested = op.parent is not self.primal_func.body.block
        exports = []
        if op.has_trait(Loop) and not op.has_trait(CountedLoop):
            new, trips = self._clone_counting(op, self.fwd, keep=None)
            self.b.insert(new)
            exports.append((("trips", op), trips))
        else:
            new = op.clone(self.fwd)
            self.b.insert(new)
            if op.has_trait(Loop):
                self._record_tapes(op)
        for inner in op.walk():   # arrays allocated inside loops too (found by a held-out test)
            if inner.has_trait(Allocates) and inner.results \
                    and self.activity.is_active_array(inner.result):
                self._shadow_allocation(inner)
        if exporting and nested and self._not_recomputable(op):
            # visible only in this branch and not recomputable later: yield it out
            exports += [(old, res) for old, res in zip(op.results, new.results)
                        if isinstance(old.type, Scalar)]
        return exports if exporting else []

    def _forward_fused(self, op: Operation) -> None:
        """The loop, each iteration followed by its own adjoint (`interleave`)."""
        self._accumulators_start(op)
        new = self.b.insert(op.clone(self.fwd))
        self._record_tapes(op)
        body, nbody = op.regions[-1].block, new.regions[-1].block
        term = nbody.ops.pop()
        saved = self.scope
        with self._entered(body, nbody) as scope:
            scope.forward = True
            scope.pro = len(nbody.ops)
            self._reverse_block(body)
        self.scope = saved
        nbody.append(term)
        self._accumulators_flush(op)

    def _forward_if(self, op: Operation) -> list:
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
                values = [self.fwd.get(v, v) for v in term.operands]
                values += [self.zero(v.type) for _, v in before]
                values += [v for _, v in own]
                values += [self.zero(v.type) for _, v in after]
                self.b.create(control.Yield, *values)
        new = self.b.create(control.If, self.fwd.get(op.cond, op.cond),
                            result_types=[r.type for r in op.results] + extra, regions=regions)
        for old, res in zip(op.results, new.results):
            self.fwd[old] = res
        keys = [k for k, _ in then_exports] + [k for k, _ in else_exports]
        exports = list(zip(keys, new.results[len(op.results):]))
        if op.parent is not self.primal_func.body.block and self._not_recomputable(op):
            exports += list(zip(op.results, new.results))
        return exports

    def _clone_counting(self, op: Operation, mapping: dict, keep):
        """A copy of a while loop that also counts its trips (an extra i32 carried value);
        `keep` (carried indices, body ops) restricts the copy to a slice."""
        carried = range(len(op.inits)) if keep is None else keep[0]
        body_ops = None if keep is None else set(keep[1])
        mapping = dict(mapping) if keep is not None else mapping
        zero = self.const(0, i32)
        inits = [mapping.get(op.inits[k], op.inits[k]) for k in carried] + [zero]
        before, body = Region(), Region()
        for region, old in ((before, op.regions[0].block), (body, op.regions[1].block)):
            for k in carried:
                mapping[old.args[k]] = region.block.add_arg(old.args[k].type,
                                                            old.args[k].name_hint)
            count = region.block.add_arg(i32, "trips")
            with self.b.at_end(region.block):
                for inner in old.ops[:-1]:
                    if body_ops is None:
                        self.b.insert(inner.clone(mapping))
                    elif region is before or inner in body_ops:   # a slice: no stores
                        self.b.insert(_without_writes(inner.clone(mapping)))
                term = old.ops[-1]
                with self.b.location(term.loc):
                    if region is before:
                        self.b.create(control.Condition, mapping.get(term.cond, term.cond))
                    else:
                        values = [mapping.get(term.operands[k], term.operands[k])
                                  for k in carried]
                        self.b.create(control.Yield, *values,
                                      self.b.value(arith.Add, count, self.const(1, i32)))
        new = control.While(inits, [v.type for v in inits], {}, [before, body], loc=op.loc,
                            id=op.id)
        for k, res in zip(carried, new.results):
            mapping[op.results[k]] = res
        return new, new.results[-1]

    def _shadow_allocation(self, op: Operation) -> None:
        shared = op.result.type.space == "shared"
        if shared and op.parent is not self.primal_func.body.block:
            self.error(op.loc, "a differentiated shared array must be allocated at the top of "
                       "the kernel, outside if and loops (its shadow is zeroed there)")
            return
        # a local array is one per thread wherever it is allocated (its storage is made at
        # function entry), so its shadow is made and zeroed at entry
        shadow = op.clone({})
        shadow.results[0].name_hint = "d" + (op.result.name_hint or "array")
        with (contextlib.nullcontext() if shared else self._at_entry()):
            self.b.insert(shadow)
            self._zero_shadow(shadow.result, shared)
        self.shadows[op.result] = shadow.result

    def _zero_shadow(self, array: Value, shared: bool) -> None:
        shape = array.type.shape or ()
        count = 1
        for extent in shape:
            count *= extent
        if shared:
            start, stride = self._linear_thread()
        else:
            start, stride = self.const(0, i32), self.const(1, i32)
        region = Region()
        k = region.block.add_arg(i32, "k")
        with self.b.at_end(region.block):
            indices, rest = [], k
            for extent in reversed(shape[1:]):
                e = self.const(extent, i32)
                indices.append(self.b.value(arith.Mod, rest, e))
                rest = self.b.value(arith.FloorDiv, rest, e)
            indices.append(rest)
            self.b.create(memory.Store, array, *reversed(indices), self.zero(array.type.dtype))
            self.b.create(control.Yield)
        self.b.create(control.For, start, self.const(count, i32), stride, result_types=[],
                      regions=[region])
        if shared:
            self.b.create(sync.Barrier)

    def _block_sum_into(self, out: Value, value: Value) -> None:
        """out[0] += the sum of `value` over the block: every thread reaches the kernel's end,
        so a shuffle tree per warp, per-warp partials in shared memory behind a barrier, and
        one atomic per block. Blocks whose size is not a multiple of 32 use one atomic per
        thread (their last warp is partial, which full-warp shuffles do not allow)."""
        zero = self.const(0, i32)
        linear, count = self._linear_thread()
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
            self._when(first, lambda: self.b.create(memory.Store, partials, warp_index, total))
            self.b.create(sync.Barrier)
            warps = self.b.value(arith.FloorDiv, count, self.const(32, i32))

            def leader_warp():
                mine = self.b.value(arith.Min, lane, self.b.value(arith.Sub, warps, self.const(
                    1, i32)))
                part = self.select(self.cmp(lane, warps, "lt"),
                                   self.b.value(memory.Load, partials, mine),
                                   self.zero(value.type))
                block_total = warp_sum(part)
                self._when(first, lambda: self.b.create(atomic.AtomicAdd, out, zero,
                                                        block_total))

            self._when(self.cmp(linear, self.const(32, i32), "lt"), leader_warp)
            self.b.create(control.Yield)
        with self.b.at_end(other.block):
            self.b.create(atomic.AtomicAdd, out, zero, value)
            self.b.create(control.Yield)

    def _when(self, cond: Value, body) -> None:
        then, other = Region(), Region()
        self.b.create(control.If, cond, result_types=[], regions=[then, other])
        with self.b.at_end(then.block):
            body()
            self.b.create(control.Yield)
        with self.b.at_end(other.block):
            self.b.create(control.Yield)

    def _linear_thread(self):
        tid = [self.b.value(thread.ThreadIdx, axis=a) for a in "xyz"]
        ntid = [self.b.value(thread.BlockDim, axis=a) for a in "xyz"]
        linear = self.b.value(arith.Add, tid[0], self.b.value(arith.Mul, ntid[0], self.b.value(
            arith.Add, tid[1], self.b.value(arith.Mul, ntid[1], tid[2]))))
        count = self.b.value(arith.Mul, ntid[0], self.b.value(arith.Mul, ntid[1], ntid[2]))
        return linear, count

    # ---- scopes -------------------------------------------------------------------------------
    @contextmanager
    def _entered(self, block, rev, loop: LoopFrame | None = None):
        scope = Scope(block, rev, self.scope, loop)
        saved = self.scope
        self.scope = scope
        try:
            with self.b.at_end(rev):
                yield scope
        finally:
            self.scope = saved

    @contextmanager
    def _prologue(self, scope: Scope):
        saved = (self.b.block, self.b.index)
        self.b.block, self.b.index = scope.rev, scope.pro
        try:
            yield
        finally:
            scope.pro = self.b.index
            self.b.block, self.b.index = saved

    @contextmanager
    def _at_entry(self):
        saved = (self.b.block, self.b.index)
        self.b.block, self.b.index = self.block, self.entry
        try:
            yield
        finally:
            self.entry = self.b.index
            self.b.block, self.b.index = saved
            if self.top.rev is self.block:
                self.top.pro = self.entry

    @staticmethod
    def _defines(scope: Scope, value: Value) -> bool:
        if isinstance(value, BlockArgument):
            return value.block is scope.block
        return value.owner.parent is scope.block

    # ---- primal values in the reverse sweep -----------------------------------------------
    def primal(self, value: Value) -> Value:
        """`value` as the reverse sweep sees it at the current point."""
        scope = self.scope
        while scope is not None:
            if value in scope.values:
                return scope.values[value]
            if scope is self.top or self._defines(scope, value):
                break
            scope = scope.parent
        if value in self.exported:
            return self.exported[value]
        if scope is self.top or scope is None or scope.forward:
            return self.fwd[value]
        return self._recompute(scope, value)

    def _recompute(self, scope: Scope, value: Value) -> Value:
        if value in self.tapes:
            loaded = self._from_tape(scope, value)
            if loaded is not None:
                return loaded
        if isinstance(value, BlockArgument):
            return self._reconstruct(scope, value)
        op = value.owner
        problem = self._not_recomputable(op)
        if problem:
            self.error(op.loc, f"the reverse sweep needs this value again but {problem}",
                       self._order_hint(op, "caching values inside loops is not supported yet: "
                                        "compute it from values that are not overwritten, or "
                                        "move it out of the loop"))
            return self.zero(value.type) if isinstance(value.type, Scalar) else value
        mapping = {v: self.primal(v) for v in _free_values(op)}
        with self._prologue(scope):
            new = op.clone(mapping)
            self.b.insert(new)
        for old, res in zip(op.results, new.results):
            scope.values[old] = res
        return scope.values[value]

    def _not_recomputable(self, op: Operation, drop_writes: bool = False) -> str:
        """Why `op` cannot run again in the reverse sweep ("" if it can). With `drop_writes`,
        writes whose results nothing uses are fine: the copy leaves them out (`_without_writes`):
        a loop's slice that recomputes a carried value need not redo the loop's stores."""
        for inner in op.walk():
            if inner.has_trait(Terminator):
                continue
            if inner.has_trait(Allocates) and not inner.has_trait(Pure):   # const: remade
                return "it is an array allocation"
            if drop_writes and _droppable_write(inner):
                continue
            if inner.has_trait(OrderDependent) and any(r.has_uses for r in inner.results):
                return (f"`{inner.name}` (line {inner.loc.line}) gives a value that depends on "
                        f"how threads interleave: run again it may give another one")
            if inner.has_trait(WritesMemory) or inner.has_trait(Barrier):
                return f"its computation at line {inner.loc.line} writes memory"
            array = accessed_array(inner) if inner.has_trait(ReadsMemory) else None
            if array is not None and self._racing_update(inner) is not None:
                update = self._racing_update(inner)
                return (f"it reads `{array.name_hint or 'an array'}` (line {inner.loc.line}), "
                        f"which atomics update (line {update.loc.line}): read again it may "
                        f"hold other threads' updates")
            if array is not None and not self.safe_load(inner):
                name = array.name_hint or "an array"
                return f"it reads `{name}` (line {inner.loc.line}), which is written later"
        return ""

    def _order_hint(self, op: Operation, fallback: str) -> str:
        """What to write instead when `op`'s computation cannot run again: for an
        order-dependent value, how to let the derivative keep it."""
        if not any(inner.has_trait(OrderDependent) or inner.has_trait(ReadsMemory)
                   and accessed_array(inner) is not None and self._racing_update(inner)
                   for inner in op.walk()):
            return fallback
        return ("the derivative keeps such a value on a tape only in loops whose trip counts "
                "the launch can compute (range over constants, scalar arguments and array "
                "extents, not values read from memory): write the loop that way, or take the "
                "atomic (or activemask) out of the loop")

    def _reconstruct(self, scope: Scope, arg: BlockArgument) -> Value:
        frame = scope.loop
        if frame is None:
            raise AssertionError("block argument outside a loop scope")
        op, body = frame.op, frame.op.regions[-1].block
        if frame.offset and arg.index == 0:   # the induction variable of a range loop
            lower, step = self.primal(op.lower), self.primal(op.step)
            with self._prologue(scope):
                value = self.b.value(arith.Add, lower, self.b.value(
                    arith.Mul, self.cast(frame.index, arg.type), step))
            scope.values[arg] = value
            return value
        k = arg.index - frame.offset
        step = loop_step(op, arg, body.ops[-1].operands[k])
        if step is not None:
            init, c = self.primal(op.inits[k]), self.primal(step)
            with self._prologue(scope):
                value = self.b.value(arith.Add, init, self.b.value(
                    arith.Mul, self.cast(frame.index, arg.type), c))
            scope.values[arg] = value
            return value
        return self._replay(scope, frame, k)

    def _replay(self, scope: Scope, frame: LoopFrame, k: int) -> Value:
        """Carried value k at this iteration, by running its slice of the loop from the start
        (or, for the iterations a bounded tape kept, loaded from it)."""
        op, body = frame.op, frame.op.regions[-1].block
        tape = self.tapes.get(body.args[frame.offset + k])
        carried, ops = _carried_slice(op, {k}, frame.offset)
        for inner in ops:
            problem = self._not_recomputable(inner, drop_writes=True)
            if problem:
                self.error(inner.loc, f"the reverse sweep needs the loop's values again but "
                           f"{problem}", self._order_hint(
                               inner, "caching loop values is not supported yet"))
                return self.zero(body.args[frame.offset + k].type)
        inits = [self.primal(op.inits[j]) for j in carried]
        outer = {}
        for inner in ops:
            for v in _free_values(inner):
                if not _inside(v, op):
                    outer[v] = self.primal(v)
        for v in _yielded_from_outside(op, carried):
            outer[v] = self.primal(v)
        lower_step = (self.primal(op.lower), self.primal(op.step)) if frame.offset else None
        region = Region()
        t = region.block.add_arg(frame.index.type, "t")
        mapping = dict(outer)
        for j in carried:
            old = body.args[frame.offset + j]
            mapping[old] = region.block.add_arg(old.type, old.name_hint)
        def replay():
            with self.b.at_end(region.block):
                if lower_step:
                    iv = body.args[0]
                    mapping[iv] = self.b.value(arith.Add, lower_step[0], self.b.value(
                        arith.Mul, self.cast(t, iv.type), lower_step[1]))
                for inner in ops:
                    self.b.insert(_without_writes(inner.clone(mapping)))
                term = body.ops[-1]
                self.b.create(control.Yield, *[mapping.get(term.operands[j], term.operands[j])
                                               for j in carried])
            zero, one = self.const(0, frame.index.type), self.const(1, frame.index.type)
            return self.b.create(control.For, zero, frame.index, one, *inits,
                                 result_types=[v.type for v in inits], regions=[region])

        arg = body.args[frame.offset + k]
        with self._prologue(scope):
            if tape is not None and tape.bounded and tape.array is not None:
                slot = self.cast(frame.index, i32)
                kept = self.cmp(slot, self.const(tape.size, i32), "lt")
                taped, replayed = Region(), Region()
                choice = self.b.create(control.If, kept, result_types=[arg.type],
                                       regions=[taped, replayed])
                with self.b.at_end(taped.block):
                    self.b.create(control.Yield, self.b.value(memory.Load, tape.array, slot))
                with self.b.at_end(replayed.block):
                    loop = replay()
                    self.b.create(control.Yield, loop.results[carried.index(k)])
                scope.values[arg] = choice.results[0]
                self.tapes_loaded.add(arg)
                return choice.results[0]
            loop = replay()
        for j, res in zip(carried, loop.results):
            scope.values[body.args[frame.offset + j]] = res
        return scope.values[arg]

    def _while_trips(self, op: Operation) -> Value:
        key = ("trips", op)
        scope = self.scope
        while scope is not None:
            if key in scope.values:
                return scope.values[key]
            if scope is self.top or op.parent is scope.block:
                break
            scope = scope.parent
        if key in self.exported:
            return self.exported[key]
        before = op.regions[0].block
        needed = {a.index for a in before.args if a.has_uses}
        carried, ops = _carried_slice(op, needed, 0)
        for inner in ops + before.ops[:-1]:
            problem = self._not_recomputable(inner, drop_writes=True)
            if problem:
                self.error(inner.loc, f"the reverse sweep needs this loop's trip count but "
                           f"{problem}", self._order_hint(
                               inner, "caching loop values is not supported yet"))
                return self.const(0, i32)
        mapping = {}
        for inner in ops + before.ops[:-1]:
            for v in _free_values(inner):
                if not _inside(v, op):
                    mapping[v] = self.primal(v)
        for v in _yielded_from_outside(op, carried):
            mapping[v] = self.primal(v)
        for j in carried:
            mapping[op.inits[j]] = self.primal(op.inits[j])
        with self._prologue(scope):
            new, trips = self._clone_counting(op, mapping, keep=(carried, ops))
            self.b.insert(new)
        scope.values[key] = trips
        return trips

    # ---- adjoints -------------------------------------------------------------------------
    def is_active(self, value: Value) -> bool:
        return self.activity.active(value)

    def add_to(self, value: Value, cotangent: Value | None) -> None:
        if cotangent is None or not self.activity.active(value):
            return
        scope = self.scope
        if self._defines(scope, value):
            old = scope.adjoints.get(value)
            scope.adjoints[value] = cotangent if old is None else self.add(old, cotangent)
            return
        slot, zero = self._slot(value)
        self.b.create(memory.Store, slot, zero, self.add(
            self.b.value(memory.Load, slot, zero), cotangent))

    def take_adjoint(self, value: Value) -> Value | None:
        if not self.activity.active(value):
            return None
        adjoint = self.scope.adjoints.pop(value, None)
        if value in self.slots:
            slot, zero = self.slots[value]
            stored = self.b.value(memory.Load, slot, zero)
            self.b.create(memory.Store, slot, zero, self.zero(value.type))
            adjoint = stored if adjoint is None else self.add(adjoint, stored)
        return adjoint

    def _slot(self, value: Value):
        if value not in self.slots:
            with self._at_entry():
                slot = self.b.value(memory.LocalAlloc, shape=(1,), dtype=value.type)
                slot.name_hint = "adj"
                zero = self.const(0, i32)
                self.b.create(memory.Store, slot, zero, self.zero(value.type))
            self.slots[value] = (slot, zero)
        return self.slots[value]

    # ---- the reverse sweep ----------------------------------------------------------------
    def _reverse_block(self, block) -> None:
        # batched accesses of every loop of this block load their elements up front, so the
        # loads of all the block's loops overlap too
        for op in block.ops:
            if op.has_trait(CountedLoop) and op in self.activity.reversed_ops \
                    and op not in self.fused:
                for inner in op.regions[-1].block.ops:
                    if inner in self.batched and inner in self.activity.reversed_ops:
                        self.batches[inner] = self._prefetch(op, inner)
        # stores of one array at distinct elements in this block: all cotangents read first
        grouped = [op for op in block.ops if op in self.store_groups
                   and op in self.activity.reversed_ops]
        for op in grouped:
            with self.b.location(op.loc):
                indices = [self.primal(i) for i in op.indices]
                shadow = self.shadows[op.array]
                self.preloaded[op] = (self.b.value(memory.Load, shadow, *indices), indices)
        for op in reversed(block.ops):
            if op in self.activity.reversed_ops and op not in self.fused:
                rule = ADJOINT.find(op)
                if rule is None:
                    continue   # reported by _validate
                cotangents = [self.take_adjoint(r) for r in op.results]
                with self.b.location(op.loc):
                    rule(self, op, cotangents)
        for op in grouped:   # ... and zeroed after
            _, indices = self.preloaded.pop(op)
            with self.b.location(op.loc):
                self.b.create(memory.Store, self.shadows[op.array], *indices,
                              self.zero(op.value.type))

    @handles(REVERSE_IF)
    def reverse_if(self, op: Operation, cts: list) -> None:
        regions = [Region(), Region()]
        self.b.create(control.If, self.primal(op.cond), result_types=[], regions=regions)
        for preg, nreg in zip(op.regions, regions):
            with self._entered(preg.block, nreg.block):
                for ct, value in zip(cts, preg.block.ops[-1].operands):
                    self.add_to(value, ct)
                self._reverse_block(preg.block)
                self.b.create(control.Yield)

    @handles(REVERSE_FOR)
    def reverse_for(self, op: Operation, cts: list) -> None:
        lower, upper, step = (self.primal(v) for v in (op.lower, op.upper, op.step))
        # Python range: max(0, ceil((upper - lower) / step)), as -((lower - upper) // step)
        trips = self.b.value(arith.Max, self.const(0, lower.type), self.b.value(
            arith.Neg, self.b.value(arith.FloorDiv, self.b.value(arith.Sub, lower, upper), step)))
        self._reverse_loop(op, trips, cts, offset=1)

    @handles(REVERSE_WHILE)
    def reverse_while(self, op: Operation, cts: list) -> None:
        self._reverse_loop(op, self._while_trips(op), cts, offset=0)

    def _reverse_loop(self, op: Operation, trips: Value, cts: list, offset: int) -> None:
        body = op.regions[-1].block
        carried = body.args[offset:]
        active = [k for k, a in enumerate(carried) if self.activity.active(a)]
        inits = [cts[k] if cts[k] is not None else self.zero(carried[k].type) for k in active]
        if self.virtual is None:
            self._accumulators_start(op)
        frame = LoopFrame(op, offset)
        if self.virtual is None:
            self._tile_start(op, frame)
        fast = self._fast_condition(op, frame)
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
        for inner in body.ops:
            if inner in self.batches:
                self._batch_loop(self.batches.pop(inner))
        if self.virtual is None:
            self._accumulators_flush(op)
        for k, res in zip(active, results):
            self.add_to(op.inits[k], res)

    def _fast_condition(self, op: Operation, frame: LoopFrame) -> Value | None:
        """What the loop's reverse may be specialized on: its tiled read takes the tile path
        and its per-thread accumulators fit (None: nothing to specialize)."""
        if self.virtual is not None:
            return None
        conditions = [acc.fits for acc in self.accumulators.values()
                      if acc.loop is op and acc.fits is not None]
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
                             result_types=[v.type for v in inits], regions=[region])
        with self._entered(body, region.block, frame) as scope:
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

    def _gather_slot(self, array: Value):
        if array not in self.gather_slots:
            with self._at_entry():
                slot = self.b.value(memory.LocalAlloc, shape=(1,), dtype=array.type.dtype)
                slot.name_hint = "gathered"
                zero = self.const(0, i32)
                self.b.create(memory.Store, slot, zero, self.zero(array.type.dtype))
            self.gather_slots[array] = (slot, zero)
        return self.gather_slots[array]

    def _gather_sweeps(self) -> None:
        """For each offset o of a gathered read: the body and reverse sweep of virtual thread
        `p - o` (when the launch has it), keeping the cotangents of its reads with offset o,
        which reach this thread's element; then `d[p] += total` per gathered array."""
        plan_, func = self.gather, self.primal_func
        own = dict(self.fwd)
        gids = {axis: own[value] for axis, value in plan_.gids.items()}
        for array in plan_.axes:
            self._gather_slot(array)
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
            saved = (self.fwd, self.exported, self.slots, self.scope, self.top)
            self.fwd = {arg: own[arg] for arg in func.args}
            self.fwd.update({plan_.gids[axis]: v for axis, v in shifted.items()})
            self.exported, self.slots, self.virtual = {}, {}, offset
            self.top = self.scope = Scope(func.body.block, then.block, None)
            exports, _ = self._forward_block(func.body.block, then.block, exporting=True)
            self.exported.update(exports)
            with self.b.at_end(then.block):
                self._reverse_block(func.body.block)
                self.b.create(control.Yield)
            with self.b.at_end(other.block):
                self.b.create(control.Yield)
            self.fwd, self.exported, self.slots, self.scope, self.top = saved
            self.virtual = None
        for array, (slot, zero) in self.gather_slots.items():
            indices = [gids[axis] for axis in plan_.axes[array]]
            fits = None
            for k, index in enumerate(indices):
                extent = self.b.value(memory.Dim, own[array], axis=k)
                ok = self.cmp(self.cast(index, extent.type), extent, "lt")
                fits = ok if fits is None else self.b.value(arith.BitAnd, fits, ok)
            total = self.b.value(memory.Load, slot, zero)
            self._when(fits, lambda: self.b.create(memory.Update, self.shadows[array],
                                                    *indices, total))

    def _shadow_access(self, op: Operation):
        shadow = self.shadows.get(op.array)
        if shadow is None:
            return None, []
        return shadow, [self.primal(i) for i in op.indices]

    @handles(REVERSE_LOAD)
    def reverse_load(self, op: Operation, cts: list) -> None:
        ct = cts[0]
        shadow, indices = self._shadow_access(op) if ct is not None else (None, [])
        if shadow is None:
            return
        mode = self.read_modes.get(op, "atomic")
        if mode == "gather":
            if self.gather.offsets[op] == (self.virtual or self.gather.zero):
                slot, zero = self._gather_slot(op.array)
                self.b.create(memory.Store, slot, zero, self.add(
                    self.b.value(memory.Load, slot, zero), ct))
        elif self.virtual is not None:
            return   # a virtual thread only yields the cotangents of gathered reads
        elif mode == "batched":
            self.b.create(memory.Store, self.batches[op].cotangents, self.scope.loop.index, ct)
        elif mode == "plain" and op in self.accumulators:
            self._accumulate(op, shadow, indices, ct)
        elif mode == "plain":
            self.b.create(memory.Update, shadow, *indices, ct, chained=_in_loop(op))
        elif mode == "uniform" and self.private is not None \
                and op.array in self.private.offsets:
            self._private_accumulate(op, indices, ct)
        elif mode == "uniform":
            self.b.create(atomic.Accumulate, shadow, *indices, ct)
        else:
            self.b.create(atomic.AtomicAdd, shadow, *indices, ct)

    def _prefetch(self, loop: Operation, op: Operation) -> Batch:
        """The loop that loads, before `loop` reverses, the shadow elements batched `op` will
        touch (its indices recomputed as the reverse sweep recomputes values)."""
        trips = self.batched[op]
        shadow = self.shadows[op.array]
        reads = bool(op.results)
        dtype = op.result.type if reads else op.value.type
        types = [dtype, *(i.type for i in op.indices)] + ([dtype] if reads else [])
        with self._at_entry():
            arrays = [self.b.value(memory.LocalAlloc, shape=(trips,), dtype=t) for t in types]
        batch = Batch(op, shadow, trips, arrays[0], arrays[1:1 + len(op.indices)],
                      arrays[-1] if reads else None)
        region = Region()
        t = region.block.add_arg(i32, "t")
        self.b.create(control.For, self.const(0, i32), self.const(trips, i32),
                      self.const(1, i32), result_types=[], regions=[region])
        frame = LoopFrame(loop, 1)
        with self._entered(loop.regions[-1].block, region.block, frame) as scope:
            frame.index = t
            scope.pro = 0
            indices = [self.primal(i) for i in op.indices]
            values = [self.b.value(memory.Load, shadow, *indices), *indices]
            if reads:
                values.append(self.zero(dtype))   # iterations that add nothing
            for array, value in zip(arrays, values):
                self.b.create(memory.Store, array, t, value)
            self.b.create(control.Yield)
        return batch

    def _batch_loop(self, batch: Batch) -> None:
        """After the loop reversed: a read's sums stored, a store's shadow zeroed."""
        zero, one = self.const(0, i32), self.const(1, i32)
        region = Region()
        t = region.block.add_arg(i32, "t")
        dtype = batch.loaded.type.dtype
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

    @handles(REVERSE_STORE)
    def reverse_store(self, op: Operation, cts: list) -> None:
        if op in self.batches:
            adjoint = self.b.value(memory.Load, self.batches[op].loaded, self.scope.loop.index)
            self.add_to(op.value, adjoint)
            return
        if op in self.preloaded:
            self.add_to(op.value, self.preloaded[op][0])
            return
        shadow, indices = self._shadow_access(op)
        if shadow is None:
            return
        adjoint = self.b.value(memory.Load, shadow, *indices)
        if self.gather is None:   # else neighbours read it too: the consuming kernel zeroes it
            self.b.create(memory.Store, shadow, *indices, self.zero(op.value.type))
        self.add_to(op.value, adjoint)

    @handles(REVERSE_ATOMIC_ADD)
    def reverse_atomic_add(self, op: Operation, cts: list, sign: int = 1) -> None:
        shadow, indices = self._shadow_access(op)
        if shadow is None or not self.activity.active(op.value):
            return
        adjoint = self.b.value(memory.Load, shadow, *indices)
        self.add_to(op.value, adjoint if sign > 0 else self.neg(adjoint))

    @handles(REVERSE_ATOMIC_SUB)
    def reverse_atomic_sub(self, op: Operation, cts: list) -> None:
        self.reverse_atomic_add(op, cts, sign=-1)

    @handles(REVERSE_BARRIER)
    def reverse_barrier(self, op: Operation, cts: list) -> None:
        if self.memory_active:
            self.b.create(sync.Barrier)

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
            self.fwd[arg] = block.add_arg(arg.type, name_hint)
        term = func.body.block.ops[-1]
        seeds = [(term.operands[k], block.add_arg(term.operands[k].type, f"ct{k}"))
                 for k in self.seeded]
        self.block, self.entry = block, 0
        self.top = Scope(func.body.block, block, None)
        self.b.block, self.b.index = block, None
        exports, _ = self._forward_block(func.body.block, block, exporting=True)
        self.exported.update(exports)
        self.scope = self.top
        self.b.block, self.b.index = block, None
        results = [self.fwd[v] for v in term.operands]
        with self.b.location(term.loc):
            for value, seed in seeds:
                self.add_to(value, seed)
        self._reverse_block(func.body.block)
        with self.b.location(term.loc):
            adjoints = [self._adjoint_or_zero(arg)
                        for arg, kind in zip(func.args, self.kinds) if kind == "active"]
            self.b.create(control.Return, *results, *adjoints)
        if self.errors:
            raise CompileError(sorted(set(self.errors), key=lambda d: (d.loc.line, d.loc.col)))
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


def _distinct(a: Operation, b: Operation) -> bool:
    """Whether two accesses provably reach different elements: one index is a different
    constant in each."""
    for x, y in zip(a.indices, b.indices):
        cx = None if isinstance(x, BlockArgument) or not x.owner.has_trait(ConstantLike) \
            else x.owner.value
        cy = None if isinstance(y, BlockArgument) or not y.owner.has_trait(ConstantLike) \
            else y.owner.value
        if cx is not None and cy is not None and cx != cy:
            return True
    return False


def _in_loop(op: Operation) -> bool:
    return any(a.has_trait(Loop) for a in op.ancestors())


def _loop_trips(op: Operation) -> int | None:
    """The trip count of the loop `op` sits in directly, when it is a counted loop with
    constant bounds of at most MAX_BATCHED trips whose variable is one of `op`'s indices (so
    each iteration reaches another element)."""
    loop = op.parent.parent_op
    if loop is None or not loop.has_trait(CountedLoop) \
            or loop.regions[-1].block.args[0] not in list(op.indices):
        return None
    bounds = [v.owner.value if not isinstance(v, BlockArgument)
              and v.owner.has_trait(ConstantLike) else None
              for v in (loop.lower, loop.upper, loop.step)]
    if None in bounds or bounds[2] <= 0:
        return None
    trips = max(0, -((bounds[0] - bounds[1]) // bounds[2]))
    return trips if 0 < trips <= MAX_BATCHED else None


def _inside(value: Value, op: Operation) -> bool:
    """Whether `value` is defined inside `op`'s regions."""
    block = value.block if isinstance(value, BlockArgument) else value.owner.parent
    while block is not None:
        owner = block.parent_op
        if owner is op:
            return True
        if owner is None:
            return False
        block = owner.parent
    return False


def _free_values(op: Operation) -> list[Value]:
    """Values `op` (and the ops in its regions) use that are defined outside it."""
    free: list[Value] = []
    seen = set()
    for inner in op.walk():
        for v in inner.operands:
            if v not in seen and (inner is op or not _inside(v, op)):
                seen.add(v)
                free.append(v)
    return free


def _droppable_write(op: Operation) -> bool:
    """A write no other op reads the result of (a store; an atomic whose old value is unused)."""
    return (op.has_trait(WritesMemory) and not op.has_trait(Barrier) and not op.regions
            and not any(r.has_uses for r in op.results))


def _without_writes(op: Operation) -> Operation:
    """`op` (a fresh copy) less the droppable writes nested in it."""
    for inner in reversed(list(op.walk())):
        if inner is not op and _droppable_write(inner):
            inner.erase()
    return op


def _yielded_from_outside(op: Operation, carried) -> list:
    """The values defined outside loop `op` that its body yields as carried values `carried`
    (a carried value folded to a constant, or hoisted): a slice of the loop copies no op for
    them, so the copy's yield must use their reverse-sweep values."""
    term = op.regions[-1].block.ops[-1]
    values = (term.operands[j] for j in carried)
    return [v for v in values if not _inside(v, op)]


def _carried_slice(op: Operation, start: set, offset: int):
    """The carried indices and the body ops needed to compute carried values `start`."""
    body = op.regions[-1].block
    term = body.ops[-1]
    carried = set(start)
    needed: set = set()
    work = [term.operands[k] for k in start]
    while work:
        value = work.pop()
        if isinstance(value, BlockArgument) and value.block is body:
            k = value.index - offset
            if k >= 0 and k not in carried:
                carried.add(k)
                work.append(term.operands[k])
            continue
        if not _inside(value, op):
            continue
        top = value.owner if not isinstance(value, BlockArgument) else value.block.parent_op
        while top.parent is not body:
            top = top.parent_op
        if top not in needed:
            needed.add(top)
            work.extend(_free_values(top))
    return sorted(carried), [o for o in body.ops if o in needed]


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


def differentiate(module, arg_kinds: list[str], extra_types: list, noalias: bool = True,
                  plain_updates: bool = True) -> Derivative:
    """The reverse-mode derivative of `module`'s kernel (optimized, inlined)."""
    from ..ir.module import Module
    transform = Reverse(module.kernel, arg_kinds, extra_types, noalias, plain_updates)
    func = transform.run()
    unread = [v for v, t in transform.tapes.items()
              if t.trips is not None and v not in transform.tapes_loaded]
    if unread:   # a global tape's stores cost memory traffic even when nothing reads them
        transform = Reverse(module.kernel, arg_kinds, extra_types, noalias, plain_updates,
                            global_filter=transform.tapes_loaded)
        func = transform.run()
    out = Module(module.entry)
    out.add(func)
    consume = None
    if transform.gather is not None:
        consume = Module(module.entry)
        consume.add(gather.consume_function(module.kernel, func, arg_kinds, module.entry))
    tapes = [GlobalTape(t.dtype, _product(t.trips)) for t in transform.global_tapes()]
    local = sum(t.size * v.type.bits // 8 for v, t in transform.tapes.items()
                if t.trips is None and v in transform.tapes_loaded)
    interleaved = tuple(sorted((op.loc for op in transform.fused),
                               key=lambda loc: (loc.line, loc.col)))
    private_only = transform.private is not None and not any(
        isinstance(op, memory.SharedAlloc) for op in module.kernel.body.walk())
    return Derivative(out, transform.assumptions, consume, tapes, local, interleaved,
                      private_only)


def _product(trips: tuple) -> tuple:
    total = ("const", 1)
    for t in trips:
        total = ("apply", arith.Mul, total, t)
    return total
