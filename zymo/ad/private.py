"""Block-private shadows for arrays every thread reads (the weights of a dense layer).

A read whose address is the same in all threads accumulates its cotangent with a warp-level
reduction and one global atomic per warp (`atomic.accumulate`). Inside a loop over the weights
that is one contended atomic per warp and weight: 8192 warps adding into each of W's 1024
elements. Here each block instead keeps a copy of the shadow in shared memory (zeroed at the
start of the reverse sweep), accumulates into it (warp-aggregated, so one shared atomic per warp
and weight), and adds it into the global shadow once at the end: one atomic per block and
element. As in histogram privatization; Enzyme's shared-memory shadows do the same for arrays
that live in shared memory.

Applies to global arrays whose every differentiated read has a uniform address and that the
kernel never writes, of one element type, when their elements fit in `CAPACITY_BYTES` (checked
at launch: the sizes are the arguments' shapes).
"""
from __future__ import annotations

from ..ir.operation import Region
from ..ir.types import bool_, i32
from ..ir.traits import Barrier, ConstantLike
from ..ir.values import BlockArgument, Value
from ..ops.views import array_origin
from ..ops import arith, atomic, control, memory, sync, warp
from ..switches import switch
from .emit import Emitter

CAPACITY_BYTES = 16 * 1024


def skip_zero() -> bool:
    """Whether atomic shadow updates are made only where the cotangent is not zero."""
    return switch("ZYMO_AD_SKIP_ZERO", True)


class Privatized:
    """The plan of a block-private copy of some shadows: one shared array of `capacity`
    elements, each shadow at an offset (`PrivateCopies` makes it)."""

    def __init__(self, arrays: list[Value], dtype):
        self.arrays, self.dtype = arrays, dtype
        self.capacity = CAPACITY_BYTES // (dtype.bits // 8)


def plan(func, activity, read_modes: dict, writes: dict) -> Privatized | None:
    reads: dict = {}
    for op, mode in read_modes.items():
        reads.setdefault(op.array, []).append(mode)
    arrays = [a for a, modes in reads.items()
              if set(modes) == {"uniform"} and isinstance(a, BlockArgument)
              and a.block is func.body.block and a.type.space == "global"
              and activity.is_active_array(a) and a not in writes and "arguments" not in writes]
    dtypes = {a.type.dtype for a in arrays}
    if not arrays or len(dtypes) != 1 or dtypes.pop().bits not in (32, 64):
        return None
    return Privatized(arrays, arrays[0].type.dtype)


def budget(private: Privatized) -> tuple:
    """The launch condition: ((("dim", arg, axis), ...) per array, capacity in elements)."""
    shapes = tuple(tuple(("dim", a.index, k) for k in range(a.type.ndim))
                   for a in private.arrays)
    return (shapes, private.capacity)


