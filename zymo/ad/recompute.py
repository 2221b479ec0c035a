"""Primal values in the reverse sweep: taken from the forward sweep where visible, else
recomputed, reconstructed from the iteration number, replayed along a loop's slice, or loaded
from a tape (`tape.py` says which values get one).

A value the reverse sweep needs is visible when the forward sweep defined it at the top level or
exported it (yielded out of an `if`); otherwise it is made again at the start of the reverse
region that needs it: pure ops and loads of memory not written later are cloned, a loop's
induction variable and counters `i += c` follow from the iteration number, other carried values
are replayed from the loop's start. What cannot be had is a compile error naming the line."""
from __future__ import annotations

from ..ir.operation import Operation, Region
from ..ir.traits import ReadsMemory, WritesMemory
from ..ir.types import Scalar, i32, i64
from ..ir.values import BlockArgument, Value
from ..ops import arith, control, memory, sync, thread
from ..passes.common import is_inside, loop_step
from .activity import accessed_array
from .emit import Emitter
from .plan import AccessPlan, droppable_write
from .site import LoopFrame, Scope, Site
from .tape import LoopTape, iteration_variable, keep_hint, plan_tapes


class PrimalValues(Emitter):
    """`fwd`: primal value -> its forward-sweep copy; `exported`: values (and ("trips", op) of
    while loops) the forward sweep made visible at the top level; `tapes`: value -> LoopTape."""

    def __init__(self, plan: AccessPlan, site: Site, error, global_filter: set | None = None):
        self.plan, self.site, self.b, self.error = plan, site, site.b, error
        self.fwd: dict = {}
        self.exported: dict = {}
        self.tapes = plan_tapes(plan, global_filter)
        self.tapes_loaded: set = set()
        self.threads = None        # a global tape's (thread's linear index, thread count)
        self.at_entry: set = set()  # local arrays the forward sweep made at the entry

    def get(self, value: Value) -> Value:
        """`value` as the reverse sweep sees it at the current point."""
        if value in self.at_entry:
            return self.fwd[value]
        block = value.block if isinstance(value, BlockArgument) else value.owner.parent
        found, scope = self._lookup(value, block)
        if found is not None:
            return found
        if scope is self.site.top or scope is None or scope.forward:
            return self.fwd[value]
        return self._recompute(scope, value)

    def _lookup(self, key, block):
        """What `key` (a primal value, or ("trips", op)) defined in primal `block` already is
        where the reverse sweep is, or None; and the scope to make it in."""
        scope = self.site.scope
        while scope is not None:
            if key in scope.values:
                return scope.values[key], scope
            if scope is self.site.top or scope.block is block:
                break
            scope = scope.parent
        return self.exported.get(key), scope

    def _recompute(self, scope: Scope, value: Value) -> Value:
        if value in self.tapes:
            loaded = self._from_tape(scope, value)
            if loaded is not None:
                return loaded
        if isinstance(value, BlockArgument):
            return self._reconstruct(scope, value)
        op = value.owner
        problem = self.plan.not_recomputable(op)
        if problem:
            self.error(op.loc, f"the reverse sweep needs this value again but {problem}",
                       self.plan.order_hint(op, keep_hint(op) or "compute it from values that "
                                            "are not overwritten"))
            return self.zero(value.type) if isinstance(value.type, Scalar) else value
        self._refill([op])
        mapping = {v: self.get(v) for v in _free_values(op)}
        with self.site.prologue(scope):
            new = op.clone(mapping)
            self.b.insert(new)
        for old, res in zip(op.results, new.results):
            scope.values[old] = res
        return scope.values[value]

    def _reconstruct(self, scope: Scope, arg: BlockArgument) -> Value:
        frame = scope.loop
        if frame is None:
            raise AssertionError("block argument outside a loop scope")
        op, body = frame.op, frame.op.regions[-1].block
        if frame.offset and arg.index == 0:   # the induction variable of a range loop
            start, step = self.get(op.lower), self.get(op.step)
        else:
            k = arg.index - frame.offset
            step = loop_step(op, arg, body.ops[-1].operands[k])
            if step is None:
                return self._replay(scope, frame, k)
            start, step = self.get(op.inits[k]), self.get(step)
        with self.site.prologue(scope):
            value = self.b.value(arith.Add, start, self.b.value(
                arith.Mul, self.cast(frame.index, arg.type), step))
        scope.values[arg] = value
        return value

    def _unrecomputable(self, ops: list, what: str, tapes_would_do: bool = True) -> bool:
        """Report the first of `ops` that cannot run again (writes dropped); with
        `tapes_would_do`, the hint says how the loop's values could go on a tape."""
        for inner in ops:
            problem = self.plan.not_recomputable(inner, drop_writes=True)
            if problem:
                hint = keep_hint(inner) if tapes_would_do else None
                self.error(inner.loc, f"the reverse sweep needs {what} but {problem}",
                           self.plan.order_hint(inner, hint or "compute it from values that "
                                                "are not overwritten"))
                return True
        return False

    def _outside(self, op: Operation, ops: list, carried: list) -> dict:
        """The reverse sweep's values of what the slice `ops` of loop `op` uses from outside."""
        mapping = {}
        for inner in ops:
            for v in _free_values(inner):
                if not is_inside(v, op):
                    mapping[v] = self.get(v)
        for v in _yielded_from_outside(op, carried):
            mapping[v] = self.get(v)
        return mapping

    def _replay(self, scope: Scope, frame: LoopFrame, k: int) -> Value:
        """Carried value k at this iteration, by running its slice of the loop from the start
        (or, for the iterations a bounded tape kept, loaded from it)."""
        op, body = frame.op, frame.op.regions[-1].block
        tape = self.tapes.get(body.args[frame.offset + k])
        carried, ops = _carried_slice(op, {k}, frame.offset)
        if self._unrecomputable(ops, "the loop's values again") or self._refill(ops, op):
            return self.zero(body.args[frame.offset + k].type)
        inits = [self.get(op.inits[j]) for j in carried]
        mapping = self._outside(op, ops, carried)
        lower_step = (self.get(op.lower), self.get(op.step)) if frame.offset else None
        region = Region()
        t = region.block.add_arg(frame.index.type, "t")
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
                    self.b.insert(without_writes(inner.clone(mapping)))
                term = body.ops[-1]
                self.b.create(control.Yield, *[mapping.get(term.operands[j], term.operands[j])
                                               for j in carried])
            zero, one = self.const(0, frame.index.type), self.const(1, frame.index.type)
            return self.b.create(control.For, zero, frame.index, one, *inits,
                                 result_types=[v.type for v in inits], regions=[region])

        arg = body.args[frame.offset + k]
        with self.site.prologue(scope):
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

    def _refill(self, ops: list, replayed: Operation | None = None) -> bool:
        """Before `ops` are made again: the fill of each per-iteration scratch array they read
        (`refill`), once per reverse iteration of its loop. A slice of loop `replayed` that
        runs the fill's loop again cannot have it (the slice leaves out stores): reported,
        True."""
        for op in ops:
            for inner in op.walk():
                array = accessed_array(inner) if inner.has_trait(ReadsMemory) else None
                fill = self.plan.fills.get(array) if array is not None else None
                if fill is None:
                    continue
                if replayed is not None and (fill.loop is replayed
                                             or replayed in fill.loop.ancestors()):
                    self.error(inner.loc, f"the reverse sweep needs the loop's values again but "
                               f"they read `{array.name_hint or 'an array'}`, which each "
                               f"iteration fills again", keep_hint(inner) or "")
                    return True
                self._run_fill(array, fill)
        return False

    def _run_fill(self, array: Value, fill) -> None:
        scope = self.site.scope
        while scope is not None and (scope.loop is None or scope.loop.op is not fill.loop):
            scope = scope.parent
        if scope is None or ("refilled", array) in scope.values:
            return   # outside the loop's reversal the forward sweep's contents are current
        scope.values[("refilled", array)] = True
        if fill.stores:
            self._refill_tiles(scope, array, fill)
            return
        for op in fill.ops:
            for inner in op.walk():
                if inner.regions or inner.has_trait(WritesMemory) \
                        and accessed_array(inner) is array:
                    continue
                problem = self.plan.not_recomputable(inner)
                if problem:
                    self.error(inner.loc, f"the reverse sweep fills "
                               f"`{array.name_hint or 'an array'}` again but {problem}",
                               "compute what the fill stores from values that are not "
                               "overwritten")
                    return
            mapping = {v: self.get(v) for v in _free_values(op)}
            with self.site.prologue(scope):
                self.b.insert(op.clone(mapping))

    def _refill_tiles(self, scope: Scope, array: Value, fill) -> None:
        """A shared tile's fill run again at the start of the reverse iteration, with the
        tiles the same ops fill (one barrier for them all): the slice of the fill's ops that
        computes their stores, and a barrier before the reads (`refill.plan_shared`)."""
        fills = {a: f for a, f in self.plan.fills.items() if f.stores and f.loop is fill.loop
                 and set(f.ops) & set(fill.ops)}
        for other in fills:
            scope.values[("refilled", other)] = True
        tops = sorted({op for f in fills.values() for op in f.ops},
                      key=fill.loop.regions[-1].block.ops.index)
        needed = _slice(tops, [s for f in fills.values() for s in f.stores])
        # in program order: what is recomputed first (and named first) must not depend on
        # how a set of ops happens to iterate in this process
        needed_in_order = [inner for top in tops for inner in top.walk() if inner in needed]
        kept = {s for f in fills.values() for s in f.stores}
        for inner in needed_in_order:
            problem = "" if inner in kept or inner.regions else \
                self.plan.not_recomputable(inner)
            if problem:
                self.error(inner.loc, f"the reverse sweep fills shared array "
                           f"`{array.name_hint or 'an array'}` again but {problem}",
                           "compute what the tile stores from values that are not overwritten, "
                           "or set ZYMO_AD_TILE_REFILL=0")
                return
        free = []
        for inner in needed_in_order:
            free += [v for v in inner.operands if not any(is_inside(v, top) for top in tops)]
        mapping = {v: self.get(v) for v in dict.fromkeys(free)}
        with self.site.prologue(scope):
            for top in tops:
                copy = top.clone(mapping)
                for old, new in reversed(list(zip(top.walk(), copy.walk()))):
                    if old not in needed and new is not copy:
                        new.erase()
                self.b.insert(copy)
            self.b.create(sync.Barrier)

    def before_reverse(self, loop: Operation) -> None:
        """Before `loop` reverses: a barrier where its reverse iterations fill shared tiles
        again, so the first refill waits for the forward sweep's last reads of them."""
        if any(f.stores and f.loop is loop for f in self.plan.fills.values()):
            with self.b.location(loop.loc):
                self.b.create(sync.Barrier)

    def while_trips(self, op: Operation) -> Value:
        """The trip count of while loop `op`: exported by the forward sweep, else counted by a
        slice of the loop run again."""
        key = ("trips", op)
        found, scope = self._lookup(key, op.parent)
        if found is not None:
            return found
        before = op.regions[0].block
        needed = {a.index for a in before.args if a.has_uses}
        carried, ops = _carried_slice(op, needed, 0)
        if self._unrecomputable(ops + before.ops[:-1], "this loop's trip count", False) \
                or self._refill(ops + before.ops[:-1], op):
            return self.const(0, i32)
        mapping = self._outside(op, ops + before.ops[:-1], carried)
        for j in carried:
            mapping[op.inits[j]] = self.get(op.inits[j])
        with self.site.prologue(scope):
            new, trips = self.clone_counting(op, mapping, keep=(carried, ops))
            self.b.insert(new)
        scope.values[key] = trips
        return trips

    def clone_counting(self, op: Operation, mapping: dict, keep):
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
                        self.b.insert(without_writes(inner.clone(mapping)))
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

    # ---- tapes --------------------------------------------------------------------------
    def global_tapes(self) -> list:
        return [t for t in self.tapes.values() if t.trips is not None]

    def record_tapes(self, loop: Operation) -> None:
        """After the forward sweep cloned `loop`: store each taped value inside it."""
        for value, tape in self.tapes.items():
            if not tape.nest or tape.nest[0] is not loop and loop not in tape.nest[0].ancestors():
                continue
            if tape.array is None and tape.trips is None:
                with self.site.at_entry():
                    tape.array = self.b.value(memory.LocalAlloc, shape=(max(tape.size, 1),),
                                              dtype=value.type)
                    tape.array.name_hint = "tape"
            copy = self.fwd[value]
            if isinstance(copy, BlockArgument):
                block, index = copy.block, 0
            else:
                block = copy.owner.parent
                index = block.ops.index(copy.owner) + 1
            with self.site.at(block, index):   # right after the value
                self._store_on_tape(value, tape, copy)

    def _store_on_tape(self, value: Value, tape: LoopTape, copy: Value) -> None:
        indices = []
        for nested, (lower, step, _) in zip(tape.nest, tape.bounds):
            iv = self.fwd[iteration_variable(nested)]
            start = self.fwd[lower] if isinstance(lower, Value) else self.const(lower, iv.type)
            indices.append(self.b.value(arith.FloorDiv, self.b.value(
                arith.Sub, iv, start), self.const(step, iv.type)))
        slot = self._tape_element(indices, tape)
        if tape.bounded:
            kept = self.cmp(slot, self.const(tape.size, i32), "lt")
            self.site.when(kept, lambda: self.b.create(memory.Store, tape.array, slot, copy))
        else:
            self.b.create(memory.Store, tape.array, slot, copy)

    def _from_tape(self, scope, value: Value) -> Value | None:
        tape = self.tapes[value]
        if tape.bounded:
            return None
        indices, current = {}, scope
        while current is not None:
            if current.loop is not None and current.loop.op in tape.nest:
                indices.setdefault(current.loop.op, current.loop.index)
            current = current.parent
        if tape.array is None or len(indices) != len(tape.nest):
            return None
        with self.site.prologue(scope):
            loaded = self.b.value(memory.Load, tape.array, self._tape_element(
                [indices[op] for op in tape.nest], tape))
        scope.values[value] = loaded
        self.tapes_loaded.add(value)
        return loaded

    def _tape_element(self, indices: list, tape: LoopTape) -> Value:
        """The tape element of these iteration numbers: per-thread tapes by iteration; global
        ones [slot][thread], the slot's stride the launch's thread count."""
        if tape.trips is None:
            linear, stride = None, 1
            for index, (_, _, trips) in reversed(list(zip(indices, tape.bounds))):
                term = self.b.value(arith.Mul, self.cast(index, i32), self.const(stride, i32))
                linear = term if linear is None else self.b.value(arith.Add, linear, term)
                stride *= trips
            return linear
        if tape.strides is None:
            with self.site.at_entry():
                trips = [self._emit_host(t) for t in tape.trips]
                strides, stride = [], self.const(1, i64)
                for t in reversed(trips):
                    strides.append(stride)
                    stride = self.b.value(arith.Mul, stride, t)
                tape.strides = list(reversed(strides))
                if self.threads is None:
                    self.threads = self._global_thread()
        slot = None
        for index, stride in zip(indices, tape.strides):
            term = self.b.value(arith.Mul, self.cast(index, i64), stride)
            slot = term if slot is None else self.b.value(arith.Add, slot, term)
        linear, count = self.threads
        return self.b.value(arith.Add, self.b.value(arith.Mul, slot, count), linear)

    def _global_thread(self):
        """(this thread's linear index in the launch, the launch's thread count), i64."""
        linear, count = None, None
        for axis in "xyz":
            extent = self.b.value(arith.Mul, self.cast(self.b.value(thread.GridDim, axis=axis),
                                                       i64),
                                  self.cast(self.b.value(thread.BlockDim, axis=axis), i64))
            gid = self.b.value(arith.Add, self.b.value(arith.Mul, self.cast(
                self.b.value(thread.BlockIdx, axis=axis), i64), self.cast(
                self.b.value(thread.BlockDim, axis=axis), i64)), self.cast(
                self.b.value(thread.ThreadIdx, axis=axis), i64))
            if linear is None:
                linear, count = gid, extent
            else:
                linear = self.b.value(arith.Add, linear, self.b.value(arith.Mul, gid, count))
                count = self.b.value(arith.Mul, count, extent)
        return linear, count

    def _emit_host(self, expr: tuple) -> Value:
        """A host expression computed in the kernel from its arguments (i64)."""
        args = self.plan.func.args
        kind = expr[0]
        if kind == "const":
            return self.const(expr[1], i64)
        if kind == "arg":
            return self.cast(self.fwd[args[expr[1]]], i64)
        if kind == "dim":
            return self.cast(self.b.value(memory.Dim, self.fwd[args[expr[1]]], axis=expr[2]),
                             i64)
        return self.b.value(expr[1], *(self._emit_host(e) for e in expr[2:]))


