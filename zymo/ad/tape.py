"""Per-thread tapes for values the reverse sweep cannot recompute inside small static loops.

A value defined in a loop nest that reads memory written later (a local matrix updated in
place, as in Gaussian elimination), or a loop-carried value that would otherwise be replayed
from the loop's start, is stored by the forward sweep into a per-thread array indexed by the
iteration numbers of its loops, and loaded back by the reverse sweep. This is the "registers
when the count is static and small" half of caching: every loop of the nest must be a `range`
with constant bounds, and the nest at most `CAPACITY` iterations (a static trip count lets LLVM
unroll and keep the tape in registers; otherwise it lives in local memory); a loop may also
start at an enclosing loop's variable (triangular nests: the slot count is the most trips).
Loops with run-time trip counts whose bounds the launch can compute from its arguments (array
extents, scalars, constants) get a global tape instead: one array per value, allocated by the
launch with (iterations of the nest) x (threads of the launch) elements, laid out [slot][thread]
so that a warp's stores and loads coalesce (`GlobalTape`; `differentiate` reports them). A
carried value of a single run-time loop whose bounds the launch cannot compute keeps its first
`BOUNDED` iterations on a per-thread tape and replays the rest. What is left is the compile
error naming the line.
"""
from __future__ import annotations

import numpy as np

from ..ir.operation import Block, Operation
from ..ir.traits import ConstantLike, CountedLoop, Loop
from ..ir.types import Scalar, i32, i64
from ..ir.values import BlockArgument, Value
from ..ops import arith, memory, thread
from ..ops.registry import INTERP
from ..passes.common import loop_step
from ..passes.indexing import host_expression

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
    if None in (lower, upper, step) or _constant(loop.step) in (None, 0):
        return None
    # ceil((upper - lower) / step) for either sign of the step
    return ("apply", arith.Max, ("const", 0), ("apply", arith.Sub, ("const", 0), (
        "apply", arith.FloorDiv, ("apply", arith.Sub, lower, upper), step)))


def _constant(value: Value):
    if isinstance(value, BlockArgument) or not value.owner.has_trait(ConstantLike):
        return None
    return value.owner.value


