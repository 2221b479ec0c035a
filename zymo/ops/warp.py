"""Warp-level ops (`warp.*`): shuffles and votes over the 32 lanes of a warp."""
from __future__ import annotations

import numpy as np

from ..ir.operation import operand, result
from ..ir.traits import Convergent, Fence, OrderDependent, ThreadVarying
from ..ir.types import Scalar, bool_, i32, u32
from .base import Op, require
from .lowering import shuffle, vote
from .adjoints import cotangents, nondifferentiable
from .mutations import convergent
from .registry import (ADJOINT, absent, adjoint_rule, interp_rule, jvp_rule, lower_rule,
                       typing_rule)
from .tangents import linear_in, no_results


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
convergent(Shuffle)


def shuffle_from(source_lane):
    """An interp rule reading `value` from lane `source_lane(laneid, lane)` of the warp; a
    lane outside the warp gives the thread its own value."""

    def rule(ctx, op, mask, value, lane):
        return ctx.shuffle(op, mask, value, source_lane(ctx.batch.laneid, lane))

    return rule


class ShflIdx(Shuffle):
    name = "warp.shfl_idx"


interp_rule(ShflIdx, shuffle_from(lambda laneid, lane: lane & 31))
lower_rule(ShflIdx, shuffle("idx"))
absent(ADJOINT, ShflIdx, "the adjoint of an indexed shuffle scatters to arbitrary lanes")
jvp_rule(ShflIdx, linear_in(1))   # the tangent travels with the value


class ShflDown(Shuffle):
    name = "warp.shfl_down"


interp_rule(ShflDown, shuffle_from(lambda laneid, delta: laneid + delta))
lower_rule(ShflDown, shuffle("down"))
cotangents(ShflDown, None, lambda ad, op, ct: ad.transpose_shuffle(op, ct, ShflUp, +1), None,
           jvp=linear_in(1))


class ShflUp(Shuffle):
    name = "warp.shfl_up"


interp_rule(ShflUp, shuffle_from(lambda laneid, delta: laneid - delta))
lower_rule(ShflUp, shuffle("up"))
cotangents(ShflUp, None, lambda ad, op, ct: ad.transpose_shuffle(op, ct, ShflDown, -1), None,
           jvp=linear_in(1))


class ShflXor(Shuffle):
    name = "warp.shfl_xor"


interp_rule(ShflXor, shuffle_from(lambda laneid, lane_mask: laneid ^ lane_mask))
lower_rule(ShflXor, shuffle("xor"))
cotangents(ShflXor, None, lambda ad, op, ct: ad.emit(  # its own transpose
    ShflXor, ad.primal(op.mask), ct, ad.primal(op.lane)), None)


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
interp_rule(Ballot, lambda ctx, op, mask, predicate: ctx.vote(op, mask, predicate))
lower_rule(Ballot, vote("ballot"))
nondifferentiable(Vote, "a vote")
convergent(Vote)


class VoteAll(Vote):
    name = "warp.all"


typing_rule(VoteAll, _vote_types(bool_))
interp_rule(VoteAll, lambda ctx, op, mask, predicate:
            ctx.vote(op, mask, np.logical_not(predicate)) == 0)
lower_rule(VoteAll, vote("all"))


class VoteAny(Vote):
    name = "warp.any"


typing_rule(VoteAny, _vote_types(bool_))
interp_rule(VoteAny, lambda ctx, op, mask, predicate: ctx.vote(op, mask, predicate) != 0)
lower_rule(VoteAny, vote("any"))


class ActiveMask(Op):
    name = "warp.activemask"
    # which lanes run together here is the scheduler's choice, not the program's
    traits = (Convergent, OrderDependent, ThreadVarying)
    result = result()


