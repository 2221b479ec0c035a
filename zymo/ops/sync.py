"""Synchronization (`sync.*`): block barriers and memory fences."""
from __future__ import annotations

from ..ir.operation import attr
from ..ir.traits import Barrier as BarrierTrait
from ..ir.traits import Convergent
from ..ir.traits import Fence as FenceTrait
from ..ir.traits import GridSync
from .base import Op, require
from .mutations import convergent, mutable
from .registry import adjoint_rule, interp_rule, jvp_rule, lower_rule, typing_rule
from .structural import REVERSE_BARRIER
from .tangents import no_results

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
adjoint_rule(GridBarrier, lambda ad, op, cts: ad.b.create(GridBarrier))
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
