"""Dead code elimination: unused effect-free ops, dead branches and loops, dead carried values."""
from __future__ import annotations

from ..ir.module import Module
from ..ir.operation import Block, Operation
from ..ir.traits import Conditional, CountedLoop, Terminator
from ..ir.values import Value
from .common import may_have_effects, rebuild, terminator


class DCE:
    """Remove ops whose results are unused and whose removal nobody can observe:

    - pure ops, constants, loads and allocations (`common.may_have_effects` says which);
    - `if`s and counted `for` loops whose regions hold only such ops. `while` loops stay:
      they may not terminate. Ops with WritesMemory, Atomic, Barrier or Convergent, calls
      and ops no trait describes are kept, and so is what they use;
    - unused results of an `if` (dropped from both branches' yields);
    - dead carried values of a `for`: the result is unused and the block argument reaches,
      through effect-free ops of the body's block, only the yields of dead carried values.

    Blocks are swept backwards, so a chain of dead ops goes in one sweep; sweeps repeat while
    dropping carried values frees more. Verified IR in, verified IR out.
    """

    name = "dce"

    def run(self, module: Module) -> bool:
        changed = False
        while True:
            swept = [self._sweep(func.regions[0].block) for func in module]  # sweep them all
            if not any(swept):
                return changed
            changed = True

    def _sweep(self, block: Block) -> bool:
        changed = False
        for op in reversed(list(block.ops)):
            if op.has_trait(Terminator):
                continue
            if not any(result.has_uses for result in op.results) and not may_have_effects(op):
                op.erase()
                changed = True
                continue
            if op.has_trait(Conditional):
                op, dropped = drop_unused_if_results(op)
                changed |= dropped
            if op.has_trait(CountedLoop):
                op, dropped = drop_dead_carried_values(op)
                changed |= dropped
            for region in op.regions:
                changed |= self._sweep(region.block)
        return changed


def drop_unused_if_results(op: Operation) -> tuple[Operation, bool]:
    """The `if` without its unused results, and whether any were dropped."""
    keep = [r.index for r in op.results if r.has_uses]
    if len(keep) == len(op.results):
        return op, False
    for region in (op.then_region, op.else_region):
        term = terminator(region)
        term.set_operands([term.operands[k] for k in keep])
    return rebuild(op, list(op.operands), [op.results[k].type for k in keep], keep), True


def drop_dead_carried_values(op: Operation) -> tuple[Operation, bool]:
    """The `for` without its dead carried values, and whether any were dropped."""
    body = op.body.block
    term = terminator(op.body)
    dead = {result.index for result in op.results if not result.has_uses}
    slices: dict[int, list[Operation] | None] = {}
    while dead:  # dropping one value may show that another one feeds a live value
        slices = {k: carried_slice(body, term, k, dead) for k in dead}
        live = {k for k, ops in slices.items() if ops is None}
        if not live:
            break
        dead -= live
    if not dead:
        return op, False
    keep = [r.index for r in op.results if r.index not in dead]
    term.set_operands([term.operands[k] for k in keep])
    doomed = {inner for k in dead for inner in slices[k] or ()}
    for inner in reversed(body.ops):
        if inner in doomed:
            inner.erase()
    for k in sorted(dead, reverse=True):
        body.erase_arg(1 + k)
    inits = list(op.inits)
    operands = [op.lower, op.upper, op.step, *(inits[k] for k in keep)]
    return rebuild(op, operands, [op.results[k].type for k in keep], keep), True


def carried_slice(body: Block, term: Operation, index: int,
                  dead: set[int]) -> list[Operation] | None:
    """The ops of `body` that carried value `index` reaches, when they are effect-free ops
    of the body's own block whose values end only in the yield slots `dead`; else None."""
    reached: dict[Operation, None] = {}  # ordered set
    pending: list[Value] = [body.args[1 + index]]
    while pending:
        for use in pending.pop().uses:
            user = use.operation
            if user is term:
                if use.index not in dead:
                    return None
            elif user.parent is not body or user.regions or may_have_effects(user):
                return None
            elif user not in reached:
                reached[user] = None
                pending.extend(user.results)
    return list(reached)
