"""Per-thread tapes for values the reverse sweep cannot recompute inside small static loops.

A value defined in a loop nest that reads memory written later (a local matrix updated in
place, as in Gaussian elimination), or a loop-carried value that would otherwise be replayed
from the loop's start, is stored by the forward sweep into a per-thread array indexed by the
iteration numbers of its loops, and loaded back by the reverse sweep. This is the "registers
when the count is static and small" half of caching: every loop of the nest must be a `range`
with constant bounds, and the nest at most `CAPACITY` iterations (a static trip count lets LLVM
unroll and keep the tape in registers; otherwise it lives in local memory); a loop may also
start at an enclosing loop's variable (triangular nests: the slot count is the most trips).
Larger or run-time nests keep recomputation, replay, or the compile error naming the line.
"""
from __future__ import annotations

from ..ir.operation import Operation
from ..ir.traits import ConstantLike, CountedLoop, Loop
from ..ir.types import Scalar, i32
from ..ir.values import BlockArgument, Value
from ..ops import arith, memory
from ..passes.common import loop_step

CAPACITY = 512


BOUNDED = 32   # slots for a carried value of one loop with a run-time trip count


class Tape:
    def __init__(self, nest: list, bounds: list, size: int, bounded: bool = False):
        self.nest = nest               # loops, outermost first
        self.bounds = bounds           # (lower: int or Value, step, most trips) per loop
        self.size = size
        self.bounded = bounded         # run-time trips: only the first `size` are kept
        self.array: Value | None = None


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
    """(lower, step, BOUNDED) of a `range` with a constant start and step and a run-time end."""
    if not loop.has_trait(CountedLoop):
        return None
    lower, step = _constant(loop.lower), _constant(loop.step)
    if lower is None or step is None or step <= 0:
        return None
    return lower, step, BOUNDED


def _nest(value: Value) -> list:
    if isinstance(value, BlockArgument):
        owner = value.block.parent_op
        loops = [owner] + [a for a in owner.ancestors()]
    else:
        loops = list(value.owner.ancestors())
    return [op for op in reversed(loops) if op.has_trait(Loop)]


class LocalTapes:
    """Mixed into the reverse transform."""

    def _plan_tapes(self) -> dict:
        tapes: dict = {}
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
                nest = _nest(value)
                bounds = [_static(loop) for loop in nest]
                if len(nest) == 1 and bounds == [None] and isinstance(value, BlockArgument):
                    start = _bounded(nest[0])
                    if start is not None:    # the first BOUNDED trips; later ones replay
                        tapes[value] = Tape(nest, [start], BOUNDED, bounded=True)
                    continue
                if not nest or None in bounds:
                    continue
                size = 1
                for _, _, trips in bounds:
                    size *= trips
                if 0 < size <= CAPACITY:
                    tapes[value] = Tape(nest, bounds, size)
        return tapes

    def _linear(self, indices: list, tape: Tape) -> Value:
        linear, stride = None, 1
        for index, (_, _, trips) in reversed(list(zip(indices, tape.bounds))):
            term = self.b.value(arith.Mul, self.cast(index, i32), self.const(stride, i32))
            linear = term if linear is None else self.b.value(arith.Add, linear, term)
            stride *= trips
        return linear

    def _record_tapes(self, loop: Operation) -> None:
        """After the forward sweep cloned `loop`: store each taped value inside it."""
        for value, tape in self.tapes.items():
            if loop not in tape.nest:
                continue
            if tape.array is None:
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
            slot = self._linear(indices, tape)
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
                                  self._linear([indices[op] for op in tape.nest], tape))
        scope.values[value] = loaded
        return loaded
