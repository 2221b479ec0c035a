"""What a variant must compute to be valid, and the verdict: the task a worker evaluates, its
fitness, the default error check, poisoned outputs, and the kinds of failure.

Validation cannot be gamed: inputs come from `inputs(rng)` with a seed the search draws for this
evaluation only; arrays the original only writes are filled with NaN (or random integers) before
both runs, so a variant that skips writing them fails; NaN or Inf where the original's output is
finite fails; a variant that writes into an array the original only reads fails. `guards` names
each of these and the others (held-out sizes, the roofline, the race check) and counts what each
rejected.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..kernel import Kernel
from .guards import guard_of


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
    label: str = ""             # "held-out size 4096": starts the reason of a failure


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
    # (original, variant) median seconds timed in alternation on the same inputs, by the
    # screen of a would-be leader (`screening.screened`): what its claimed runtime becomes
    paired: tuple = ()
    # the worker's time by phase (see `spent`): how it was reached, not part of the verdict
    spent: dict | None = field(default=None, compare=False)

    def objectives(self) -> tuple[float, float]:
        return (self.runtime, self.error)


def within(fitness: Fitness | None, tolerance: float) -> bool:
    """Is `fitness` a valid result with an error the search accepts?"""
    return fitness is not None and fitness.valid and fitness.error <= tolerance


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


def fresh_inputs(original: Kernel, task: Task) -> list:
    """The task's inputs, drawn from its seed, with the arrays the original only writes
    poisoned."""
    rng = np.random.default_rng(task.seed)
    args = list(task.inputs(rng))
    poison(args, write_only_arrays(original, args), rng)
    return args


# the start of a failure's reason -> the kind of result, for the search's accounting
_OUTCOMES = (
    (("EvaluationTimeout", "KernelTimeout", "StepLimitError"), "hang (time limit)"),
    (("WorkerCrashed",), "worker crashed"),
    (("CudaError",), "GPU fault"),
    (("RaceError",), "data race (interpreter)"),
    (("WarpSyncError",), "undefined warp shuffle or vote"),
    (("reads shared or local memory",), "reads unwritten memory"),
    (("BoundsError", "KernelRuntimeError"), "out of bounds or runtime error"),
    (("writes to argument",), "wrong output"),
)
# the guards (see `guards`) whose rejections are a kind of their own
_GUARD_OUTCOMES = {"poisoned outputs": "unwritten output (poison)",
                   "held-out sizes": "fails on a held-out input",
                   "roofline": "faster than the roofline"}
# ... and whole reasons ("outputs differ on the interpreter" is not one of them)
_WRONG_OUTPUT = ("outputs differ", "NaN or Inf where the original is finite")


def outcome(fitness: Fitness) -> str:
    """The kind of result, for the search's accounting."""
    if fitness.valid:
        return "valid"
    guard = guard_of(fitness.reason)
    if guard in _GUARD_OUTCOMES:
        return _GUARD_OUTCOMES[guard]
    if fitness.reason in _WRONG_OUTPUT:
        return "wrong output"
    for starts, kind in _OUTCOMES:
        if fitness.reason.startswith(starts):
            return kind
    return "did not compile or launch"
