"""Loop-invariant code motion: pure, speculatable ops move out of loops."""
from __future__ import annotations

from ..ir.module import Module
from ..ir.operation import Operation
from ..ir.traits import Loop, Pure, Speculatable
from .common import is_inside


class LICM:
    """Move each Pure and Speculatable op of a loop (`Loop` trait: `for` and `while`, from any
    of their regions, at any depth) whose operands are all defined outside the loop to just
    before the loop. Such ops cannot trap, so running them where the loop might run zero
    times, or outside an `if` of the loop, is safe.

    With `speculate=False` (the optimizing stages, which run before differentiation) ops
    inside an `if` of the loop stay: hoisted, a guarded `1 / sqrt(s)` would run where its
    guard fails, and its derivative there (a zero cotangent times an infinite partial) would
    make the gradient NaN. The codegen stage hoists them too.

    Inner loops go first, so an op leaves a nest as far as its operands allow; the pass
    repeats until nothing moves. Loads, stores, atomics, allocations and warp ops stay.
    Verified IR in, verified IR out.
    """

    name = "licm"

    def __init__(self, speculate: bool = False):
        self.speculate = speculate

    def run(self, module: Module) -> bool:
        changed = False
        while True:
            loops = [op for func in module for op in func.walk() if op.has_trait(Loop)]
            moved = [hoist_invariants(loop, self.speculate)
                     for loop in reversed(loops)]  # inner loops first
            if not any(moved):
                return changed
            changed = True


def hoist_invariants(loop: Operation, speculate: bool = True) -> bool:
    """Move the invariant ops of `loop` before it, in program order; whether any moved."""
    assert loop.parent is not None
    moved = False
    for region in loop.regions:
        for op in list(region.walk()):
            if (op.has_trait(Pure) and op.has_trait(Speculatable) and not op.regions
                    and not any(is_inside(value, loop) for value in op.operands)
                    and (speculate or _unconditional(op, loop))):
                op.detach()
                loop.parent.insert_before(loop, op)
                moved = True
    return moved


def _unconditional(op: Operation, loop: Operation) -> bool:
    """Whether `op` runs on every trip of `loop` that reaches it: no `if` between them."""
    for outer in op.ancestors():
        if outer is loop:
            return True
        if not outer.has_trait(Loop):
            return False
    return False
