"""Evaluating one variant, in a worker process: fresh inputs (see `validation`), the original
and the variant run on the same inputs, the error from `check`, then the variant's runtime
(see `timing`).

A variant that runs out of bounds, faults, hangs or crashes the worker fails. Validation uses a
bounds-checked build (on the GPU too, so that an out-of-bounds access is a failed evaluation,
not a poisoned CUDA context), and the plain build that is timed is checked as well.
"""
from __future__ import annotations

import math
import time
from collections import OrderedDict

from ..kernel import Kernel
from . import spent
from .guards import ROOFLINE, UNWRITTEN, must_move, roofline_seconds, unwritten
from .timing import TIMING_BUDGET, time_launches, written_copies
from .validation import (Fitness, Task, array_uses, default_check, fresh_inputs,
                         nonfinite_where_finite, overwritten_inputs)
from .worker import (Poisoned, download, inputs_key, launch_dims, on_device, original_on,
                     prepare, run_on, upload, variant_of, variant_runs)


def evaluate(task: Task) -> Fitness:
    """The fitness of `task.edits` on fresh inputs (runs in a worker process), with the
    worker's time by phase (`spent`)."""
    before = spent.mark()
    fitness = _evaluate(task)
    fitness.spent = spent.since(before, fitness.seconds)
    return fitness


def _evaluate(task: Task) -> Fitness:
    """The fitness of `task.edits` on fresh inputs.

    Two phases, each compiling first (in parallel with the other workers) and then using the
    GPU under the device lock. Validation: the original (timed, which sets the variant's time
    limit) and the bounds-checked variant on a copy of the same inputs (an out-of-bounds
    access is an error, not a fault). Timing, for a valid variant only: the plain build once
    on another copy (checked too: the build that is timed must compute the same), then its
    timed launches."""
    began = time.perf_counter()
    backend = task.backend
    original = original_on(task.kernel, backend)
    known = _checked_originals.get(_check_key(original, task))
    if known is not None:
        args, expected, seconds = known
    else:
        with spent.timed("inputs"):
            args = fresh_inputs(original, task)
    checked = variant_of(original, task.edits, True)
    grid, block = launch_dims(task.launch, args)
    skipped = 0

    def failed(reason: str, **more) -> Fitness:
        if task.label:
            reason = f"{task.label}: {reason}"
        return Fitness(False, reason=reason, seconds=time.perf_counter() - began,
                       skipped=skipped, **more)

    def judged(expected, got) -> float | Fitness:
        """The error of `got`, or the failed fitness."""
        with spent.timed("checking"):
            return _judged(expected, got)

    def _judged(expected, got) -> float | Fitness:
        changed = overwritten_inputs(original, args, got)
        if changed:
            return failed(f"writes to argument {changed[0]}, which the original only reads")
        written, read = array_uses(original, args)
        left = unwritten(sorted(written - read), args, expected, got)
        if left is not None:
            return failed(f"{UNWRITTEN} {left} unwritten where the original writes it (the "
                          f"poison it was given shows through)")
        if nonfinite_where_finite(expected, got):
            return failed("NaN or Inf where the original is finite")
        error = float((task.check or default_check)(expected, got))
        return error if math.isfinite(error) else failed("outputs differ", error=error)

    try:
        try:
            prepare(original, args, backend)
            prepare(checked, args, backend)
        except Exception as error:    # the variant's fault, never the search's
            return failed(f"{type(error).__name__}: {str(error)[:200]}")
        skipped = getattr(checked.specialization_for(args), "skipped", 0)
        try:
            # the copies are made before the lock: under it, only launches, timings and the
            # downloads of their results (the other workers wait on it)
            with spent.timed("inputs"):
                if known is None:
                    device = upload(args, backend)
                    pristine = written_copies(original, args, backend)
                checked_device = upload(args, backend)
            with on_device(backend):
                if known is None:
                    seconds = time_launches(original, task.launch, args, backend, 1, device,
                                            False, None, pristine)
                    expected = download(args, device, backend)
                    if not task.time_it:
                        _keep_checked_original(original, task, (args, expected, seconds))
                limit = seconds if task.edits else None
                got = variant_runs(backend, limit, run_on, checked[grid, block], checked_device,
                                   args, backend)
        except Poisoned:
            raise
        except Exception as error:
            return failed(f"{type(error).__name__}: {str(error)[:200]}")
        device = checked_device = pristine = None   # freed before the timed build's copies
        error = judged(expected, got)
        if isinstance(error, Fitness) or not task.time_it:
            return error if isinstance(error, Fitness) else Fitness(
                True, math.inf, error, seconds=time.perf_counter() - began, skipped=skipped)
        fast = variant_of(original, task.edits, False)
        try:
            prepare(fast, args, backend)
            with spent.timed("inputs"):
                plain = upload(args, backend)
                pristine = written_copies(fast, args, backend)
            # timed right after its checked run, and judged after the GPU is free again (the
            # comparison of large outputs would hold the other workers up)
            with on_device(backend):
                got = variant_runs(backend, limit, run_on, fast[grid, block], plain, args,
                                   backend)
                runtime = variant_runs(backend, limit, time_launches, fast, task.launch, args,
                                       backend, task.repeats, plain, False, TIMING_BUDGET,
                                       pristine)
        except Poisoned:
            raise
        except Exception as error:
            return failed(f"{type(error).__name__}: {str(error)[:200]}")
        plain_error = judged(expected, got)
        if isinstance(plain_error, Fitness):
            return plain_error
        with spent.timed("checking"):
            written, read = array_uses(original, args)
            moved = must_move(written, read, args, expected)
            bound = roofline_seconds(moved, backend)
        if runtime < bound:
            return failed(f"{ROOFLINE}: timed {runtime:.3g} s, but moving its {moved} bytes "
                          f"takes at least {bound:.3g} s at the device's peak bandwidth")
        return Fitness(True, runtime, max(error, plain_error), seconds=time.perf_counter() - began,
                       skipped=skipped)
    except Poisoned as error:
        return failed(str(error), poisons_worker=True)


# the original's run on the inputs of checks without timing (the held-out input, drawn once
# per search): every candidate is checked on them, the original is run once per worker
_checked_originals: OrderedDict = OrderedDict()


def _check_key(original: Kernel, task: Task):
    return None if task.time_it else inputs_key(original, task, task.backend)


def _keep_checked_original(original: Kernel, task: Task, found: tuple) -> None:
    key = _check_key(original, task)
    if key is not None:
        _checked_originals[key] = found
        if len(_checked_originals) > 1:     # held-out inputs may be large
            _checked_originals.popitem(last=False)
