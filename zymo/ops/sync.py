"""Synchronization (`sync.*`): block barriers and memory fences."""
from __future__ import annotations

import numpy as np

from ..ir.operation import attr, operand, result
from ..ir.traits import Barrier as BarrierTrait
from ..ir.traits import Convergent
from ..ir.traits import Fence as FenceTrait
from ..ir.traits import GridSync
from ..ir.types import bool_, i32
from .base import Op, require
from .mutations import convergent, mutable
from .registry import adjoint_rule, interp_rule, jvp_rule, lower_rule, typing_rule
from .structural import REVERSE_BARRIER, REVERSE_GRID_BARRIER
from .tangents import no_results, zero_tangent

SCOPES = ("block", "device", "system")


class Barrier(Op):
    """Every thread of the block waits here until all have arrived (`zm.syncthreads()`); the
    block's threads then see each other's earlier writes."""

    name = "sync.barrier"
    traits = (BarrierTrait, Convergent, FenceTrait)


typing_rule(Barrier, lambda types, attrs: [])
convergent(Barrier)
interp_rule(Barrier, lambda ctx, op: ctx.barrier(op))
lower_rule(Barrier, lambda ctx, op: ctx.target.barrier(ctx))
adjoint_rule(Barrier, REVERSE_BARRIER)   # barriers reverse to barriers
jvp_rule(Barrier, no_results)   # tangents are stored beside their values, before it


class BarrierVote(Op):
    """A barrier that also hands every thread of the block a reduction of a predicate over
    the threads that reach it (numba's `syncthreads_count`, `_and`, `_or`; CUDA's
    `__syncthreads_count` ...): one `bar.red` on the GPU; on the CPU it runs once per block,
    between the thread loops the barrier separates."""

    traits = (BarrierTrait, Convergent, FenceTrait)
    predicate = operand()
    result = result()
    mode = ""    # "popc", "and" or "or": the target's name for the reduction


def _vote_types(types, attrs):
    require(types[0] == bool_, f"the predicate must be bool, not {types[0]}")
    return [i32]


def _block_vote(reduce):
    """An interp rule: the barrier, then `reduce(count, present)` per thread, from how many
    threads of its block hold the predicate and how many reached the barrier."""

    def rule(ctx, op, predicate):
        ctx.barrier(op)
        count, present = ctx.block_count(predicate)
        return np.asarray(reduce(count, present), np.int32)

    return rule


class BarrierCount(BarrierVote):
    """The number of the block's threads whose predicate holds."""

    name = "sync.barrier_count"
    mode = "popc"


class BarrierAnd(BarrierVote):
    """1 where the predicate holds in every thread of the block, else 0."""

    name = "sync.barrier_and"
    mode = "and"


class BarrierOr(BarrierVote):
    """1 where the predicate holds in some thread of the block, else 0."""

    name = "sync.barrier_or"
    mode = "or"


typing_rule(BarrierVote, _vote_types)
convergent(BarrierVote)
interp_rule(BarrierCount, _block_vote(lambda count, present: count))
interp_rule(BarrierAnd, _block_vote(lambda count, present: count == present))
interp_rule(BarrierOr, _block_vote(lambda count, present: count > 0))
lower_rule(BarrierVote, lambda ctx, op, predicate: ctx.target.barrier_vote(
    ctx, op, op.mode, predicate))
adjoint_rule(BarrierVote, REVERSE_BARRIER)   # an integer result; the barrier reverses
jvp_rule(BarrierVote, zero_tangent)


class GridBarrier(Op):
    """`cuda.cg.this_grid().sync()`: every thread of the launch waits here until all have
    arrived, and then sees the others' earlier writes (a barrier of the block, then of the
    blocks). Only a cooperative launch, whose blocks are all resident at once, can wait so;
    kernels with it are launched that way (runtime/cuda) and refused where they do not fit."""

    name = "sync.grid"
    traits = (BarrierTrait, Convergent, FenceTrait, GridSync)


typing_rule(GridBarrier, lambda types, attrs: [])
convergent(GridBarrier)
interp_rule(GridBarrier, lambda ctx, op: ctx.grid_barrier(op))
lower_rule(GridBarrier, lambda ctx, op: ctx.target.grid_barrier(ctx))
# the reverse sweep reads, after it, the shadows other blocks updated before it in reverse
adjoint_rule(GridBarrier, REVERSE_GRID_BARRIER)
jvp_rule(GridBarrier, no_results)   # tangents are stored beside their values, before it


class Fence(Op):
    """`zm.threadfence()` (scope "device"), `threadfence_block()` ("block"),
    `threadfence_system()` ("system"): the thread's writes before it are seen by the threads of
    the scope before its writes after it (CUDA's `__threadfence*`; a sequentially consistent
    fence). Atomics are relaxed: a fence between a data write and a flag's atomic publishes the
    data."""

    name = "sync.fence"
    traits = (FenceTrait,)
    scope = attr(default="device")


def _fence_types(types, attrs):
    require(attrs.get("scope", "device") in SCOPES,
            f"fence scope must be one of {', '.join(SCOPES)}, not {attrs.get('scope')!r}")
    return []


typing_rule(Fence, _fence_types)
mutable(Fence)
# the NumPy interpreter runs every op for all threads before the next: already ordered
interp_rule(Fence, lambda ctx, op: None)
lower_rule(Fence, lambda ctx, op: ctx.target.fence(ctx, op.scope))
# the reverse sweep orders its shadow updates as the forward sweep ordered its writes
adjoint_rule(Fence, lambda ad, op, cts: ad.b.create(Fence, scope=op.scope))
jvp_rule(Fence, no_results)   # tangents are stored beside their values, before it