def _smallest(value: Value):
    """The least value `value` takes: a constant, the variable of a static `range`, or a sum
    of these (a lower bound; `Add` of two range variables only adds their least values)."""
    constant = _constant(value)
    if constant is not None:
        return constant
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
    """(lower, step, most trips) of a `range` with a constant step and end whose start is a
    constant or the variable of an enclosing static `range` (a triangular nest)."""
    if not loop.has_trait(CountedLoop):
        return None
    upper, step = _constant(loop.upper), _constant(loop.step)
    least = _smallest(loop.lower)
    if upper is None or step is None or least is None or step <= 0:
        return None
    lower = _constant(loop.lower)
    return (loop.lower if lower is None else lower), step, max(0, -((least - upper) // step))


def _bounded(loop: Operation):
    """(lower, step, BOUNDED) of a `range` with a constant step (either sign): iteration
    (iv - lower) // step; a run-time start is read where the loop begins."""
    if not loop.has_trait(CountedLoop):
        return None
    step = _constant(loop.step)
    if step is None or step == 0:
        return None
    lower = _constant(loop.lower)
    return (loop.lower if lower is None else lower), step, BOUNDED


def _nest(value: Value) -> list:
    if isinstance(value, BlockArgument):
        owner = value.block.parent_op
        loops = [owner] + [a for a in owner.ancestors()]
    else:
        loops = list(value.owner.ancestors())
    return [op for op in reversed(loops) if op.has_trait(Loop)]


class LocalTapes:
    """Mixed into the reverse transform. Stores to a global tape are not dead code for LLVM,
    so `differentiate` transforms twice when a global tape went unread: `global_filter`
    names the values the first reverse sweep loaded."""

    global_filter: set | None = None

    def _plan_tapes(self) -> dict:
        tapes: dict = {}
        self.tapes_loaded: set = set()
        kernel = self.primal_func.attrs.get("kind") == "kernel"   # launches allocate tapes
        # every candidate is stored; LLVM drops the tapes the reverse sweep never loads
        for op in self.primal_func.body.walk():
            candidates = []
            if op.has_trait(Loop):
                offset = 1 if op.has_trait(CountedLoop) else 0
                body = op.regions[-1].block
                for k, arg in enumerate(body.args[offset:]):
                    if loop_step(op, arg, body.ops[-1].operands[k]) is None:
                        candidates.append(arg)
            if op.results and op.parent is not self.primal_func.body.block \
                    and self._not_recomputable(op):
                candidates += list(op.results)
            for value in candidates:
                if not isinstance(value.type, Scalar):
                    continue
                # a loop reversed iteration by iteration keeps its values: no slot per iteration
                nest = [loop for loop in _nest(value) if loop not in self.fused]
                bounds = [_static(loop) for loop in nest]
                if nest and None in bounds:
                    params = self.primal_func.body.block
                    trips = [_host_trips(loop, params) for loop in nest]
                    starts = [_bounded(loop) for loop in nest]
                    if kernel and None not in trips and None not in starts and (
                            self.global_filter is None or value in self.global_filter):
                        tapes[value] = LoopTape(nest, [(s[0], s[1], None) for s in starts],
                                                0, trips=tuple(trips), dtype=value.type)
                    elif len(nest) == 1 and isinstance(value, BlockArgument) \
                            and starts[0] is not None:   # first BOUNDED trips; then replay
                        tapes[value] = LoopTape(nest, [starts[0]], BOUNDED, bounded=True)
                    continue
                if not nest:
                    continue
                size = 1
                for _, _, trips in bounds:
                    size *= trips
                if 0 < size <= CAPACITY:
                    tapes[value] = LoopTape(nest, bounds, size)
        return tapes

    def global_tapes(self) -> list:
        return [t for t in self.tapes.values() if t.trips is not None]

    def _tape_element(self, indices: list, tape: LoopTape) -> Value:
        """The tape element of these iteration numbers: per-thread tapes by iteration; global
        ones [slot][thread], the slot's stride the launch's thread count."""
        if tape.trips is None:
            return self._linear(indices, tape)
        if tape.strides is None:
            with self._at_entry():
                trips = [self._emit_host(t) for t in tape.trips]
                strides, stride = [], self.const(1, i64)
                for t in reversed(trips):
                    strides.append(stride)
                    stride = self.b.value(arith.Mul, stride, t)
                tape.strides = list(reversed(strides))
                if getattr(self, "_threads", None) is None:
                    self._threads = self._global_thread()
        slot = None
        for index, stride in zip(indices, tape.strides):
            term = self.b.value(arith.Mul, self.cast(index, i64), stride)
            slot = term if slot is None else self.b.value(arith.Add, slot, term)
        linear, count = self._threads
        return self.b.value(arith.Add, self.b.value(arith.Mul, slot, count), linear)

    def _global_thread(self):
        """(this thread's linear index in the launch, the launch's thread count), i64."""
        linear, count = None, None
        for axis in "xyz":
            extent = self.b.value(arith.Mul, self.cast(self.b.value(thread.GridDim, axis=axis),
                                                       i64),
                                  self.cast(self.b.value(thread.BlockDim, axis=axis), i64))
            gid = self.b.value(arith.Add, self.b.value(arith.Mul, self.cast(
                self.b.value(thread.BlockIdx, axis=axis), i64), self.cast(
                self.b.value(thread.BlockDim, axis=axis), i64)), self.cast(
                self.b.value(thread.ThreadIdx, axis=axis), i64))
            if linear is None:
                linear, count = gid, extent
            else:
                linear = self.b.value(arith.Add, linear, self.b.value(arith.Mul, gid, count))
                count = self.b.value(arith.Mul, count, extent)
        return linear, count

    def _emit_host(self, expr: tuple) -> Value:
        """A host expression computed in the kernel from its arguments (i64)."""
        kind = expr[0]
        if kind == "const":
            return self.const(expr[1], i64)
        if kind == "arg":
            return self.cast(self.fwd[self.primal_func.args[expr[1]]], i64)
        if kind == "dim":
            return self.cast(self.b.value(memory.Dim, self.fwd[self.primal_func.args[expr[1]]],
                                          axis=expr[2]), i64)
        return self.b.value(expr[1], *(self._emit_host(e) for e in expr[2:]))

    def _linear(self, indices: list, tape: LoopTape) -> Value:
        linear, stride = None, 1
        for index, (_, _, trips) in reversed(list(zip(indices, tape.bounds))):
            term = self.b.value(arith.Mul, self.cast(index, i32), self.const(stride, i32))
            linear = term if linear is None else self.b.value(arith.Add, linear, term)
            stride *= trips
        return linear

    def _record_tapes(self, loop: Operation) -> None:
        """After the forward sweep cloned `loop`: store each taped value inside it."""
        for value, tape in self.tapes.items():
            if not tape.nest or tape.nest[0] is not loop and loop not in tape.nest[0].ancestors():
                continue
            if tape.array is None and tape.trips is None:
                with self._at_entry():
                    tape.array = self.b.value(memory.LocalAlloc, shape=(tape.size,),
                                              dtype=value.type)
                    tape.array.name_hint = "tape"
            copy = self.fwd[value]
            saved = (self.b.block, self.b.index)
            if isinstance(copy, BlockArgument):
                self.b.block, self.b.index = copy.block, 0
            else:
                block = copy.owner.parent
                self.b.block, self.b.index = block, block.ops.index(copy.owner) + 1
            indices = []
            for nested, (lower, step, _) in zip(tape.nest, tape.bounds):
                iv = self.fwd[nested.regions[-1].block.args[0]]
                start = self.fwd[lower] if isinstance(lower, Value) else self.const(lower,
                                                                                    iv.type)
                indices.append(self.b.value(arith.FloorDiv, self.b.value(
                    arith.Sub, iv, start), self.const(step, iv.type)))
            slot = self._tape_element(indices, tape)
            if tape.bounded:
                kept = self.cmp(slot, self.const(tape.size, i32), "lt")
                self._when(kept, lambda: self.b.create(memory.Store, tape.array, slot, copy))
            else:
                self.b.create(memory.Store, tape.array, slot, copy)
            self.b.block, self.b.index = saved

    def _from_tape(self, scope, value: Value) -> Value | None:
        tape = self.tapes[value]
        if tape.bounded:
            return None
        indices, current = {}, scope
        while current is not None:
            if current.loop is not None and current.loop.op in tape.nest:
                indices.setdefault(current.loop.op, current.loop.index)
            current = current.parent
        if tape.array is None or len(indices) != len(tape.nest):
            return None
        with self._prologue(scope):
            loaded = self.b.value(memory.Load, tape.array,
                                  self._tape_element([indices[op] for op in tape.nest], tape))
        scope.values[value] = loaded
        self.tapes_loaded.add(value)
        return loaded
