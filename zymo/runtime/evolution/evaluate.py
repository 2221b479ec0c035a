"""Evaluating one variant, in a worker process: fresh inputs, poisoned outputs, the original
and the variant run on the same inputs, the error from `check`, then the variant's runtime.

Validation cannot be gamed: inputs come from `inputs(rng)` with a seed the search draws for this
evaluation only; arrays the original only writes are filled with NaN (or random integers) before
both runs, so a variant that skips writing them fails; NaN or Inf where the original's output is
finite fails; a variant that writes into an array the original only reads fails; a variant
that runs out of bounds, faults, hangs or crashes the worker fails. Every timed launch starts
from the validated inputs (restored, untimed, before it), so a variant cannot time faster by
finding its own earlier outputs, or inputs it overwrote, in memory.
Validation uses a bounds-checked build (on the GPU too, so that an out-of-bounds access is a
failed evaluation, not a poisoned CUDA context), and the plain build that is timed is checked
as well. On the GPU a variant's waits have a time limit, so a hang is caught in the worker; a
worker whose context a fault or a hang has spoiled is replaced.
"""
from __future__ import annotations

import contextlib
import math
import os
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ...diagnostics import RaceError
from ..kernel import Kernel
from .variant import VariantKernel, identity


@dataclass(frozen=True)
class Task:
    kernel: Kernel
    edits: tuple
    inputs: object              # rng -> list of launch arguments (NumPy arrays and scalars)
    check: object               # (expected_args, got_args) -> float, or None for the default
    launch: object              # (grid, block) or args -> (grid, block)
    seed: int
    backend: str = "cpu"
    repeats: int = 5
    time_it: bool = True


@dataclass
class Fitness:
    valid: bool
    runtime: float = math.inf      # seconds, median of the timed launches
    error: float = math.inf
    reason: str = ""
    seconds: float = 0.0           # wall time of the whole evaluation
    skipped: int = 0               # edits that did not apply
    poisons_worker: bool = False   # the worker's CUDA context is unusable after this
    race: tuple = ()               # a data race's two ops (ids), where the race check found one

    def objectives(self) -> tuple[float, float]:
        return (self.runtime, self.error)


def default_check(expected: list, got: list) -> float:
    """Max relative error over the float arrays; integer and bool arrays must match exactly."""
    error = 0.0
    for e, g in zip(expected, got):
        if not isinstance(e, np.ndarray):
            continue
        if e.dtype.kind == "f":
            scale = np.maximum(np.abs(e), np.finfo(e.dtype).tiny)
            with np.errstate(invalid="ignore", over="ignore"):
                diff = np.abs(g.astype(np.float64) - e) / scale
            diff = np.where(np.isnan(e) & np.isnan(g), 0.0, diff)
            error = max(error, float(np.nanmax(diff, initial=0.0)) if not np.isnan(diff).any()
                        else math.inf)
        elif not np.array_equal(e, g):
            return math.inf
    return error


def nonfinite_where_finite(expected: list, got: list) -> bool:
    for e, g in zip(expected, got):
        if isinstance(e, np.ndarray) and e.dtype.kind == "f":
            if np.any(~np.isfinite(g) & np.isfinite(e)):
                return True
    return False


def array_uses(kernel: Kernel, args) -> tuple[set[int], set[int]]:
    """(written, read): the argument positions of the arrays the original kernel writes and
    reads."""
    return kernel.specialization_for(args).array_uses()


def write_only_arrays(kernel: Kernel, args) -> list[int]:
    """The argument positions of arrays the original kernel writes and never reads."""
    written, read = array_uses(kernel, args)
    return sorted(written - read)


def overwritten_inputs(kernel: Kernel, before, after) -> list[int]:
    """Positions of arrays the original never writes that changed."""
    written, _ = array_uses(kernel, before)
    return [k for k, (b, a) in enumerate(zip(before, after))
            if isinstance(b, np.ndarray) and k not in written
            and not np.array_equal(b, a, equal_nan=b.dtype.kind in "fc")]


def poison(args, positions, rng) -> None:
    for index in positions:
        array = args[index]
        if array.dtype.kind == "f":
            array.fill(np.nan)
        elif array.dtype.kind in "iu":
            info = np.iinfo(array.dtype)
            array[...] = rng.integers(info.min, info.max, size=array.shape, dtype=array.dtype,
                                      endpoint=True)


def launch_dims(launch, args):
    return launch(args) if callable(launch) else launch


# ---- per-worker state --------------------------------------------------------------------------
_originals: dict = {}
_variants: OrderedDict = OrderedDict()