typing_rule(ActiveMask, lambda types, attrs: [u32])
interp_rule(ActiveMask, lambda ctx, op: ctx.ballot(True))
lower_rule(ActiveMask, lambda ctx, op: ctx.target.active_mask(ctx, op))
nondifferentiable(ActiveMask, "a lane mask")
convergent(ActiveMask)


class Converged(Op):
    """Whether the GPU runs every lane of the calling thread's warp here, together (its
    active mask is full): a hint that lets `atomic.accumulate_in_tile` use the whole warp.
    Targets without lockstep warps (the interpreter, the CPU) say false. Not a split point
    for the CPU and never moved (neither Pure nor Speculatable): its answer is its place's."""

    name = "warp.converged"
    traits = (OrderDependent, ThreadVarying)
    result = result()


typing_rule(Converged, lambda types, attrs: [bool_])
interp_rule(Converged, lambda ctx, op: np.bool_(False))
lower_rule(Converged, lambda ctx, op: ctx.target.warp_converged(ctx))
nondifferentiable(Converged, "a truth value")


class WarpSync(Op):
    """The lanes of `mask` wait for each other, and see each other's earlier writes
    (numba's `syncwarp`, CUDA's `__syncwarp`)."""

    name = "warp.sync"
    traits = (Convergent, Fence)
    mask = operand()


def _mask_only(types, attrs):
    require(types[0] == u32, f"mask must be u32, not {types[0]}")
    return []


typing_rule(WarpSync, _mask_only)
convergent(WarpSync)
interp_rule(WarpSync, lambda ctx, op, mask: ctx.syncwarp(op, mask))
lower_rule(WarpSync, lambda ctx, op, mask: ctx.target.warp_sync(ctx, op, mask))
# the reverse sweep orders the lanes' shadow updates as the forward sweep ordered their writes
adjoint_rule(WarpSync, lambda ad, op, cts: ad.b.create(WarpSync, ad.primal(op.mask)))
jvp_rule(WarpSync, no_results)


class Match(Op):
    """Which lanes of `mask` hold the same bits of `value` as the calling lane (numba's
    `match_any_sync`, `match_all_sync`; PTX `match.sync`)."""

    traits = (Convergent, ThreadVarying)
    mask = operand()
    value = operand()
    mode = ""   # "any" or "all"


def _match_types(*results):
    def rule(types, attrs):
        require(types[0] == u32, f"mask must be u32, not {types[0]}")
        value = types[1]
        require(isinstance(value, Scalar) and not value.is_bool and value.bits in (32, 64),
                f"matched values are integers or floats of 32 or 64 bits, not {value}")
        return list(results)

    return rule


class MatchAny(Match):
    """The u32 mask of the lanes of `mask` whose value equals the calling lane's."""

    name = "warp.match_any"
    mode = "any"
    result = result()


class MatchAll(Match):
    """(`mask`, true) where every lane of `mask` holds the same value, else (0, false)."""

    name = "warp.match_all"
    mode = "all"
    lanes = result()
    same = result()


def _match_any(ctx, op, mask, value):
    ctx.warp_sync(op, mask)
    return ctx.equal_lanes(value) & np.asarray(mask, np.uint32)


def _match_all(ctx, op, mask, value):
    ctx.warp_sync(op, mask)
    # lanes the mask names that do not run (past a partial warp's end, exited) do not take
    # part, as on the GPU
    named = np.asarray(mask, np.uint32) & ctx.ballot(np.ones(ctx.mask.shape, bool))
    same = (ctx.equal_lanes(value) & named) == named
    return np.where(same, named, np.uint32(0)).astype(np.uint32), same


typing_rule(MatchAny, _match_types(u32))
typing_rule(MatchAll, _match_types(u32, bool_))
interp_rule(MatchAny, _match_any)
interp_rule(MatchAll, _match_all)
lower_rule(Match, lambda ctx, op, mask, value: ctx.target.warp_match(
    ctx, op, op.mode, mask, value))
nondifferentiable(Match, "a lane mask")
convergent(Match)