class PrivateCopies(Emitter):
    """Shadow updates made in private copies first: the block-private shared copy (`plan`),
    its tile (`plan_tile`) and the per-thread accumulators (`plan_accumulators`). `values`
    gives the reverse sweep's primal values (`PrimalValues`), `shadows` the shadow arrays."""

    def __init__(self, plan, site, values, shadows: dict, scratch):
        self.private, self.tiled = plan.private, plan.tiled
        self.scratch = scratch         # the transposed reads' slots (`transpose`)
        self.accumulators = plan.accumulators
        self.site, self.b, self.values, self.shadows = site, site.b, values, shadows
        self.buffer: Value | None = None
        self.tile: tuple | None = None   # (tile, keys) of `atomic.accumulate_in_tile`
        self.offsets: dict = {}        # primal array -> offset of its shadow in the buffer
        self.sizes: dict = {}          # primal array -> its element count
        self.made: dict = {}           # accumulated read -> (buffer, trips, fits)

    def holds(self, array: Value) -> bool:
        return array in self.offsets

    def start(self, loc) -> None:
        """The shared copy, zeroed by the block's threads, behind a barrier."""
        private = self.private
        with self.b.location(loc):
            self.buffer = self.b.value(memory.SharedAlloc, shape=(private.capacity,),
                                       dtype=private.dtype)
            self.buffer.name_hint = "private"
            if self.tiled is not None:
                dtype = private.dtype
                tile = self.b.value(memory.SharedAlloc, shape=(
                    atomic.tile_warps(dtype) * 32 * atomic.TILE_STRIDE,), dtype=dtype)
                keys = self.b.value(memory.SharedAlloc, shape=(atomic.tile_warps(dtype) * 32,),
                                    dtype=i32)
                tile.name_hint, keys.name_hint = "tile", "keys"
                self.tile = (tile, keys)
            offset = self.const(0, i32)
            for array in private.arrays:
                size = self.const(1, i32)
                for k in range(array.type.ndim):
                    size = self.b.value(arith.Mul, size, self.cast(
                        self.b.value(memory.Dim, self.values.fwd[array], axis=k), i32))
                self.offsets[array], self.sizes[array] = offset, size
                offset = self.b.value(arith.Add, offset, size)
            self._block_loop(offset, lambda k: self.b.create(
                memory.Store, self.buffer, k, self.zero(private.dtype)))
            self.b.create(sync.Barrier)

    def accumulate(self, op, indices: list, ct: Value) -> None:
        array = op.array
        index = self.b.value(arith.Add, self.offsets[array], self._linear_index(array, indices))
        frame = self.site.scope.loop
        if self.tiled is not None and self.tiled[0] is op and frame is not None \
                and frame.op is self.tiled[1] and frame.whole is not None:
            c, last = frame.counter, self.b.value(arith.Sub, frame.trips, self.const(
                1, frame.trips.type))
            slot = self.cast(self.b.value(arith.Mod, c, self.const(32, c.type)), i32)
            flush = self.b.value(arith.BitOr, self.cmp(slot, self.const(31, i32), "eq"),
                                 self.cmp(c, last, "eq"))
            tile, keys = self.tile
            whole = self.const(True, bool_) if frame.fast else frame.whole
            self.b.create(atomic.AccumulateInTile, self.buffer, index, ct, tile, keys,
                          frame.warp, slot, flush, whole)
        else:
            self.b.create(atomic.Accumulate, self.buffer, index, ct)

    def tile_start(self, loop, frame) -> None:
        """Before the loop of the tiled read reverses: whether this warp takes the tile path
        (all its lanes run the loop, and it has rows in the tile)."""
        if self.tiled is None or self.tiled[1] is not loop:
            return
        linear, _ = self.site.linear_thread()
        frame.warp = self.b.value(arith.FloorDiv, linear, self.const(32, i32))
        frame.whole = self.b.value(arith.BitAnd, self.b.value(warp.Converged), self.cmp(
            frame.warp, self.const(atomic.tile_warps(self.private.dtype), i32), "lt"))

    def flush(self, loc) -> None:
        """After every thread's reverse sweep: one global atomic per block and element."""
        with self.b.location(loc):
            self.b.create(sync.Barrier)
            for array in self.private.arrays:
                def add_back(k, array=array):
                    value = self.b.value(memory.Load, self.buffer, self.b.value(
                        arith.Add, self.offsets[array], k))
                    indices, rest = [], k
                    for axis in reversed(range(1, array.type.ndim)):
                        extent = self.cast(self.b.value(memory.Dim, self.values.fwd[array],
                                                        axis=axis), i32)
                        indices.append(self.b.value(arith.Mod, rest, extent))
                        rest = self.b.value(arith.FloorDiv, rest, extent)
                    indices.append(rest)
                    self.b.create(atomic.AtomicAdd, self.shadows[array], *reversed(indices), value)
                self._block_loop(self.sizes[array], add_back)

    def _linear_index(self, array: Value, indices: list) -> Value:
        linear = self.cast(indices[0], i32)
        for axis in range(1, array.type.ndim):
            extent = self.cast(self.b.value(memory.Dim, self.values.fwd[array], axis=axis), i32)
            linear = self.b.value(arith.Add, self.b.value(arith.Mul, linear, extent),
                                  self.cast(indices[axis], i32))
        return linear

    def _block_loop(self, count: Value, body) -> None:
        """for k in range(thread's linear index in the block, count, threads per block)."""
        start, stride = self.site.linear_thread()
        self.site.loop(start, count, stride, body)

    # ---- per-thread accumulators --------------------------------------------------------
    def fits(self, loop) -> list:
        """The run-time conditions that the accumulators of `loop` fit."""
        return [self.made[op][2] for op, acc in self.accumulators.items()
                if acc.loop is loop and op in self.made]

    def accumulators_start(self, outer) -> None:
        """Before the outermost loop around an accumulator reverses: the inner loop's trip
        count, whether it fits, the array zeroed (values taken as the reverse sweep sees them
        there, so they are visible wherever the loop sits)."""
        primal = self.values.get
        for op, acc in self.accumulators.items():
            if acc.outer is not outer:
                continue
            loop = acc.loop
            lower, upper, step = (primal(v) for v in (loop.lower, loop.upper, loop.step))
            with self.b.location(op.loc):
                trips = self.site.range_trips(lower, upper, step)
                fits = self.cmp(trips, self.const(ACCUMULATED, lower.type), "le")
                ran = None   # every loop of the chain runs: the elements exist
                for around in acc.chain:
                    bounds = [primal(v) for v in (around.lower, around.upper, around.step)]
                    some = self.cmp(self.site.range_trips(*bounds), self.const(
                        0, bounds[0].type), "gt")
                    ran = some if ran is None else self.b.value(arith.BitAnd, ran, some)
                buffer = self.made[op][0] if op in self.made else None
                if buffer is None:
                    with self.site.at_entry():
                        buffer = self.b.value(memory.LocalAlloc, shape=(ACCUMULATED,),
                                              dtype=op.result.type)
                        buffer.name_hint = "accumulated"
                self.made[op] = (buffer, trips, fits, ran)
                # only the slots the loop will use: every slot zeroed is a local-memory line
                # per warp that competes with the kernel's own data for L1
                used = self.b.value(arith.Min, self.cast(trips, i32), self.const(ACCUMULATED, i32))
                self.site.loop(0, used, 1, lambda k: self.b.create(memory.Store, buffer, k,
                                                                   self.zero(op.result.type)))

    def accumulate_owned(self, op, shadow: Value, indices: list, ct: Value) -> None:
        """A read's cotangent summed in its accumulator if it fits, else the update its mode
        makes (plain, or a warp-aggregated or plain atomic: `loopsums`)."""
        acc = self.accumulators[op]
        buffer, _, fits, _ = self.made[op]
        loop = acc.loop
        iv = indices[acc.position]
        slot = self.b.value(arith.FloorDiv, self.b.value(
            arith.Sub, iv, self.values.get(loop.lower)), self.values.get(loop.step))

        def add():
            old = self.b.value(memory.Load, buffer, slot)
            self.b.create(memory.Store, buffer, slot, self.add(old, ct))

        frame = self.site.scope.loop
        if frame is not None and frame.fast:
            add()
            return
        then, other = Region(), Region()
        self.b.create(control.If, fits, result_types=[], regions=[then, other])
        with self.b.at_end(then.block):
            add()
            self.b.create(control.Yield)
        with self.b.at_end(other.block):
            self._update(op, shadow, indices, ct)
            self.b.create(control.Yield)

    def _update(self, op, shadow: Value, indices: list, value: Value) -> None:
        """The update the read's mode makes when its cotangent is not summed per thread."""
        mode = self.accumulators[op].mode
        if mode == "plain":
            self.b.create(memory.Update, shadow, *indices, value, chained=True)
        else:
            self.shared_update(op, mode, shadow, indices, value)

    def shared_update(self, op, mode: str, shadow: Value, indices: list, value: Value) -> None:
        """The update of an element other threads may update too: into the block-private copy
        where it holds the array, warp-aggregated where lanes are likely to share the address
        ("uniform", "grouped"), into this thread's slot ("transposed"), else one atomic, made
        only where the cotangent is not zero: seeds that select one output (XSBench's channel
        0), masks and clamps leave many cotangents exactly zero, and an atomic costs the
        memory system a round trip whatever it adds. (Adding +0.0 would turn a shadow's -0.0
        into +0.0; skipped, it stays -0.0.) ZYMO_AD_SKIP_ZERO=0 makes every atomic, to measure
        the check's cost where no cotangent is zero."""
        if mode == "transposed":
            self.scratch.accumulate(op, indices, value)
        elif mode == "uniform" and self.holds(op.array):
            self.accumulate(op, indices, value)
        elif mode in ("uniform", "grouped"):
            self.b.create(atomic.Accumulate, shadow, *indices, value)
        elif value.type.is_float and skip_zero():
            self.site.when(self.cmp(value, self.zero(value.type), "ne"),
                           lambda: self.b.create(atomic.AtomicAdd, shadow, *indices, value))
        else:
            self.b.create(atomic.AtomicAdd, shadow, *indices, value)

    def accumulators_flush(self, outer) -> None:
        """After the outermost loop reversed: one update per element the thread reached.
        Updates deferred past the loop's barriers (`loopsums`) get one after them: what
        reverses next may read the shadow in another thread (the adjoint of the store that
        staged a shared array), as the loop's barriers ordered before."""
        primal = self.values.get
        fence = False
        for op, acc in self.accumulators.items():
            if acc.outer is not outer:
                continue
            fence = fence or acc.mode != "plain" and any(
                inner.has_trait(Barrier) for inner in outer.walk())
            buffer, trips, fits, ran = self.made[op]
            loop = acc.loop
            lower, step = primal(loop.lower), primal(loop.step)
            indices = [primal(i) if k != acc.position else None
                       for k, i in enumerate(op.indices)]
            with self.b.location(op.loc):
                def add_back(t):   # called right away: the loop's variables are this op's
                    index = self.b.value(arith.Add, lower, self.b.value(arith.Mul, t, step))
                    full = [index if i is None else i for i in indices]
                    value = self.b.value(memory.Load, buffer, t)
                    shadow = self.shadows[op.array]
                    if acc.mode != "plain":   # every lane alike: a warp may sum them
                        self._update(op, shadow, full, value)
                        return
                    # an element this thread never reached kept 0 (and may not exist)
                    touched = self.cmp(value, self.zero(value.type), "ne")
                    self.site.when(touched, lambda: self._update(op, shadow, full, value))

                flush = fits if ran is None else self.b.value(arith.BitAnd, fits, ran)
                self.site.when(flush, lambda: self.site.loop(0, trips, 1, add_back, "t",
                                                             trips.type))
        if fence:   # the loop holds barriers, so the whole block runs it, and this
            with self.b.location(outer.loc):
                self.b.create(sync.Barrier)