def _original(kernel: Kernel, backend: str) -> Kernel:
    key = (identity(kernel), kernel.boundscheck, kernel.fastmath, backend)
    found = _originals.get(key)
    if found is None:
        found = _originals[key] = kernel.on(backend)
    return found


def _variant(original: Kernel, edits: tuple, boundscheck: bool) -> VariantKernel:
    key = (identity(original), edits, boundscheck, original.backend)
    found = _variants.get(key)
    if found is None:
        found = VariantKernel(original, edits, original.backend, boundscheck)
        _variants[key] = found
        while len(_variants) > 64:
            _variants.popitem(last=False)
    _variants.move_to_end(key)
    return found


# ---- launching on a backend: "device" arguments are DeviceArrays on the GPU, copies elsewhere
def upload(args, backend: str) -> list:
    if backend != "cuda":
        return [_copy(a) for a in args]
    from ..cuda import to_device
    return [to_device(a) if isinstance(a, np.ndarray) else a for a in args]


def download(args, device, backend: str) -> list:
    """The arguments after launches on `device` (waits for the GPU, under any time limit)."""
    if backend != "cuda":
        return device
    from ..cuda import synchronize
    synchronize()
    return [d.copy_to_host() if isinstance(a, np.ndarray) else a for a, d in zip(args, device)]


def run(kernel, launch, args, backend: str) -> list:
    """Launch on `backend` with NumPy arguments; returns the arguments after the launch."""
    device = upload(args, backend)
    grid, block = launch_dims(launch, args)
    kernel[grid, block](*device)
    return download(args, device, backend)


# the interpreter's cost model: its wall time follows the number of ops it dispatches (each a
# NumPy call over a batch of threads), not a kernel's cost on hardware, and it is noisy; the
# threads times ops a launch executes is neither (a search on the interpreter is repeatable)
INTERP_SECONDS_PER_OP = 1e-9


def interpreted_seconds(launcher, args) -> float:
    """A launch's modelled time on the interpreter: INTERP_SECONDS_PER_OP per op per thread
    that executes it."""
    from ...backend import interp
    counts: dict = {}
    with interp.settings(counts=counts):
        launcher(*args)
    return sum(counts.values()) * INTERP_SECONDS_PER_OP


def time_launches(kernel, launch, args, backend: str, repeats: int, device=None,
                  warm: bool = True, budget: float | None = None) -> float:
    """Median seconds per launch (CUDA events on the GPU; on the interpreter the modelled time
    of one launch, `interpreted_seconds`), on `device` arguments when given
    (else uploaded from `args`), after one untimed launch unless `warm` is False. Every launch
    starts from `args` (restored, untimed, before it): a variant must not get faster by
    finding its own earlier outputs, or inputs it overwrote, in memory. On the GPU, `budget`
    (seconds) ends the timing early once the launches timed add up to it: one launch of a
    slow variant is timed precisely by its events, and repeating it would take the GPU from
    the other workers for nothing."""
    grid, block = launch_dims(launch, args)
    launcher = kernel[grid, block]
    device = upload(args, backend) if device is None else device
    pristine = upload(args, backend)
    arrays = [k for k, a in enumerate(args) if isinstance(a, np.ndarray)]

    def restore():
        for k in arrays:
            if backend == "cuda":
                device[k].copy_from_device(pristine[k])
            else:
                np.copyto(device[k], pristine[k])

    if backend == "interp":
        restore()
        return interpreted_seconds(launcher, device)
    samples = []
    if warm:
        launcher(*device)
    if backend == "cuda":
        from ..cuda import Event
        for _ in range(repeats):
            restore()
            start, end = Event(), Event()
            start.record()
            launcher(*device)
            end.record()
            end.synchronize()
            samples.append(end.elapsed_ms(start) / 1e3)
            if budget is not None and sum(samples) >= budget:
                break
    else:
        for _ in range(repeats):
            restore()
            start = time.perf_counter()
            launcher(*device)
            samples.append(time.perf_counter() - start)
    return float(np.median(samples))


def _prepare(kernel, args, backend: str) -> None:
    """Compile `kernel` for `args` (and on the GPU load its module) ahead of its launch."""
    spec = kernel.specialization_for(args)
    program = spec.compiled(backend)
    if backend == "cuda":
        from ..cuda import driver
        program.function(driver.current_device())


