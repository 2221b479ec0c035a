"""Timing a kernel's launches: CUDA events on the GPU, the wall clock on the CPU, a modelled
time on the interpreter; and the original and a variant side by side.

Every timed launch starts from the validated inputs (restored, untimed, before it), so a variant
cannot time faster by finding its own earlier outputs, or inputs it overwrote, in memory.
"""
from __future__ import annotations

import contextlib
import time

import numpy as np

from ..kernel import Kernel
from . import worker
from .worker import launch_dims, original_on, prepare, upload, variant_of

# GPU seconds of timed launches per evaluation after which a variant's timing stops (at least
# one launch): a 20 ms variant is timed once, a 1 ms one `repeats` times
TIMING_BUDGET = 0.01
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


def written_copies(kernel, args, backend: str) -> dict:
    """Copies, on `backend`, of the arrays among `args` that `kernel` may write (by its own
    IR, views and calls included): what every timed launch is restored from. The arrays it
    never writes keep their contents from launch to launch."""
    written, _ = kernel.specialization_for(args).array_uses()
    return dict(zip(sorted(written), upload([args[k] for k in sorted(written)], backend)))


def time_launches(kernel, launch, args, backend: str, repeats: int, device=None,
                  warm: bool = True, budget: float | None = None,
                  pristine: dict | None = None) -> float:
    """Median seconds per launch (CUDA events on the GPU; on the interpreter the modelled time
    of one launch, `interpreted_seconds`), on `device` arguments when given
    (else uploaded from `args`), after one untimed launch unless `warm` is False. Every launch
    starts from `args`: the arrays the kernel may write are restored from `pristine`
    (`written_copies`, made here unless given) before it. On the GPU, `budget` (seconds) ends
    the timing early once the launches timed add up to it: one launch of a slow variant is
    timed precisely by its events, and repeating it would take the GPU from the other workers
    for nothing."""
    grid, block = launch_dims(launch, args)
    launcher = kernel[grid, block]
    device = upload(args, backend) if device is None else device
    pristine = written_copies(kernel, args, backend) if pristine is None else pristine

    def restore():
        for k, copy in pristine.items():
            if backend == "cuda":
                device[k].copy_from_device(copy)
            else:
                np.copyto(device[k], copy)

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


def time_side_by_side(kernel: Kernel, edits: tuple, inputs, launch, seed: int, backend: str,
                      rounds: int = 7, repeats: int = 5) -> tuple[float, float]:
    """(original, variant) median runtimes, measured in alternation on the same inputs."""
    original = original_on(kernel, backend)
    variant = variant_of(original, edits, False)
    args = list(inputs(np.random.default_rng(seed)))
    for each in (original, variant):
        prepare(each, args, backend)
    first, second = [], []
    lock = worker.device_lock if backend == "cuda" else None
    with lock if lock is not None else contextlib.nullcontext():
        for _ in range(rounds):
            first.append(time_launches(original, launch, args, backend, repeats))
            second.append(time_launches(variant, launch, args, backend, repeats))
    return float(np.median(first)), float(np.median(second))