ACCUMULATED = 64   # slots of a per-thread accumulator (a run-time inner loop's trips)


class Accumulator:
    """Updates of the thread's own elements `d[..., i]` made by an inner loop over i, repeated
    by an outer loop (the dense layer's dx[n, k] += W[j, k] dacc_j): summed in a per-thread
    array and added once per element at the end, when the inner loop has at most ACCUMULATED
    trips (a run-time check; else each update is made as it comes)."""

    def __init__(self, loop, position: int, outer, mode: str = "plain", chain: tuple = ()):
        self.loop, self.position, self.outer = loop, position, outer
        self.mode = mode     # the read's mode: how a sum (or an update that does not fit) goes
        self.chain = chain   # loops from L's parent to `outer` ("uniform", "atomic": `loopsums`)


def plan_tile(func, forms, read_modes: dict, privatized: Privatized | None):
    """(read, loop): the privatized read with a uniform address that sits directly in the
    body of a counted loop whose bounds are the same for every thread (so every lane of a
    warp that enters the loop runs each of its iterations) and whose index changes with the
    iteration; the deepest such read (one tile per kernel), or None."""
    from ..ir.traits import CountedLoop, Loop
    from ..passes.indexing import Uniform
    if privatized is None:
        return None
    best = None
    for op, mode in read_modes.items():
        loop = op.parent.parent_op
        if mode != "uniform" or op.array not in privatized.arrays or loop is None \
                or not loop.has_trait(CountedLoop) or op.parent is not loop.regions[-1].block:
            continue
        bounds = [forms.form(v) for v in (loop.lower, loop.upper, loop.step)]
        if not all(isinstance(b, Uniform) and b.invariant for b in bounds) \
                or loop.regions[-1].block.args[0] not in op.indices:
            continue
        depth = sum(1 for a in op.ancestors() if a.has_trait(Loop))
        if best is None or depth > best[0]:
            best = (depth, op, loop)
    return None if best is None else best[1:]


