"""Block mode: structured ops that contain a split point, run once per block under masks.

The lower rules of `control.if/for/while` call `ctx.branch`, `ctx.range_loop` and
`ctx.while_loop`; here `ctx` is a `BlockContext`, whose operands are per-thread slots (or
uniform values) instead of one thread's registers:

- `if`: a uniform condition is an ordinary branch around both regions; otherwise each
  region runs under its own mask (`mask & cond`, `mask & ~cond`) and yields into slots.
- `for`: uniform bounds give one loop for the whole block; otherwise each thread has its
  own counter and trip count, and the loop goes on while any thread is active.
- `while`: each thread leaves when its condition fails; the loop goes on while any is left.

Slots read for threads outside the mask may be uninitialized, so masks are combined with
`select`, never with `and` on the loaded value.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir as ll

from ...ir.operation import Operation, Region
from ...ir.types import Scalar, Type, bool_
from ..llvm.control import trip_count
from ..llvm.types import I1
from .threads import Slot

if TYPE_CHECKING:
    from .kernel import KernelBuilder

Handle = Slot | ll.Value
FALSE = ll.Constant(I1, 0)


class BlockContext:
    """What a structured op's lower rule sees in block mode."""

    def __init__(self, kernel: KernelBuilder, mask: Slot | None, op: Operation):
        self.kernel = kernel
        self.mask = mask
        self.op = op
        self.builder = kernel.builder
        self.target = kernel.lowering.target

    @property
    def uniform(self) -> bool:
        """The op's control and the values it carries are the same in every thread."""
        return self.op in self.kernel.plan.uniform_regions

    def branch(self, cond: Handle, then_region: Region, else_region: Region,
               result_types: list[Type]) -> list[Handle]:
        k, b = self.kernel, self.builder
        if self.uniform:
            return self._uniform_branch(cond, then_region, else_region)
        results = [k.new_slot(t) for t in result_types]
        if not isinstance(cond, Slot):
            with b.if_else(cond) as (then, otherwise):
                with then:
                    k.run_region(then_region, [], self.mask, results)
                with otherwise:
                    k.run_region(else_region, [], self.mask, results)
            return results
        then_mask, else_mask = k.new_slot(bool_), k.new_slot(bool_)

        def split(linear: ll.Value) -> None:
            active, taken = k.is_active(self.mask, linear), k.read(cond, linear)
            k.write(then_mask, linear, b.select(active, taken, FALSE))
            k.write(else_mask, linear, b.select(active, b.not_(taken), FALSE))

        k.each_thread(split)
        k.run_region(then_region, [], then_mask, results)
        k.run_region(else_region, [], else_mask, results)
        return results

    def range_loop(self, lower: Handle, upper: Handle, step: Handle, inits: list[Handle],
                   body: Region, bound: Scalar) -> list[Handle]:
        k, b = self.kernel, self.builder
        if self.uniform:
            return self._uniform_range(lower, upper, step, inits, body)
        carried = [k.new_slot(arg.type) for arg in body.block.args[1:]]
        k.each_thread(lambda linear: self._copy(carried, inits, linear), self.mask)
        if not any(isinstance(h, Slot) for h in (lower, upper, step)):
            self._uniform_range(lower, upper, step, carried, body)   # per-thread carried
            return carried
        iv, trips, done = k.new_slot(bound), k.new_slot(bound), k.new_slot(bound)
        active = k.new_slot(bool_)

        def start(linear: ll.Value) -> None:
            first, last, stride = (k.read(h, linear) for h in (lower, upper, step))
            k.write(iv, linear, first)
            k.write(trips, linear, trip_count(b, first, last, stride, bound.is_signed))
            k.write(done, linear, ll.Constant(first.type, 0))

        k.each_thread(start, self.mask)

        def goes_on(linear: ll.Value) -> ll.Value:
            more = b.icmp_unsigned("<", k.read(done, linear), k.read(trips, linear))
            going = b.select(k.is_active(self.mask, linear), more, FALSE)
            k.write(active, linear, going)
            return going

        def advance(linear: ll.Value) -> None:
            one = ll.Constant(k.lowering.value_type(bound), 1)
            k.write(done, linear, b.add(k.read(done, linear), one))
            k.write(iv, linear, b.add(k.read(iv, linear), k.read(step, linear)))

        def iteration() -> None:
            k.run_region(body, [iv, *carried], active, carried)
            k.each_thread(advance, active)

        self._loop(lambda: k.any_thread(goes_on), iteration, "for")
        return carried

    def while_loop(self, inits: list[Handle], before: Region, body: Region) -> list[Handle]:
        k, b = self.kernel, self.builder
        if self.uniform:
            return self._uniform_while(inits, before, body)
        carried = [k.new_slot(arg.type) for arg in before.block.args]
        active, cond = k.new_slot(bool_), k.new_slot(bool_)
        k.each_thread(lambda linear: k.write(active, linear, k.is_active(self.mask, linear)))
        k.each_thread(lambda linear: self._copy(carried, inits, linear), self.mask)

        def goes_on(linear: ll.Value) -> ll.Value:
            going = b.select(k.read(active, linear), k.read(cond, linear), FALSE)
            k.write(active, linear, going)
            return going

        def test() -> ll.Value:
            k.run_region(before, list(carried), active, [cond])
            return k.any_thread(goes_on)

        self._loop(test, lambda: k.run_region(body, list(carried), active, carried), "while")
        return carried

    # ---- helpers ------------------------------------------------------------------------
    def _copy(self, slots: list[Slot], handles: list[Handle], linear: ll.Value) -> None:
        for slot, handle in zip(slots, handles):
            self.kernel.write(slot, linear, self.kernel.read(handle, linear))

    def _loop(self, test, iteration, name: str) -> None:
        """while (test()) iteration(); at block level."""
        b = self.builder
        header = b.append_basic_block(f"{name}.block.test")
        block = b.append_basic_block(f"{name}.block.body")
        done = b.append_basic_block(f"{name}.block.exit")
        b.branch(header)
        b.position_at_end(header)
        b.cbranch(test(), block, done)
        b.position_at_end(block)
        iteration()
        b.branch(header)
        b.position_at_end(done)

    def _uniform_range(self, lower: Handle, upper: Handle, step: Handle,
                       carried: list[Handle], body: Region) -> list[Handle]:
        """Bounds equal in every thread: one counted loop for the block with a uniform
        induction variable. Carried slots are updated in place; carried uniform values
        (given as their initial values) become phis. The mask does not change."""
        k, b = self.kernel, self.builder
        assert isinstance(lower, ll.Value) and isinstance(upper, ll.Value)
        assert isinstance(step, ll.Value)
        bound = body.block.args[0].type
        assert isinstance(bound, Scalar)
        trips = trip_count(b, lower, upper, step, bound.is_signed)
        before = b.block
        header = b.append_basic_block("for.uniform.test")
        block = b.append_basic_block("for.uniform.body")
        done = b.append_basic_block("for.uniform.exit")
        b.branch(header)
        b.position_at_end(header)
        counter, iv = b.phi(lower.type), b.phi(lower.type)
        counter.add_incoming(ll.Constant(lower.type, 0), before)
        iv.add_incoming(lower, before)
        values = self._phis(carried, before)
        b.cbranch(b.icmp_unsigned("<", counter, trips), block, done)
        b.position_at_end(block)
        slots = [h for h in values if isinstance(h, Slot)]
        k.run_region(body, [iv, *values], self.mask, slots if len(slots) == len(values) else
                     None)
        self._close(values, k.yields(body))
        counter.add_incoming(b.add(counter, ll.Constant(lower.type, 1)), b.block)
        iv.add_incoming(b.add(iv, step), b.block)
        b.branch(header)
        b.position_at_end(done)
        return values

    def _uniform_branch(self, cond: Handle, then_region: Region,
                        else_region: Region) -> list[Handle]:
        k, b = self.kernel, self.builder
        assert isinstance(cond, ll.Value)
        then_block = b.append_basic_block("if.uniform.then")
        else_block = b.append_basic_block("if.uniform.else")
        merge = b.append_basic_block("if.uniform.end")
        b.cbranch(cond, then_block, else_block)
        incoming = []
        for block, region in ((then_block, then_region), (else_block, else_region)):
            b.position_at_end(block)
            k.run_region(region, [], self.mask, None)
            incoming.append((k.yields(region), b.block))
            b.branch(merge)
        b.position_at_end(merge)
        results: list[Handle] = []
        for index, first in enumerate(incoming[0][0]):
            assert isinstance(first, ll.Value)
            phi = b.phi(first.type)
            for values, block in incoming:
                phi.add_incoming(values[index], block)
            results.append(phi)
        return results

    def _uniform_while(self, inits: list[Handle], before: Region,
                       body: Region) -> list[Handle]:
        """A condition and carried values equal in every thread: one loop for the block."""
        k, b = self.kernel, self.builder
        entry = b.block
        header = b.append_basic_block("while.uniform.before")
        block = b.append_basic_block("while.uniform.body")
        done = b.append_basic_block("while.uniform.exit")
        b.branch(header)
        b.position_at_end(header)
        values = self._phis(inits, entry)
        k.run_region(before, values, self.mask, None)
        (cond,) = k.yields(before)
        assert isinstance(cond, ll.Value)
        b.cbranch(cond, block, done)
        b.position_at_end(block)
        k.run_region(body, values, self.mask, None)
        self._close(values, k.yields(body))
        b.branch(header)
        b.position_at_end(done)
        return values

    def _phis(self, inits: list[Handle], entry: ll.Block) -> list[Handle]:
        """Loop-carried values at the loop header: phis for uniform values, slots as they
        are (their updates happen in memory)."""
        values: list[Handle] = []
        for init in inits:
            if isinstance(init, Slot):
                values.append(init)
                continue
            phi = self.builder.phi(init.type)
            phi.add_incoming(init, entry)
            values.append(phi)
        return values

    def _close(self, values: list[Handle], nexts: list[Handle]) -> None:
        for value, following in zip(values, nexts):
            if isinstance(value, ll.PhiInstr):
                value.add_incoming(following, self.builder.block)


def vote(ctx: BlockContext, mode: str, predicate: Handle) -> ll.Value:
    """A block vote's i32 (see `sync.BarrierVote`): of the threads in the mask, how many hold
    `predicate` (`popc`), or whether all (`and`) or some (`or`) do."""
    k, b = ctx.kernel, ctx.builder
    i32 = ll.IntType(32)
    holding, present = k.entry_alloca(i32), k.entry_alloca(i32)
    for counter in (holding, present):
        b.store(ll.Constant(i32, 0), counter)

    def count(linear: ll.Value) -> None:
        holds = b.zext(k.read(predicate, linear), i32)
        b.store(b.add(b.load(holding, typ=i32), holds), holding)
        b.store(b.add(b.load(present, typ=i32), ll.Constant(i32, 1)), present)

    k.each_thread(count, ctx.mask)
    total, arrived = b.load(holding, typ=i32), b.load(present, typ=i32)
    if mode == "popc":
        return total
    test = b.icmp_unsigned("==", total, arrived) if mode == "and" \
        else b.icmp_unsigned("!=", total, ll.Constant(i32, 0))
    return b.zext(test, i32)
