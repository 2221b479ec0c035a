"""Evaluating one variant, in a worker process: fresh inputs, poisoned outputs, the original
and the variant run on the same inputs, the error from `check`, then the variant's runtime.

Validation cannot be gamed: inputs come from `inputs(rng)` with a seed the search draws for this
evaluation only; arrays the original only writes are filled with NaN (or random integers) before
both runs, so a variant that skips writing them fails; NaN or Inf where the original's output is
finite fails; a variant that faults, runs out of bounds, hangs or crashes the worker fails. On the
CPU, validation uses a bounds-checked build and timing a plain one; on the GPU both use the plain
build (an out-of-bounds access faults or corrupts an output), and a worker whose CUDA context a
fault has poisoned is replaced.
"""
from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ...ir.traits import ReadsMemory, WritesMemory
from ...ir.types import Array
from ..kernel import Kernel
from .variant import VariantKernel


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


def write_only_arrays(kernel: Kernel, args) -> list[int]:
    """The argument positions of arrays the original kernel writes and never reads."""
    spec = kernel.specialization_for(args)
    params = spec.optimized.kernel.regions[0].block.args
    written, read = set(), set()
    for op in spec.optimized.kernel.walk():
        for value in op.operands:
            if value in params and isinstance(value.type, Array):
                if op.has_trait(WritesMemory):
                    written.add(value.index)
                if op.has_trait(ReadsMemory):
                    read.add(value.index)
    return sorted(written - read)


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
    key = (kernel.py_func, kernel.boundscheck, kernel.fastmath, backend)
    found = _originals.get(key)
    if found is None:
        found = _originals[key] = kernel.on(backend)
    return found


def _variant(original: Kernel, edits: tuple, boundscheck: bool) -> VariantKernel:
    key = (original.py_func, edits, boundscheck)
    found = _variants.get(key)
    if found is None:
        found = VariantKernel(original, edits, original.backend, boundscheck)
        _variants[key] = found
        while len(_variants) > 64:
            _variants.popitem(last=False)
    _variants.move_to_end(key)
    return found


def run(kernel, launch, args, backend: str) -> list:
    """Launch on `backend` with NumPy arguments; returns the arguments after the launch."""
    grid, block = launch_dims(launch, args)
    if backend != "cuda":
        kernel[grid, block](*args)
        return args
    from ..cuda import synchronize, to_device
    device = [to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kernel[grid, block](*device)
    synchronize()
    return [d.copy_to_host() if isinstance(a, np.ndarray) else a for a, d in zip(args, device)]


def time_launches(kernel, launch, args, backend: str, repeats: int) -> float:
    """Median seconds per launch (CUDA events on the GPU)."""
    grid, block = launch_dims(launch, args)
    samples = []
    if backend == "cuda":
        from ..cuda import Event, synchronize, to_device
        device = [to_device(a) if isinstance(a, np.ndarray) else a for a in args]
        launcher = kernel[grid, block]
        launcher(*device)
        for _ in range(repeats):
            start, end = Event(), Event()
            start.record()
            launcher(*device)
            end.record()
            end.synchronize()
            samples.append(end.elapsed_ms(start) / 1e3)
        synchronize()
    else:
        launcher = kernel[grid, block]
        for _ in range(repeats):
            start = time.perf_counter()
            launcher(*args)
            samples.append(time.perf_counter() - start)
    return float(np.median(samples))


def evaluate(task: Task) -> Fitness:
    """The fitness of `task.edits` on fresh inputs (runs in a worker process)."""
    began = time.perf_counter()
    original = _original(task.kernel, task.backend)
    rng = np.random.default_rng(task.seed)
    args = list(task.inputs(rng))
    outputs = write_only_arrays(original, args)
    poison(args, outputs, rng)
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    expected = run(original, task.launch, args, task.backend)
    checked = _variant(original, task.edits, task.backend != "cuda")
    try:
        got = run(checked, task.launch, copies, task.backend)
    except Exception as error:    # the variant's fault, never the search's
        return Fitness(False, reason=f"{type(error).__name__}: {str(error)[:200]}",
                       seconds=time.perf_counter() - began,
                       poisons_worker=task.backend == "cuda" and _sticky(error))
    skipped = _skipped(checked, copies)
    if nonfinite_where_finite(expected, got):
        return Fitness(False, reason="NaN or Inf where the original is finite",
                       seconds=time.perf_counter() - began, skipped=skipped)
    error = float((task.check or default_check)(expected, got))
    if not math.isfinite(error):
        return Fitness(False, error=error, reason="outputs differ",
                       seconds=time.perf_counter() - began, skipped=skipped)
    runtime = math.inf
    if task.time_it:
        fast = _variant(original, task.edits, False)
        runtime = time_launches(fast, task.launch, copies, task.backend, task.repeats)
    return Fitness(True, runtime, error, seconds=time.perf_counter() - began, skipped=skipped)


def _sticky(error) -> bool:
    """Whether a failed GPU launch left the context unusable (an illegal address, a trap, a
    misaligned access: the driver's sticky errors). Others (a launch the device refuses) leave
    the worker as it was."""
    from ..cuda import CudaError
    from ..cuda.driver import _STICKY
    return isinstance(error, CudaError) and (error.code is None or error.code in _STICKY)


def warm_worker(backend: str) -> None:
    """What a fresh worker does before its first task: imports, and the CUDA context."""
    import zymo  # noqa: F401
    if backend == "cuda":
        from ..cuda import driver
        driver.current_device()


def warm_with_task(backend: str, task: Task) -> None:
    """A warm-up that also evaluates `task` (the original kernel), so a replacement worker has
    compiled it and built whatever its inputs cache before its first real task."""
    warm_worker(backend)
    evaluate(task)


def outcome(fitness: Fitness) -> str:
    """The kind of result, for the search's accounting."""
    if fitness.valid:
        return "valid"
    reason = fitness.reason
    if reason.startswith("EvaluationTimeout"):
        return "hang (time limit)"
    if reason.startswith("WorkerCrashed"):
        return "worker crashed"
    if reason.startswith("CudaError"):
        return "GPU fault"
    if reason.startswith(("BoundsError", "KernelRuntimeError")):
        return "out of bounds or runtime error"
    if reason in ("outputs differ", "NaN or Inf where the original is finite"):
        return "wrong output"
    return "did not compile or launch"


def _skipped(variant, args) -> int:
    spec = variant.specialization_for([a for a in args])
    return getattr(spec, "skipped", 0)


def time_side_by_side(kernel: Kernel, edits: tuple, inputs, launch, seed: int, backend: str,
                      rounds: int = 7, repeats: int = 5) -> tuple[float, float]:
    """(original, variant) median runtimes, measured in alternation on the same inputs."""
    original = _original(kernel, backend)
    variant = _variant(original, edits, False)
    args = list(inputs(np.random.default_rng(seed)))
    first, second = [], []
    for _ in range(rounds):
        first.append(time_launches(original, launch, [_copy(a) for a in args], backend, repeats))
        second.append(time_launches(variant, launch, [_copy(a) for a in args], backend, repeats))
    return float(np.median(first)), float(np.median(second))


def _copy(value):
    return value.copy() if isinstance(value, np.ndarray) else value

