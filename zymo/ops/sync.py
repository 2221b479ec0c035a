"""Block synchronization (`sync.*`)."""
from __future__ import annotations

from ..ir.traits import Barrier as BarrierTrait
from ..ir.traits import Convergent
from .base import Op
from .adjoints import delegate
from .mutations import convergent
from .registry import adjoint_rule, interp_rule, jvp_rule, lower_rule, typing_rule
from .tangents import no_results


class Barrier(Op):
    """Every thread of the block waits here until all have arrived (`zm.syncthreads()`)."""

    name = "sync.barrier"
    traits = (BarrierTrait, Convergent)


typing_rule(Barrier, lambda types, attrs: [])
convergent(Barrier)
interp_rule(Barrier, lambda ctx, op: ctx.barrier(op))
lower_rule(Barrier, lambda ctx, op: ctx.target.barrier(ctx))
adjoint_rule(Barrier, delegate("reverse_barrier"))   # barriers reverse to barriers
jvp_rule(Barrier, no_results)   # tangents are stored beside their values, before it