def _gpu_limit(backend: str, original_seconds: float | None):
    """On the GPU, a variant's waits give up at 20 times the original's time (plus 50 ms):
    a hang is caught in the worker, which leaves the GPU to the next one as soon as the
    parent has replaced it. None: no limit (the original itself, which cannot hang, and whose
    first runs in a fresh worker, on a host busy starting the others, may take longer)."""
    if backend != "cuda" or original_seconds is None:
        return contextlib.nullcontext()
    from ..cuda import time_limit
    return time_limit(0.05 + 20 * original_seconds)


# ---- per-worker device lock (installed by the warm-up; None in the parent or inline) ---------
_device_lock = None


def _lock_for(locks):
    if not locks:
        return None
    return locks[int(os.environ.get("ZYMO_DEVICE", "0")) % len(locks)]


class _Poisoned(Exception):
    """The variant spoiled this worker's GPU context (a fault, or a kernel past its limit)."""


@contextlib.contextmanager
def _on_device(backend: str):
    """The device lock around GPU work. A worker whose context the work spoiled keeps the
    lock (its kernel may still be running): the parent kills it, then releases the lock."""
    lock = _device_lock if backend == "cuda" else None
    if lock is None:
        yield
        return
    lock.acquire()
    try:
        yield
    except _Poisoned:
        raise
    except BaseException:
        lock.release()
        raise
    lock.release()


def _variant_runs(backend: str, seconds: float | None, fn, *args):
    """`fn(*args)` under the variant's time limit; a failure that spoils the context is
    re-raised as _Poisoned."""
    try:
        with _gpu_limit(backend, seconds):
            return fn(*args)
    except Exception as error:
        if backend == "cuda" and _sticky(error):
            raise _Poisoned(f"{type(error).__name__}: {str(error)[:200]}") from None
        raise


def evaluate(task: Task) -> Fitness:
    """The fitness of `task.edits` on fresh inputs (runs in a worker process).

    Two phases, each compiling first (in parallel with the other workers) and then using the
    GPU under the device lock. Validation: the original (timed, which sets the variant's time
    limit) and the bounds-checked variant on a copy of the same inputs (an out-of-bounds
    access is an error, not a fault). Timing, for a valid variant only: the plain build once
    on another copy (checked too: the build that is timed must compute the same), then its
    timed launches."""
    began = time.perf_counter()
    backend = task.backend
    original = _original(task.kernel, backend)
    known = _checked_originals.get(_check_key(original, task))
    if known is not None:
        args, expected, seconds = known
    else:
        rng = np.random.default_rng(task.seed)
        args = list(task.inputs(rng))
        poison(args, write_only_arrays(original, args), rng)
    checked = _variant(original, task.edits, True)
    grid, block = launch_dims(task.launch, args)
    skipped = 0

    def failed(reason: str, **more) -> Fitness:
        return Fitness(False, reason=reason, seconds=time.perf_counter() - began,
                       skipped=skipped, **more)

    def judged(expected, got) -> float | Fitness:
        """The error of `got`, or the failed fitness."""
        changed = overwritten_inputs(original, args, got)
        if changed:
            return failed(f"writes to argument {changed[0]}, which the original only reads")
        if nonfinite_where_finite(expected, got):
            return failed("NaN or Inf where the original is finite")
        error = float((task.check or default_check)(expected, got))
        return error if math.isfinite(error) else failed("outputs differ", error=error)

    try:
        try:
            _prepare(original, args, backend)
            _prepare(checked, args, backend)
        except Exception as error:    # the variant's fault, never the search's
            return failed(f"{type(error).__name__}: {str(error)[:200]}")
        skipped = getattr(checked.specialization_for(args), "skipped", 0)
        try:
            with _on_device(backend):
                if known is None:
                    device = upload(args, backend)
                    seconds = time_launches(original, task.launch, args, backend, 1, device,
                                            warm=False)
                    expected = download(args, device, backend)
                    if not task.time_it:
                        _keep_checked_original(original, task, (args, expected, seconds))
                limit = seconds if task.edits else None
                got = _variant_runs(backend, limit, run, checked, task.launch, args,
                                    backend)
        except _Poisoned:
            raise
        except Exception as error:
            return failed(f"{type(error).__name__}: {str(error)[:200]}")
        error = judged(expected, got)
        if isinstance(error, Fitness) or not task.time_it:
            return error if isinstance(error, Fitness) else Fitness(
                True, math.inf, error, seconds=time.perf_counter() - began, skipped=skipped)
        fast = _variant(original, task.edits, False)
        try:
            _prepare(fast, args, backend)
            # timed right after its checked run, and judged after the GPU is free again (the
            # comparison of large outputs would hold the other workers up)
            with _on_device(backend):
                plain = upload(args, backend)
                launcher = fast[grid, block]
                _variant_runs(backend, limit, launcher, *plain)
                got = _variant_runs(backend, limit, download, args, plain, backend)
                runtime = _variant_runs(backend, limit, time_launches, fast, task.launch, args,
                                        backend, task.repeats, plain, False, TIMING_BUDGET)
        except _Poisoned:
            raise
        except Exception as error:
            return failed(f"{type(error).__name__}: {str(error)[:200]}")
        plain_error = judged(expected, got)
        if isinstance(plain_error, Fitness):
            return plain_error
        return Fitness(True, runtime, max(error, plain_error), seconds=time.perf_counter() - began,
                       skipped=skipped)
    except _Poisoned as error:
        return failed(str(error), poisons_worker=True)


