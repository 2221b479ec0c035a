"""Structured control flow as an LLVM CFG: two-way branches, counted and while loops with phis.

`control.if/for/while` rules call these; loop-carried values become phis in the loop header.
`range(lower, upper, step)` loops run a precomputed trip count, so a step whose sign is
known only at run time, or bounds near the integer limits, still follow Python's `range`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir as ll

from ...ir.traits import ConstantLike, CountedLoop
from ...ops.control import waits_for_other_threads

SPIN_WAIT = 2   # the error code of a spin-wait past the target's limit (see context.ERROR_CODE)

if TYPE_CHECKING:
    from ...ir.operation import Region
    from ...ir.types import Scalar, Type


def loop_hint(module: ll.Module, *hints: str) -> ll.MDValue:
    """Loop metadata (`!llvm.loop`) carrying `hints`, such as "llvm.loop.unroll.disable".
    LLVM wants the node to refer to itself first, which llvmlite cannot build directly."""
    node = module.add_metadata([module.add_metadata([ll.MetaDataString(module, hint)])
                                for hint in hints])
    node.operands = (node, *node.operands)
    return node


def constant_trips(lower: ll.Value, upper: ll.Value, step: ll.Value) -> int | None:
    """The trip count of range(lower, upper, step) when all three are constants."""
    bounds = (lower, upper, step)
    if not all(isinstance(v, ll.Constant) and isinstance(v.constant, int) for v in bounds):
        return None
    if step.constant == 0:
        return None
    return len(range(lower.constant, upper.constant, step.constant))


def ir_constant_trips(loop: Any) -> int | None:
    """The trip count of a counted loop op whose bounds are IR constants."""
    bounds = []
    for value in (loop.lower, loop.upper, loop.step):
        owner = getattr(value, "owner", None)   # block arguments have none
        if owner is None or not owner.has_trait(ConstantLike) \
                or not isinstance(owner.value, int):
            return None
        bounds.append(owner.value)
    return len(range(*bounds)) if bounds[2] else None


def code_size(region: Region, target: Any) -> int:
    """How many ops `region` becomes once the target has fully unrolled the counted loops in
    it that it unrolls (`target.unrolls_fully`): what a full unroll of a loop around it copies.
    Nested unrolling multiplies, so the decision for a loop has to see its inner loops'."""
    size = 0
    for op in region.block.ops:
        if not op.regions:
            size += 1
            continue
        inner = sum(code_size(r, target) for r in op.regions)
        trips = ir_constant_trips(op) if op.has_trait(CountedLoop) else None
        unrolled = target.unrolls_fully(trips, inner, op.attrs.get("sweep", ""))
        size += inner * trips if unrolled else inner
    return size


def trip_count(b: ll.IRBuilder, lower: ll.Value, upper: ll.Value, step: ll.Value,
               signed: bool) -> ll.Value:
    """Iterations of range(lower, upper, step) as an unsigned integer of the bounds' width
    (0 for step 0, where Python would raise)."""
    zero = ll.Constant(lower.type, 0)
    one = ll.Constant(lower.type, 1)
    if not signed:
        positive = b.icmp_unsigned("!=", step, zero)
        ascending_span = b.icmp_unsigned(">", upper, lower)
        divisor = b.select(positive, step, one)
        count = b.add(b.udiv(b.sub(b.sub(upper, lower), one), divisor), one)
        return b.select(b.and_(positive, ascending_span), count, zero)
    up = b.icmp_signed(">", step, zero)
    down = b.icmp_signed("<", step, zero)
    # the span (far - near - 1) and |step| are exact as unsigned numbers of the same width
    near, far = b.select(up, lower, upper), b.select(up, upper, lower)
    magnitude = b.select(up, step, b.select(down, b.neg(step), one))
    count = b.add(b.udiv(b.sub(b.sub(far, near), one), magnitude), one)
    nonempty = b.and_(b.or_(up, down), b.icmp_signed(">", far, near))
    return b.select(nonempty, count, zero)


