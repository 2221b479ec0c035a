"""Warp-level ops (`warp.*`): shuffles and votes over the 32 lanes of a warp."""
from __future__ import annotations

from ..ir.operation import operand, result
from ..ir.traits import Convergent, ThreadVarying
from ..ir.types import Scalar, bool_, i32, u32
from .base import Op, require
from .registry import typing_rule


class Shuffle(Op):
    """%v = warp.shfl_*(%mask, %value, %lane_or_delta)"""

    traits = (Convergent, ThreadVarying)
    mask = operand()
    value = operand()
    lane = operand()
    result = result()


def _shuffle_types(types, attrs):
    require(isinstance(types[1], Scalar), f"shuffled value must be a scalar, not {types[1]}")
    require(types[0] == u32, f"mask must be u32, not {types[0]}")
    require(types[2] == i32, f"lane must be i32, not {types[2]}")
    return [types[1]]


typing_rule(Shuffle, _shuffle_types)


class ShflIdx(Shuffle):
    name = "warp.shfl_idx"


class ShflDown(Shuffle):
    name = "warp.shfl_down"


class ShflUp(Shuffle):
    name = "warp.shfl_up"


class ShflXor(Shuffle):
    name = "warp.shfl_xor"


class Vote(Op):
    traits = (Convergent, ThreadVarying)
    mask = operand()
    predicate = operand()
    result = result()


def _vote_types(result_type):
    def rule(types, attrs):
        require(types[0] == u32, f"mask must be u32, not {types[0]}")
        require(types[1] == bool_, f"predicate must be bool, not {types[1]}")
        return [result_type]

    return rule


class Ballot(Vote):
    name = "warp.ballot"


typing_rule(Ballot, _vote_types(u32))


class VoteAll(Vote):
    name = "warp.all"


typing_rule(VoteAll, _vote_types(bool_))


class VoteAny(Vote):
    name = "warp.any"


typing_rule(VoteAny, _vote_types(bool_))


class ActiveMask(Op):
    name = "warp.activemask"
    traits = (Convergent, ThreadVarying)
    result = result()


typing_rule(ActiveMask, lambda types, attrs: [u32])
