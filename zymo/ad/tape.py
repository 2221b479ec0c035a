"""Per-thread tapes for values the reverse sweep cannot recompute inside small static loops.

A value defined in a loop nest that reads memory written later (a local matrix updated in
place, as in Gaussian elimination), or a loop-carried value that would otherwise be replayed
from the loop's start, is stored by the forward sweep into a per-thread array indexed by the
iteration numbers of its loops, and loaded back by the reverse sweep. This is the "registers
when the count is static and small" half of caching: every loop of the nest must be a `range`
with constant bounds (either direction), or a `while` loop whose condition bounds a counter
(`most_trips`: `while i < 3`, a `range` with a `break`, either direction; the counter numbers
the trips), and the nest at most `CAPACITY` iterations (a static trip count lets LLVM unroll
and keep the tape in registers; otherwise it lives in local memory); a loop may also start at
an enclosing loop's variable (triangular nests: the slot count is the most trips). Values made
in a while loop's condition region get no slot (it runs once more than the body).
Nests longer than that, and loops with run-time trip counts whose bounds the launch can
compute from its arguments (array extents, scalars, constants), get a global tape instead: one
array per value, allocated by the launch with (iterations of the nest) x (threads of the
launch) elements, laid out [slot][thread] so that a warp's stores and loads coalesce
(`GlobalTape`; `differentiate` reports them). A carried value of a single run-time loop whose
bounds the launch cannot compute keeps its first `BOUNDED` iterations on a per-thread tape and
replays the rest. What is left is the compile error naming the line, with the bound to write
(`keep_hint`).
"""
from __future__ import annotations

import numpy as np

from ..ir.operation import Block, Operation
from ..ir.traits import CountedLoop, Loop
from ..ir.types import Scalar, i64
from ..ir.values import BlockArgument, Value
from ..ops import arith
from ..ops.control import While
from ..ops.registry import INTERP
from ..passes.counted import most_trips
from ..passes.common import loop_step
from ..passes.indexing import host_expression
from .plan import constant

CAPACITY = 512


BOUNDED = 32   # slots for a carried value of one loop with a run-time trip count


class LoopTape:
    """The tape of one value defined in a loop nest, indexed by the iteration numbers of its
    loops (per thread; or global when `trips` is set). `zm.Tape`, the program-level tape of
    launches, is `zymo.runtime.tape.Tape`."""

    def __init__(self, nest: list, bounds: list, size: int, bounded: bool = False,
                 trips: tuple | None = None, dtype=None):
        self.nest = nest               # loops, outermost first
        self.bounds = bounds           # (lower: int or Value, step, most trips) per loop
        self.size = size
        self.bounded = bounded         # run-time trips: only the first `size` are kept
        self.trips = trips             # global tape: host expressions of each loop's trips
        self.dtype = dtype             # global tape: the element type
        self.array: Value | None = None
        self.strides = None


class GlobalTape:
    """What the launch allocates for a global tape: `slots` (a host expression, see
    `host_value`) times the launch's threads elements of `dtype`."""

    def __init__(self, dtype, slots: tuple):
        self.dtype, self.slots = dtype, slots


def host_value(expr: tuple, argument):
    """Evaluate a host expression (`host_expression`): leaves ("const", n), ("arg", i),
    ("dim", i, axis) through `argument(source)`; ("apply", op class, *operands) by the op's
    interp rule on int64 scalars."""
    if expr[0] != "apply":
        return argument(expr)
    values = [host_value(e, argument) for e in expr[2:]]
    if None in values:
        return None
    cls = expr[1]
    block = Block()
    operands = [block.add_arg(i64) for _ in values]
    op = cls(operands, cls.infer_types([i64] * len(values), {}), {}, [], id="host")
    return int(INTERP[cls](None, op, *(np.int64(v) for v in values)))


def _host_trips(loop: Operation, params) -> tuple | None:
    """max(0, ceil((upper - lower) / step)) as a host expression; a start that is an enclosing
    loop's variable counts from its least value (an upper bound of the trips)."""
    if not loop.has_trait(CountedLoop):
        return None
    upper, step = host_expression(loop.upper, params), host_expression(loop.step, params)
    lower = host_expression(loop.lower, params)
    if lower is None:
        least = _smallest(loop.lower)
        lower = None if least is None else ("const", least)
    if None in (lower, upper, step) or constant(loop.step) in (None, 0):
        return None
    # ceil((upper - lower) / step) for either sign of the step
    return ("apply", arith.Max, ("const", 0), ("apply", arith.Sub, ("const", 0), (
        "apply", arith.FloorDiv, ("apply", arith.Sub, lower, upper), step)))


def _smallest(value: Value):
    """The least value `value` takes: a constant, the variable of a static `range`, or a sum
    of these (a lower bound; `Add` of two range variables only adds their least values)."""
    known = constant(value)
    if known is not None:
        return known
    if not isinstance(value, BlockArgument):
        op = value.owner
        if isinstance(op, arith.Add):         # k + 1: the least k, plus the constant
            parts = [_smallest(v) for v in op.operands]
            return None if None in parts else sum(parts)
        return None
    if value.index != 0:
        return None
    loop = value.block.parent_op
    bounds = _static(loop) if loop.has_trait(CountedLoop) else None
    return None if bounds is None else _smallest(loop.lower)


