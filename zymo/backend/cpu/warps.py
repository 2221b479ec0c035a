"""Warp ops on the CPU: each lane's result from the per-thread slots of its warp.

A warp is 32 consecutive linear thread ids. A warp op is alone in its thread loop (it is a
split point), so every operand it reads from another lane is in a slot, written by an
earlier loop. Semantics follow the interpreter: a shuffle source outside the warp (or past
the end of the block) gives the thread its own value; votes count the active lanes.
"""
from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir as ll

from ...ir.operation import Operation
from ..llvm.types import I1, I32, I64
from .threads import ThreadContext, counted_loop

WARP = 32


def shuffle(ctx: ThreadContext, op: Operation, mode: str, value: ll.Value,
            lane: ll.Value) -> ll.Value:
    b = ctx.builder
    me = b.and_(ctx.linear, ll.Constant(I64, WARP - 1))
    base = b.sub(ctx.linear, me)
    operand = b.sext(lane, I64)
    source = {
        "idx": lambda: b.and_(operand, ll.Constant(I64, WARP - 1)),
        "down": lambda: b.add(me, operand),
        "up": lambda: b.sub(me, operand),
        "xor": lambda: b.xor(me, operand),
    }[mode]()
    inside = b.icmp_unsigned("<", source, ll.Constant(I64, WARP))   # negative is huge
    thread = b.add(base, source)
    inside = b.and_(inside, b.icmp_unsigned("<", thread, ctx.kernel.nthreads))
    shuffled = op.value   # the Shuffle's `value` operand
    if shuffled in ctx.kernel.uniform_values:
        return value
    return ctx.lane_value(shuffled, b.select(inside, thread, ctx.linear))


def ballot(ctx: ThreadContext, predicate: Callable[[ll.Value], ll.Value]) -> ll.Value:
    """The u32 mask of the active lanes of this thread's warp where `predicate(lane)` holds."""
    b = ctx.builder
    base = b.sub(ctx.linear, b.and_(ctx.linear, ll.Constant(I64, WARP - 1)))
    bits = ctx.entry_alloca(I32)
    b.store(ll.Constant(I32, 0), bits)

    def lane(index: ll.Value) -> None:
        thread = b.add(base, b.zext(index, I64))
        with b.if_then(b.icmp_unsigned("<", thread, ctx.kernel.nthreads)):
            voting = b.select(ctx.lane_active(thread), predicate(thread), ll.Constant(I1, 0))
            bit = b.shl(b.zext(voting, I32), index)
            b.store(b.or_(b.load(bits, typ=I32), bit), bits)

    counted_loop(b, ll.Constant(I32, WARP), lane, "lane")
    return b.load(bits, typ=I32)


def vote(ctx: ThreadContext, op: Operation, mode: str, mask: ll.Value) -> ll.Value:
    b = ctx.builder
    voted = op.predicate
    holds = lambda thread: ctx.lane_value(voted, thread)
    if mode == "ballot":
        return b.and_(ballot(ctx, holds), mask)
    if mode == "any":
        return b.icmp_unsigned("!=", b.and_(ballot(ctx, holds), mask), ll.Constant(I32, 0))
    fails = ballot(ctx, lambda thread: b.not_(holds(thread)))
    return b.icmp_unsigned("==", b.and_(fails, mask), ll.Constant(I32, 0))


def active_mask(ctx: ThreadContext) -> ll.Value:
    return ballot(ctx, lambda thread: ll.Constant(I1, 1))


def match(ctx: ThreadContext, op: Operation, mode: str, mask: ll.Value,
          value: ll.Value) -> ll.Value | list[ll.Value]:
    """`warp.match_any` / `match_all`: the ballot of the lanes whose value has this lane's
    bits (floats compare as bits, as on the GPU)."""
    b = ctx.builder
    word = ll.IntType(value.type.width if isinstance(value.type, ll.IntType)
                      else {ll.FloatType(): 32, ll.DoubleType(): 64}[value.type])
    bits = lambda v: v if v.type == word else b.bitcast(v, word)   # noqa: E731
    mine = bits(value)
    same = b.and_(ballot(ctx, lambda thread: b.icmp_unsigned(
        "==", bits(ctx.lane_value(op.value, thread)), mine)), mask)
    if mode == "any":
        return same
    # lanes the mask names that do not run do not take part, as on the GPU
    named = b.and_(mask, ballot(ctx, lambda thread: ll.Constant(ll.IntType(1), 1)))
    every = b.icmp_unsigned("==", same, named)
    return [b.select(every, named, ll.Constant(I32, 0)), every]