# the original's run on the inputs of checks without timing (the held-out input, drawn once
# per search): every candidate is checked on them, the original is run once per worker
_checked_originals: OrderedDict = OrderedDict()


def _check_key(original: Kernel, task: Task):
    if task.time_it:
        return None
    key = (identity(original), task.backend, task.inputs, task.seed, repr(task.launch))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _keep_checked_original(original: Kernel, task: Task, found: tuple) -> None:
    key = _check_key(original, task)
    if key is not None:
        _checked_originals[key] = found
        if len(_checked_originals) > 1:     # held-out inputs may be large
            _checked_originals.popitem(last=False)


def interpreted(task: Task) -> Fitness:
    """The variant on the reference interpreter, on `task.inputs` (meant to be small): it must
    run free of data races, out-of-bounds accesses and divergent barriers, within 5 times the
    ops the original executes, and compute what the original computes there, whatever its
    shared and local memory held before the launch. A variant with a race can pass any number
    of runs on a GPU; the interpreter's race detector does not let it. (When the original
    itself races there, the check is passed with a note: it would hold the variant to more
    than the original.)"""
    from ...backend import interp
    began = time.perf_counter()
    original = _original(task.kernel, "interp")
    try:
        args, expected, ops = _interpreted_original(original, task)
    except RaceError as error:     # nothing to hold the variant to
        return Fitness(True, math.inf, 0.0, reason=f"not checked: the original races ({error})"
                       [:300], seconds=time.perf_counter() - began)
    variant = _variant(original, task.edits, False)
    limit = OPS_ALLOWED * ops + 10_000
    try:
        with interp.settings(max_ops=limit):
            got = run(variant, task.launch, args, "interp")
    except Exception as error:    # the variant's fault
        return Fitness(False, reason=f"{type(error).__name__}: {str(error)[:200]}",
                       seconds=time.perf_counter() - began, race=tuple(getattr(error, "ops", ())))
    changed = overwritten_inputs(original, args, got)
    error = math.inf if changed or nonfinite_where_finite(expected, got) else \
        float((task.check or default_check)(expected, got))
    if math.isfinite(error) and _reads_unwritten(original, variant, task, args, got, limit):
        return Fitness(False, math.inf, math.inf, reason="reads shared or local memory that "
                       "nothing wrote (outputs change with its initial contents)",
                       seconds=time.perf_counter() - began)
    return Fitness(math.isfinite(error), math.inf, error,
                   reason="" if math.isfinite(error) else "outputs differ on the interpreter",
                   seconds=time.perf_counter() - began)


def screened(race: Task | None, confirmations: tuple, tolerance: float) -> Fitness:
    """What a variant that claims to be faster must pass before it may enter the population:
    the interpreter's race check (`race`, when there are race-check inputs) and `confirmations`,
    untimed evaluations on other fresh inputs. One evaluation is a sample: a variant wrong on
    one input in a thousand passes it most of the time, and the fitness cache would keep that
    verdict for the rest of the search. The first failure, else the largest error."""
    began = time.perf_counter()
    verdicts: list[Fitness] = []
    for check, task in [(interpreted, race)] * (race is not None) + \
            [(evaluate, t) for t in confirmations]:
        verdict = check(task)
        if verdict.valid and verdict.error > tolerance:
            verdict = Fitness(False, math.inf, verdict.error, "outputs differ")
        verdicts.append(verdict)
        if not verdict.valid:
            break
    verdict = max(verdicts, key=lambda v: (not v.valid, v.error),
                  default=Fitness(True, math.inf, 0.0))
    return Fitness(verdict.valid, math.inf, verdict.error, verdict.reason,
                   time.perf_counter() - began, poisons_worker=verdict.poisons_worker,
                   race=verdict.race)