def _free_values(op: Operation) -> list[Value]:
    """Values `op` (and the ops in its regions) use that are defined outside it."""
    free: list[Value] = []
    seen = set()
    for inner in op.walk():
        for v in inner.operands:
            if v not in seen and (inner is op or not is_inside(v, op)):
                seen.add(v)
                free.append(v)
    return free


def without_writes(op: Operation) -> Operation:
    """`op` (a fresh copy) less the droppable writes nested in it."""
    for inner in reversed(list(op.walk())):
        if inner is not op and droppable_write(inner):
            inner.erase()
    return op


def _yielded_from_outside(op: Operation, carried) -> list:
    """The values defined outside loop `op` that its body yields as carried values `carried`
    (a carried value folded to a constant, or hoisted): a slice of the loop copies no op for
    them, so the copy's yield must use their reverse-sweep values."""
    term = op.regions[-1].block.ops[-1]
    values = (term.operands[j] for j in carried)
    return [v for v in values if not is_inside(v, op)]


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
        if not is_inside(value, op):
            continue
        top = value.owner if not isinstance(value, BlockArgument) else value.block.parent_op
        while top.parent is not body:
            top = top.parent_op
        if top not in needed:
            needed.add(top)
            work.extend(_free_values(top))
    return sorted(carried), [o for o in body.ops if o in needed]


def _slice(tops: list, stores: list) -> set:
    """The ops within `tops` (and `tops` themselves, as far as they hold them) that `stores`
    need: the stores, what computes their operands there, the loops around them with their
    bounds and yields."""
    needed: set = set()
    work = list(stores)
    inside = lambda op: any(op is top or top in op.ancestors() for top in tops)  # noqa: E731
    while work:
        op = work.pop()
        if op is None or op in needed or not inside(op):
            continue
        needed.add(op)
        work.append(op.parent_op)
        for region in op.regions:
            work.append(region.block.ops[-1])
        for value in op.operands:
            work.append(value.block.parent_op if isinstance(value, BlockArgument)
                        else value.owner)
    return needed
