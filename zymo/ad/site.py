"""Where the reverse transform's ops go: the builder, the derivative's entry (allocations and
values made once) and the scope being reversed. Every part of the transform emits through one
`Site`; the scopes say which primal block is being reversed into which new block."""
from __future__ import annotations

from contextlib import contextmanager

from ..ir.builder import Builder
from ..ir.operation import Operation, Region
from ..ir.types import i32
from ..ir.values import BlockArgument, Value
from ..ops import arith, control, memory, thread
from .emit import Emitter


class Scope:
    """A primal block being reversed into `rev`; recomputed values go to its prologue."""

    def __init__(self, block, rev, parent: "Scope | None", loop: "LoopFrame | None" = None):
        self.block, self.rev, self.parent, self.loop = block, rev, parent, loop
        self.pro = 0
        self.forward = False       # reversed inside the forward sweep: its values are there
        self.values: dict = {}     # primal value (or ("trips", op)) -> value usable in rev;
                                   # ("refilled", array): its fill ran here (refill.py)
        self.adjoints: dict = {}   # primal value -> cotangent accumulated so far (SSA)

    def defines(self, value: Value) -> bool:
        if isinstance(value, BlockArgument):
            return value.block is self.block
        return value.owner.parent is self.block


class LoopFrame:
    def __init__(self, op: Operation, offset: int):
        self.op = op
        self.offset = offset       # body arguments before the carried values (1: the iv)
        self.index: Value | None = None   # forward iteration number of this reverse iteration
        self.counter: Value | None = None  # reverse iteration number, and the trip count
        self.trips: Value | None = None
        self.warp = self.whole = None      # the tile path's (`PrivateCopies.tile_start`)
        self.fast = False          # this copy of the loop runs where the tile path is taken
                                   # and the accumulators fit (`Reverse._fast_condition`)


class Site(Emitter):
    def __init__(self):
        self.b = Builder()
        self.block = None            # the derivative's entry block, and where its entry ends
        self.entry = 0
        self.top: Scope | None = None
        self.scope: Scope | None = None

    def start(self, block, primal_block) -> None:
        self.block, self.entry = block, 0
        self.top = Scope(primal_block, block, None)
        self.b.block, self.b.index = block, None

    @contextmanager
    def entered(self, block, rev, loop: LoopFrame | None = None):
        scope = Scope(block, rev, self.scope, loop)
        saved = self.scope
        self.scope = scope
        try:
            with self.b.at_end(rev):
                yield scope
        finally:
            self.scope = saved

    @contextmanager
    def at(self, block, index: int, done=None):
        """Ops go to `block` at `index`; `done(index after them)` when the context ends."""
        saved = (self.b.block, self.b.index)
        self.b.block, self.b.index = block, index
        try:
            yield
        finally:
            if done is not None:
                done(self.b.index)
            self.b.block, self.b.index = saved

    def prologue(self, scope: Scope):
        return self.at(scope.rev, scope.pro, lambda end: setattr(scope, "pro", end))

    def at_entry(self):
        return self.at(self.block, self.entry, self._entry_ends)

    def _entry_ends(self, end: int) -> None:
        self.entry = end
        if self.top.rev is self.block:
            self.top.pro = end

    def local_slot(self, dtype, name: str):
        """A one-element local array made and zeroed at entry, and the index 0."""
        with self.at_entry():
            slot = self.b.value(memory.LocalAlloc, shape=(1,), dtype=dtype)
            slot.name_hint = name
            zero = self.const(0, i32)
            self.b.create(memory.Store, slot, zero, self.zero(dtype))
        return slot, zero

    def when(self, cond: Value, body) -> None:
        then, other = Region(), Region()
        self.b.create(control.If, cond, result_types=[], regions=[then, other])
        with self.b.at_end(then.block):
            body()
            self.b.create(control.Yield)
        with self.b.at_end(other.block):
            self.b.create(control.Yield)

    def loop(self, start, stop, step, body, name: str = "k", type=i32) -> None:
        """for name in range(start, stop, step): body(name), without carried values; bounds
        given as ints become constants of `type` after the body."""
        region = Region()
        k = region.block.add_arg(type, name)
        with self.b.at_end(region.block):
            body(k)
            self.b.create(control.Yield)
        start, stop, step = (v if isinstance(v, Value) else self.const(v, type)
                             for v in (start, stop, step))
        self.b.create(control.For, start, stop, step, result_types=[], regions=[region])

    def range_trips(self, lower: Value, upper: Value, step: Value) -> Value:
        """Python range's trip count: max(0, ceil((upper - lower) / step)), as
        -((lower - upper) // step)."""
        return self.b.value(arith.Max, self.const(0, lower.type), self.b.value(
            arith.Neg, self.b.value(arith.FloorDiv, self.b.value(arith.Sub, lower, upper), step)))

    def linear_thread(self):
        """(this thread's linear index in its block, the block's thread count), i32."""
        tid = [self.b.value(thread.ThreadIdx, axis=a) for a in "xyz"]
        ntid = [self.b.value(thread.BlockDim, axis=a) for a in "xyz"]
        linear = self.b.value(arith.Add, tid[0], self.b.value(arith.Mul, ntid[0], self.b.value(
            arith.Add, tid[1], self.b.value(arith.Mul, ntid[1], tid[2]))))
        count = self.b.value(arith.Mul, ntid[0], self.b.value(arith.Mul, ntid[1], ntid[2]))
        return linear, count