def plan_accumulators(func, forms, read_modes: dict, writes: dict, loads: dict) -> dict:
    from ..ir.traits import CountedLoop, Loop
    from ..passes.indexing import ThreadAffine, Uniform
    found = {}
    for op, mode in read_modes.items():
        array = op.array
        if mode != "plain" or array.type.space != "global" or len(loads.get(array, ())) != 1 \
                or array_origin(array) in writes or "arguments" in writes:
            continue
        loop = op.parent.parent_op
        if loop is None or not loop.has_trait(CountedLoop) \
                or not any(a.has_trait(Loop) for a in loop.ancestors()):
            continue
        iv = loop.regions[-1].block.args[0]
        bounds = [forms.form(v) for v in (loop.lower, loop.upper, loop.step)]
        step = loop.step
        if not all(isinstance(b, Uniform) and b.invariant for b in bounds) \
                or isinstance(step, BlockArgument) or not step.owner.has_trait(ConstantLike) \
                or step.owner.value <= 0:
            continue
        positions = [k for k, index in enumerate(op.indices) if index is iv]
        others = [forms.form(index) for index in op.indices if index is not iv]
        if len(positions) != 1 or not all(
                isinstance(f, Uniform) and f.invariant
                or isinstance(f, ThreadAffine) and all(inv for _, _, inv in f.parts)
                for f in others):
            continue
        outer = [a for a in loop.ancestors() if a.has_trait(Loop)][-1]
        found[op] = Accumulator(loop, positions[0], outer)
    return found
