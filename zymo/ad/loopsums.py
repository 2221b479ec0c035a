"""Cotangents of reads at addresses that enclosing loops do not change, summed per thread
before they reach memory (Enzyme's "atomics reduced before global memory", one level up: the
loop instead of the warp).

The DG kernel reads `s_D[k, n]` in `for s: for n:`: every thread, every state s, the same
element; its reverse made one warp reduction and shared atomic per (k, s, n). The read's
cotangent does not depend on s to reach its element, so each thread sums it over s in a
per-thread array indexed by n (`private.Accumulator`, registers once unrolled) and makes one
update per element after the loop over s: five times fewer. `s_D[n, i]` in `for k: for n:`
is summed over k the same way (one shared atomic per n instead of per (k, n)).

A read qualifies (mode "uniform", "grouped" or "atomic": the plain mode has its own
accumulators) when
- it sits directly in the body of a counted loop L, whose variable is exactly one of its
  indices, with bounds fixed for the whole kernel and a constant positive step;
- `outer`, the loop the sums span, is the outermost of L's enclosing loops, each directly in
  the next one's body (so that L runs in each of their iterations), that are counted loops with
  bounds fixed for the kernel and define none of the read's other indices;
- nothing inside `outer` writes the array (a store's adjoint would read the shadow, which
  must then hold every cotangent added before it).
The flush runs only where every loop of the chain ran (else an index may not exist).

ZYMO_AD_LOOP_SUMS=0 turns it off, =uniform or =atomic keeps one mode (to measure them): in
DG, summing the atomic-mode reads over the k loop keeps ten sums live across the loop's
reverse, and ptxas then took 238 registers instead of 168 (fewer 25-thread blocks per SM)."""
from __future__ import annotations

import os

from ..ir.traits import ConstantLike, CountedLoop, Loop
from ..ir.values import BlockArgument
from ..passes.common import is_inside
from ..passes.indexing import Uniform
from ..switches import OFF


def modes() -> tuple:
    """The read modes summed: ZYMO_AD_LOOP_SUMS unset or "1": both; "uniform" or "atomic":
    that one; "0": none."""
    value = os.environ.get("ZYMO_AD_LOOP_SUMS", "1").strip().lower()
    if value in OFF:
        return ()
    # "grouped" reads (shared by runs of lanes) and "transposed" ones go with the atomic ones
    return {"uniform": ("uniform",), "atomic": ("atomic", "grouped", "transposed")}.get(
        value, ("uniform", "atomic", "grouped", "transposed"))


def plan(forms, read_modes: dict, writes: dict, array_class) -> dict:
    """read -> its `Accumulator` (from `private`), for the reads that qualify."""
    from .private import Accumulator
    found = {}
    summed = modes()
    for op, mode in read_modes.items():
        if mode not in summed:
            continue
        loop = op.parent.parent_op
        if not _fixed_counted(loop, forms) or op.parent is not loop.regions[-1].block:
            continue
        step = loop.step
        if isinstance(step, BlockArgument) or not step.owner.has_trait(ConstantLike) \
                or step.owner.value <= 0:
            continue
        iv = loop.regions[-1].block.args[0]
        positions = [k for k, index in enumerate(op.indices) if index is iv]
        others = [index for index in op.indices if index is not iv]
        if len(positions) != 1:
            continue
        written = writes.get(array_class(op.array), ())
        chain, current = [], loop
        while True:
            parent = current.parent.parent_op
            if parent is None or not parent.has_trait(Loop) \
                    or current.parent is not parent.regions[-1].block \
                    or not _fixed_counted(parent, forms) \
                    or any(is_inside(index, parent) for index in others) \
                    or any(is_inside_op(w, parent) for w in written):
                break
            chain.append(parent)
            current = parent
        if chain:
            found[op] = Accumulator(loop, positions[0], chain[-1], mode=mode,
                                    chain=tuple(chain))
    return found


def _fixed_counted(loop, forms) -> bool:
    """A counted loop whose bounds are the same in every thread, for the whole kernel."""
    return loop is not None and loop.has_trait(CountedLoop) and all(
        isinstance(forms.form(v), Uniform) and forms.form(v).invariant
        for v in (loop.lower, loop.upper, loop.step))


def is_inside_op(op, loop) -> bool:
    return any(a is loop for a in op.ancestors())
