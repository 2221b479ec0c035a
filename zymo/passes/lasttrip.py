"""Loops whose trips all compute the same values run once.

A counted loop whose body reads none of its carried values and has no effects computes, on
every trip, the same values from the same operands: its results are the last trip's, which
are the first trip's. LULESH's EOS evaluates its pressure and energy `rep` times that way (its
cost model), and so do timing loops:

    for _ in range(rep):                 if 0 < rep:
        p, e = energy(p_old, e_old)  ->      p, e = energy(p_old, e_old)
                                         else:
                                             p, e = p0, e0   # the values before the loop

The reverse sweep gains most: it would run the body's adjoint once per trip, every trip but
the last with zero cotangents (each trip's values are overwritten by the next). Enzyme sees
the loop after LLVM's optimizations; this is where zymo's own passes do the same, before
differentiation, so the primal and its derivative run the body once alike.

Recognised: a `for` with results whose carried values are unused in the body, or only handed
on unchanged (a value the loop never changes); the body may read memory (nothing in the loop
writes it) but has no effects (`common.may_have_effects`: stores, atomics, barriers, warp
ops, calls, `while` loops, errors). A body that uses the induction variable needs the last
trip's value: taken for steps 1 and -1 (upper - 1, upper + 1, which cannot wrap), otherwise
the loop stays. The guard needs the step's sign: a constant step. Verified IR in, verified IR
out.
"""
from __future__ import annotations

from ..ir.builder import Builder
from ..ir.module import Module
from ..ir.operation import Region
from ..ir.types import Scalar
from ..ir.values import Value
from ..ops.arith import Add, Cmp, Constant, Sub
from ..ops.control import For, If, Yield
from .common import constant_of, may_have_effects, terminator


class LastTrip:
    """Replace each loop whose trips all compute the same values by one run of its body,
    under `if` the loop runs at all (see the module docstring)."""

    name = "last-trip"

    def run(self, module: Module) -> bool:
        changed = False
        for func in module:
            # inner loops first: an outer loop's body then holds their single runs
            for loop in reversed([op for op in func.walk() if isinstance(op, For)]):
                found = _same_every_trip(loop)
                if found is not None:
                    _run_once(loop, *found)
                    changed = True
        return changed


def _same_every_trip(loop: For) -> tuple[int, bool] | None:
    """(the constant step, whether the body uses the induction variable) when every trip of
    `loop` computes the same values; else None."""
    if not loop.results or may_have_effects(loop):
        return None
    step = constant_of(loop.step)
    iv_type = loop.lower.type
    if step is None or int(step) == 0 or not isinstance(iv_type, Scalar) \
            or not iv_type.is_signed:
        return None
    body = loop.body.block
    term = terminator(loop.body)
    for k, arg in enumerate(body.args[1:]):
        if any(use.operation is not term or use.index != k for use in arg.uses):
            return None      # read by the body (or handed to another carried value)
    uses_iv = body.args[0].has_uses
    if uses_iv and int(step) not in (1, -1):
        return None
    return int(step), uses_iv


def _run_once(loop: For, step: int, uses_iv: bool) -> None:
    b = Builder()
    b.loc = loop.loc
    body = loop.body.block
    term = terminator(loop.body)
    inits = list(loop.inits)
    with b.before(loop):
        runs = b.value(Cmp, loop.lower, loop.upper, predicate="lt" if step > 0 else "gt")
    once = Region()
    with b.at_end(once.block):
        mapping: dict[Value, Value] = dict(zip(body.args[1:], inits))
        if uses_iv:   # the last trip's value: upper - 1 (step 1) or upper + 1 (step -1)
            one = b.value(Constant, value=1, type=loop.lower.type)
            mapping[body.args[0]] = b.value(Sub if step > 0 else Add, loop.upper, one)
        for op in body.ops:
            if op is not term:
                b.insert(op.clone(mapping))
        b.create(Yield, *(mapping.get(v, v) for v in term.operands),
                 result_types=[])
    skipped = Region()
    with b.at_end(skipped.block):
        b.create(Yield, *inits, result_types=[])
    with b.before(loop):
        guarded = b.create(If, runs, result_types=[r.type for r in loop.results],
                           regions=[once, skipped])
    for old, new in zip(loop.results, guarded.results):
        old.replace_all_uses_with(new)
    loop.erase()