class StructuredControl:
    """Thread-level lowering of structured ops; mixed into the lowering context."""

    builder: ll.IRBuilder
    target: Any
    lowering: Any

    def report_error(self, code: int, site: int, indices: list, shape: list) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def lower_region(self, region: Region, args: list[Any]) -> list[Any]:
        raise NotImplementedError

    def value_type(self, t: Type) -> ll.Type:
        raise NotImplementedError

    def branch(self, cond: ll.Value, then_region: Region, else_region: Region,
               result_types: list[Type]) -> list[Any]:
        b = self.builder
        then_block = b.append_basic_block("then")
        else_block = b.append_basic_block("else")
        merge = b.append_basic_block("endif")
        b.cbranch(cond, then_block, else_block)
        incoming = []
        for block, region in ((then_block, then_region), (else_block, else_region)):
            b.position_at_end(block)
            values = self.lower_region(region, [])
            incoming.append((values, b.block))
            b.branch(merge)
        b.position_at_end(merge)
        results = []
        for index, t in enumerate(result_types):
            phi = b.phi(self.value_type(t))
            for values, block in incoming:
                phi.add_incoming(values[index], block)
            results.append(phi)
        return results

    def range_loop(self, lower: ll.Value, upper: ll.Value, step: ll.Value,
                   inits: list[ll.Value], body: Region, bound: Scalar) -> list[Any]:
        b = self.builder
        trips = trip_count(b, lower, upper, step, bound.is_signed)
        entry = b.block
        header = b.append_basic_block("for.header")
        body_block = b.append_basic_block("for.body")
        exit_block = b.append_basic_block("for.exit")
        b.branch(header)
        b.position_at_end(header)
        counter = b.phi(lower.type)
        iv = b.phi(lower.type)
        carried = [b.phi(v.type) for v in inits]
        counter.add_incoming(ll.Constant(lower.type, 0), entry)
        iv.add_incoming(lower, entry)
        for phi, init in zip(carried, inits):
            phi.add_incoming(init, entry)
        b.cbranch(b.icmp_unsigned("<", counter, trips), body_block, exit_block)
        b.position_at_end(body_block)
        nexts = self.lower_region(body, [iv, *carried])
        latch = b.block
        counter.add_incoming(b.add(counter, ll.Constant(lower.type, 1)), latch)
        iv.add_incoming(b.add(iv, step), latch)
        for phi, value in zip(carried, nexts):
            phi.add_incoming(value, latch)
        back = b.branch(header)
        trips = constant_trips(lower, upper, step)
        size = code_size(body, self.target) if trips is not None else 0   # only unrolled ones
        hint = self.target.range_loop_hint(b.module, trips, size,
                                           body.block.parent_op.attrs.get("sweep", ""))
        if hint is not None:
            back.set_metadata("llvm.loop", hint)
            self.lowering.unrolled.append((body.block.parent_op, trips, size))
        b.position_at_end(exit_block)
        return list(carried)

    def while_loop(self, inits: list[ll.Value], before: Region, body: Region) -> list[Any]:
        b = self.builder
        entry = b.block
        header = b.append_basic_block("while.before")
        body_block = b.append_basic_block("while.body")
        exit_block = b.append_basic_block("while.exit")
        loop = before.block.parent_op
        # a spin-wait the target may never see end (threads run one after another): counted
        limit = self.target.spin_limit if waits_for_other_threads(loop) else None
        b.branch(header)
        b.position_at_end(header)
        carried = [b.phi(v.type) for v in inits]
        for phi, init in zip(carried, inits):
            phi.add_incoming(init, entry)
        if limit is not None:
            count = b.phi(ll.IntType(64))
            count.add_incoming(ll.Constant(count.type, 0), entry)
        (cond,) = self.lower_region(before, list(carried))
        if limit is not None:
            stuck = b.and_(cond, b.icmp_unsigned(">=", count, ll.Constant(count.type, limit)))
            with b.if_then(stuck, likely=False):
                self.report_error(SPIN_WAIT, self.lowering.add_site("", loop), [], [])
                self.abort()
        b.cbranch(cond, body_block, exit_block)
        b.position_at_end(body_block)
        nexts = self.lower_region(body, list(carried))
        for phi, value in zip(carried, nexts):
            phi.add_incoming(value, b.block)
        if limit is not None:
            count.add_incoming(b.add(count, ll.Constant(count.type, 1)), b.block)
        b.branch(header)
        b.position_at_end(exit_block)
        return list(carried)