# GPU seconds of timed launches per evaluation after which a variant's timing stops (at least
# one launch): a 20 ms variant is timed once, a 1 ms one `repeats` times
TIMING_BUDGET = 0.01
OPS_ALLOWED = 5        # a variant's executed ops on the interpreter, per op of the original
SECOND_POISON = 0x5A   # a second pattern of uninitialised memory: positive integers, finite floats
# per worker, by `_original_key`: the original's interpreted run, and whether its results
# change with the pattern of uninitialised memory
_interpreted_originals: OrderedDict = OrderedDict()
_original_reads_unwritten: dict = {}


def _original_key(original: Kernel, task: Task):
    """What the original's interpreted run depends on (None where inputs cannot be a key)."""
    key = (identity(original), task.inputs, task.seed, repr(task.launch))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _interpreted_original(original: Kernel, task: Task) -> tuple[list, list, int]:
    """(inputs, the original's results, its executed ops) on the interpreter for the task's
    inputs and seed; kept for the next check with the same ones (the search draws the race
    check's inputs once)."""
    from ...backend import interp
    key = _original_key(original, task)
    found = _interpreted_originals.get(key) if key is not None else None
    if found is None:
        rng = np.random.default_rng(task.seed)
        args = list(task.inputs(rng))
        poison(args, write_only_arrays(original, args), rng)
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
    key = _original_key(original, task)
    original_differs = _original_reads_unwritten.get(key) if key is not None else None
    if original_differs is None:
        with interp.settings(poison=SECOND_POISON):
            again = run(original, task.launch, args, "interp")
        original_differs = differ(run(original, task.launch, args, "interp"), again)
        if key is not None:
            _original_reads_unwritten[key] = original_differs
    return not original_differs


def _sticky(error) -> bool:
    """Whether a failed GPU launch left the context unusable (an illegal address, a trap, a
    misaligned access: the driver's sticky errors, or a kernel still running past its time
    limit). Others (a launch the device refuses) leave the worker as it was."""
    from ..cuda import CudaError
    from ..cuda.driver import _STICKY
    return isinstance(error, CudaError) and (error.code is None or error.code in _STICKY)


def warm_worker(backend: str, locks=None) -> None:
    """What a fresh worker does before its first task: imports, the CUDA context, and the
    lock of its GPU (shared by the workers of that GPU)."""
    global _device_lock
    import zymo  # noqa: F401
    _device_lock = _lock_for(locks)
    if backend == "cuda":
        from ..cuda import driver
        driver.current_device()


def warm_with_task(backend: str, task: Task, locks=None) -> None:
    """A warm-up that also evaluates `task` (the original kernel), so a replacement worker has
    compiled it and built whatever its inputs cache before its first real task."""
    warm_worker(backend, locks)
    evaluate(task)


def outcome(fitness: Fitness) -> str:
    """The kind of result, for the search's accounting."""
    if fitness.valid:
        return "valid"
    reason = fitness.reason
    if reason.startswith(("EvaluationTimeout", "KernelTimeout", "StepLimitError")):
        return "hang (time limit)"
    if reason.startswith("WorkerCrashed"):
        return "worker crashed"
    if reason.startswith("CudaError"):
        return "GPU fault"
    if reason.startswith("RaceError"):
        return "data race (interpreter)"
    if reason.startswith("WarpSyncError"):
        return "undefined warp shuffle or vote"
    if reason.startswith("reads shared or local memory"):
        return "reads unwritten memory"
    if reason.startswith(("BoundsError", "KernelRuntimeError")):
        return "out of bounds or runtime error"
    if reason in ("outputs differ", "NaN or Inf where the original is finite") or \
            reason.startswith("writes to argument"):
        return "wrong output"
    return "did not compile or launch"


def time_side_by_side(kernel: Kernel, edits: tuple, inputs, launch, seed: int, backend: str,
                      rounds: int = 7, repeats: int = 5) -> tuple[float, float]:
    """(original, variant) median runtimes, measured in alternation on the same inputs."""
    original = _original(kernel, backend)
    variant = _variant(original, edits, False)
    args = list(inputs(np.random.default_rng(seed)))
    for each in (original, variant):
        _prepare(each, args, backend)
    first, second = [], []
    with _device_lock if backend == "cuda" and _device_lock is not None else \
            contextlib.nullcontext():
        for _ in range(rounds):
            first.append(time_launches(original, launch, args, backend, repeats))
            second.append(time_launches(variant, launch, args, backend, repeats))
    return float(np.median(first)), float(np.median(second))


def _copy(value):
    return value.copy() if isinstance(value, np.ndarray) else value

