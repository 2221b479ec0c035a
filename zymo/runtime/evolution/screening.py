"""What a variant that claims a speedup must pass beyond its evaluation: the interpreter's race
check (a variant with a race can pass any number of runs on a GPU) and confirmations on other
fresh inputs (one evaluation is a sample)."""
from __future__ import annotations

import math
import time
from collections import OrderedDict

import numpy as np

from ...diagnostics import RaceError
from ..kernel import Kernel
from . import spent
from .evaluate import evaluate
from .guards import UNWRITTEN, unwritten
from .timing import time_side_by_side
from .validation import (Fitness, Task, array_uses, default_check, fresh_inputs,
                         nonfinite_where_finite, overwritten_inputs)
from .worker import inputs_key, original_on, run, variant_of

OPS_ALLOWED = 5        # a variant's executed ops on the interpreter, per op of the original
PAIRED_ROUNDS = 3      # rounds of a would-be leader's timing against the original
SECOND_POISON = 0x5A   # a second pattern of uninitialised memory: positive integers, finite floats
# per worker, by `inputs_key`: the original's interpreted run, and whether its results change
# with the pattern of uninitialised memory
_interpreted_originals: OrderedDict = OrderedDict()
_original_reads_unwritten: dict = {}


def interpreted(task: Task) -> Fitness:
    """The variant on the reference interpreter, on `task.inputs` (meant to be small): it must
    run free of data races, out-of-bounds accesses and divergent barriers, within OPS_ALLOWED
    times the ops the original executes, and compute what the original computes there,
    whatever its shared and local memory held before the launch. (When the original itself
    races there, the check is passed with a note: it would hold the variant to more than the
    original.)"""
    from ...backend import interp
    began = time.perf_counter()
    original = original_on(task.kernel, "interp")
    try:
        args, expected, ops = _interpreted_original(original, task)
    except RaceError as error:     # nothing to hold the variant to
        return Fitness(True, math.inf, 0.0, reason=f"not checked: the original races ({error})"
                       [:300], seconds=time.perf_counter() - began)
    variant = variant_of(original, task.edits, False)
    limit = OPS_ALLOWED * ops + 10_000
    try:
        with interp.settings(max_ops=limit):
            got = run(variant, task.launch, args, "interp")
    except Exception as error:    # the variant's fault
        return Fitness(False, reason=f"{type(error).__name__}: {str(error)[:200]}",
                       seconds=time.perf_counter() - began, race=tuple(getattr(error, "ops", ())))
    changed = overwritten_inputs(original, args, got)
    written, read = array_uses(original, args)
    left = unwritten(sorted(written - read), args, expected, got)
    if left is not None:
        return Fitness(False, math.inf, math.inf, reason=f"{UNWRITTEN} {left} unwritten where "
                       f"the original writes it (on the interpreter)",
                       seconds=time.perf_counter() - began)
    error = math.inf if changed or nonfinite_where_finite(expected, got) else \
        float((task.check or default_check)(expected, got))
    if math.isfinite(error) and _reads_unwritten(original, variant, task, args, got, limit):
        return Fitness(False, math.inf, math.inf, reason="reads shared or local memory that "
                       "nothing wrote (outputs change with its initial contents)",
                       seconds=time.perf_counter() - began)
    return Fitness(math.isfinite(error), math.inf, error,
                   reason="" if math.isfinite(error) else "outputs differ on the interpreter",
                   seconds=time.perf_counter() - began)


def screened(race: Task | None, confirmations: tuple, tolerance: float,
             paired: Task | None = None) -> Fitness:
    """What a variant that claims to be faster must pass before it may enter the population:
    the interpreter's race check (`race`, when there are race-check inputs) and `confirmations`,
    untimed evaluations on other fresh inputs. One evaluation is a sample: a variant wrong on
    one input in a thousand passes it most of the time, and the fitness cache would keep that
    verdict for the rest of the search. The first failure, else the largest error.

    A would-be leader's time is a sample too (one lucky evaluation led a SIMCoV search for 30
    generations at a speedup that side by side was 1.00x): with `paired`, a variant that
    passes is timed again against the original in alternation on the same inputs
    (PAIRED_ROUNDS rounds), and the verdict carries both medians (`Fitness.paired`)."""
    began, before = time.perf_counter(), spent.mark()
    verdicts: list[Fitness] = []
    for check, task in [(interpreted, race)] * (race is not None) + \
            [(evaluate, t) for t in confirmations]:
        if check is interpreted:
            with spent.timed("interpreter"):
                verdict = check(task)
        else:
            verdict = check(task)
        if verdict.valid and verdict.error > tolerance:
            verdict = Fitness(False, math.inf, verdict.error, f"{task.label}: outputs differ"
                              if task.label else "outputs differ")
        verdicts.append(verdict)
        if not verdict.valid:
            break
    verdict = max(verdicts, key=lambda v: (not v.valid, v.error),
                  default=Fitness(True, math.inf, 0.0))
    times = ()
    if verdict.valid and paired is not None:
        times = time_side_by_side(paired.kernel, paired.edits, paired.inputs, paired.launch,
                                  paired.seed, paired.backend, rounds=PAIRED_ROUNDS,
                                  repeats=paired.repeats)
    seconds = time.perf_counter() - began
    return Fitness(verdict.valid, math.inf, verdict.error, verdict.reason, seconds,
                   poisons_worker=verdict.poisons_worker, race=verdict.race, paired=times,
                   spent=spent.since(before, seconds))


def _interpreted_original(original: Kernel, task: Task) -> tuple[list, list, int]:
    """(inputs, the original's results, its executed ops) on the interpreter for the task's
    inputs and seed; kept for the next check with the same ones (the search draws the race
    check's inputs once)."""
    from ...backend import interp
    key = inputs_key(original, task)
    found = _interpreted_originals.get(key) if key is not None else None
    if found is None:
        args = fresh_inputs(original, task)
        counts: dict = {}
        with interp.settings(counts=counts):
            expected = run(original, task.launch, args, "interp")
        found = (args, expected, sum(counts.values()))
        if key is None:
            return found
        _interpreted_originals[key] = found
        if len(_interpreted_originals) > 4:
            _interpreted_originals.popitem(last=False)
    return found


def _reads_unwritten(original: Kernel, variant: Kernel, task: Task, args, got,
                     limit: int) -> bool:
    """Whether the variant's results on `args` change when its shared and local memory start
    from another pattern (a GPU leaves there whatever the last kernel did): a variant that lets
    a clearing go and reads what was there must not pass because the interpreter's first
    pattern happens to serve. The original is held to nothing it does not do itself."""
    from ...backend import interp

    def differ(first, second):
        return any(isinstance(a, np.ndarray) and
                   not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
                   for a, b in zip(first, second))

    try:
        with interp.settings(poison=SECOND_POISON, max_ops=limit):
            if not differ(got, run(variant, task.launch, args, "interp")):
                return False
    except Exception:          # it faults from the other pattern: it reads what it should not
        return True
    key = inputs_key(original, task)
    original_differs = _original_reads_unwritten.get(key) if key is not None else None
    if original_differs is None:
        with interp.settings(poison=SECOND_POISON):
            again = run(original, task.launch, args, "interp")
        original_differs = differ(run(original, task.launch, args, "interp"), again)
        if key is not None:
            _original_reads_unwritten[key] = original_differs
    return not original_differs
