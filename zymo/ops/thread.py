"""Thread geometry: special registers (`thread.*`)."""
from __future__ import annotations

from ..ir.operation import attr, result
from ..ir.traits import Pure, Speculatable, ThreadVarying
from ..ir.types import i32
from .base import Op
from .registry import typing_rule


class Special(Op):
    """A read of a special register; `axis` is "x", "y" or "z" where the register has axes."""

    traits = (Pure, Speculatable)
    axis = attr(default="x")
    result = result()


typing_rule(Special, lambda types, attrs: [i32])


class ThreadIdx(Special):
    name = "thread.tid"
    traits = (ThreadVarying,)


class BlockIdx(Special):
    name = "thread.ctaid"


class BlockDim(Special):
    name = "thread.ntid"


class GridDim(Special):
    name = "thread.nctaid"


class LaneId(Special):
    name = "thread.laneid"
    traits = (ThreadVarying,)
