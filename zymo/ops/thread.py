"""Thread geometry: special registers (`thread.*`)."""
from __future__ import annotations

from ..ir.operation import attr, result
from ..ir.traits import Pure, Speculatable, ThreadVarying
from ..ir.types import i32
from .base import Op
from .lowering import special_register
from .adjoints import nondifferentiable
from .registry import index_form_rule, interp_rule, lower_rule, typing_rule


class Special(Op):
    """A read of a special register; `axis` is "x", "y" or "z" where the register has axes."""

    traits = (Pure, Speculatable)
    axis = attr(default="x")
    result = result()


typing_rule(Special, lambda types, attrs: [i32])
nondifferentiable(Special, "thread geometry")


class ThreadIdx(Special):
    name = "thread.tid"
    traits = (ThreadVarying,)


interp_rule(ThreadIdx, lambda ctx, op: ctx.batch.tid[op.axis])
lower_rule(ThreadIdx, special_register("tid"))
index_form_rule(ThreadIdx, lambda forms, op: forms.thread_index(op.axis))


class BlockIdx(Special):
    name = "thread.ctaid"


interp_rule(BlockIdx, lambda ctx, op: ctx.batch.ctaid[op.axis])
lower_rule(BlockIdx, special_register("ctaid"))
index_form_rule(BlockIdx, lambda forms, op: forms.register(op, "ctaid"))


class BlockDim(Special):
    name = "thread.ntid"


interp_rule(BlockDim, lambda ctx, op: ctx.batch.ntid[op.axis])
lower_rule(BlockDim, special_register("ntid"))
index_form_rule(BlockDim, lambda forms, op: forms.register(op, "ntid"))


class GridDim(Special):
    name = "thread.nctaid"


interp_rule(GridDim, lambda ctx, op: ctx.batch.nctaid[op.axis])
lower_rule(GridDim, special_register("nctaid"))


class LaneId(Special):
    name = "thread.laneid"
    traits = (ThreadVarying,)


interp_rule(LaneId, lambda ctx, op: ctx.batch.laneid)
lower_rule(LaneId, special_register("laneid"))