def _static(loop: Operation):
    """(lower, step, most trips) of a `range` with constant bounds (either direction), or a
    constant step and end whose start is the variable of an enclosing static `range` (a
    triangular nest), or of a while
    loop whose condition bounds a counter (`most_trips`: `while i < 3`, a `range` with a
    `break`)."""
    if not loop.has_trait(CountedLoop):
        found = most_trips(loop) if isinstance(loop, While) else None
        return None if found is None else found[1:]
    upper, step = constant(loop.upper), constant(loop.step)
    lower = constant(loop.lower)
    if upper is not None and step is not None and step < 0 and lower is not None:
        return lower, step, max(0, -((upper - lower) // -step))   # counting down
    least = _smallest(loop.lower)
    if upper is None or step is None or least is None or step <= 0:
        return None
    return (loop.lower if lower is None else lower), step, max(0, -((least - upper) // step))


def iteration_variable(loop: Operation) -> BlockArgument:
    """The body argument whose value numbers the trips (`(value - lower) // step`, with
    `_static`'s bounds): a `range`'s variable, a bounded while loop's counter."""
    body = loop.regions[-1].block
    return body.args[0] if loop.has_trait(CountedLoop) else body.args[most_trips(loop)[0]]


def _bounded(loop: Operation):
    """(lower, step, BOUNDED) of a `range` with a constant step (either sign): iteration
    (iv - lower) // step; a run-time start is read where the loop begins."""
    if not loop.has_trait(CountedLoop):
        return None
    step = constant(loop.step)
    if step is None or step == 0:
        return None
    lower = constant(loop.lower)
    return (loop.lower if lower is None else lower), step, BOUNDED


def _global_bounds(loop: Operation, params) -> tuple | None:
    """(lower, step, host expression of the most trips) of a loop in a global tape's nest:
    `_static`'s bounds as constants, else a `range` whose trips the launch computes."""
    static = _static(loop)
    if static is not None:
        return static[0], static[1], ("const", static[2])
    trips, start = _host_trips(loop, params), _bounded(loop)
    return None if trips is None or start is None else (start[0], start[1], trips)


def _nest(value: Value) -> list:
    if isinstance(value, BlockArgument):
        owner = value.block.parent_op
        loops = [owner] + [a for a in owner.ancestors()]
    else:
        loops = list(value.owner.ancestors())
    return [op for op in reversed(loops) if op.has_trait(Loop)]


def keep_hint(op: Operation) -> str | None:
    """What to write so that the values made at `op` inside loops can go on a per-thread tape
    (a compile error's hint): a bound the compiler can see for a loop without one, or a
    smaller nest; None outside loops."""
    nest = [a for a in reversed(list(op.ancestors())) if a.has_trait(Loop)]
    if not nest:
        return None
    unbounded = [loop for loop in nest if _static(loop) is None]
    if unbounded:
        loop = unbounded[-1]
        return (f"give the loop at line {loop.loc.line} a bound the compiler can see: `for k in "
                f"range(64):` with a `break` where it should stop (e.g. `if k >= n[i]: "
                f"break`); the values of each trip then go on a per-thread tape (at most "
                f"{CAPACITY} trips of the loops around it in all)")
    trips = 1
    for loop in nest:
        trips *= _static(loop)[2]
    if trips <= CAPACITY:
        return None    # not a question of bounds
    return (f"the loops around it make {trips} trips in all and a per-thread tape holds "
            f"{CAPACITY}: split the loop nest, or compute the value from arrays that are not "
            f"overwritten")


def _in_condition(value: Value, loop: Operation) -> bool:
    """`value` is made in the condition region of while loop `loop` (or nested in it)."""
    block = value.block if isinstance(value, BlockArgument) else value.owner.parent
    while block is not None and block.parent is not None:
        if block.parent is loop.regions[0]:
            return True
        op = block.parent_op
        block = op.parent if op is not None else None
    return False


def plan_tapes(plan, global_filter: set | None) -> dict:
    """The tape of each value that gets one (`plan`: the transform's `AccessPlan`). Stores to
    a global tape are not dead code for LLVM, so `differentiate` transforms twice when a
    global tape went unread: `global_filter` names the values the first reverse sweep loaded."""
    tapes: dict = {}
    func = plan.func
    kernel = func.attrs.get("kind") == "kernel"   # launches allocate tapes
    # every candidate is stored; LLVM drops the tapes the reverse sweep never loads
    for op in func.body.walk():
        candidates = []
        if op.has_trait(Loop):
            offset = 1 if op.has_trait(CountedLoop) else 0
            body = op.regions[-1].block
            for k, arg in enumerate(body.args[offset:]):
                if loop_step(op, arg, body.ops[-1].operands[k]) is None:
                    candidates.append(arg)
        if op.results and op.parent is not func.body.block and plan.not_recomputable(op):
            candidates += list(op.results)
        for value in candidates:
            if not isinstance(value.type, Scalar):
                continue
            # a loop reversed iteration by iteration keeps its values: no slot per iteration
            nest = [loop for loop in _nest(value) if loop not in plan.fused]
            if any(isinstance(loop, While) and _in_condition(value, loop) for loop in nest):
                continue   # the condition runs once more than the body: no slot for that run
            if not nest:
                continue
            bounds = [_static(loop) for loop in nest]
            if None not in bounds:
                size = 1
                for _, _, trips in bounds:
                    size *= trips
                if size <= CAPACITY:   # a loop that never runs (size 0) stores nothing
                    tapes[value] = LoopTape(nest, bounds, size)
                    continue
            # too many trips for a thread's tape, or trips known only at run time
            ranges = [_global_bounds(loop, func.body.block) for loop in nest]
            if kernel and None not in ranges and (global_filter is None
                                                  or value in global_filter):
                tapes[value] = LoopTape(nest, [(r[0], r[1], None) for r in ranges], 0,
                                        trips=tuple(r[2] for r in ranges), dtype=value.type)
            elif None in bounds and len(nest) == 1 and isinstance(value, BlockArgument) \
                    and _bounded(nest[0]) is not None:   # first BOUNDED trips; then replay
                tapes[value] = LoopTape(nest, [_bounded(nest[0])], BOUNDED, bounded=True)
    return tapes
