"""What an evaluation worker keeps and uses between tasks: the builds of originals and variants,
launches on a backend, its GPU's lock and time limits, and its warm-up.

On the GPU a variant's waits have a time limit, so a hang is caught in the worker; a worker
whose context a fault or a hang has spoiled is replaced (the parent kills it and releases its
lock).
"""
from __future__ import annotations

import contextlib
import os
from collections import OrderedDict

import numpy as np

from ..kernel import Kernel
from .spent import timed
from .variant import VariantKernel, identity

_originals: dict = {}
_variants: OrderedDict = OrderedDict()


def original_on(kernel: Kernel, backend: str) -> Kernel:
    """The original kernel built for `backend`, kept for the worker's later tasks."""
    key = (identity(kernel), kernel.boundscheck, kernel.fastmath, backend)
    found = _originals.get(key)
    if found is None:
        found = _originals[key] = kernel.on(backend)
    return found


def variant_of(original: Kernel, edits: tuple, boundscheck: bool) -> VariantKernel:
    """The variant of `original` (built for its backend), the 64 last used kept."""
    key = (identity(original), edits, boundscheck, original.backend)
    found = _variants.get(key)
    if found is None:
        found = VariantKernel(original, edits, original.backend, boundscheck)
        _variants[key] = found
        while len(_variants) > 64:
            _variants.popitem(last=False)
    _variants.move_to_end(key)
    return found


def inputs_key(original: Kernel, task, *more):
    """What a result of the original on the task's inputs depends on, to keep it under (None
    where the inputs function cannot be part of a key)."""
    key = (identity(original), task.inputs, task.seed, repr(task.launch), *more)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def prepare(kernel, args, backend: str) -> None:
    """Compile `kernel` for `args` (and on the GPU load its module) ahead of its launch."""
    with timed("compile"):
        program = kernel.specialization_for(args).compiled(backend)
        if backend == "cuda":
            from ..cuda import driver
            program.function(driver.current_device())


# ---- launching on a backend: "device" arguments are DeviceArrays on the GPU, copies elsewhere
def launch_dims(launch, args):
    return launch(args) if callable(launch) else launch


def upload(args, backend: str) -> list:
    if backend != "cuda":
        return [a.copy() if isinstance(a, np.ndarray) else a for a in args]
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
    grid, block = launch_dims(launch, args)
    return run_on(kernel[grid, block], upload(args, backend), args, backend)


def run_on(launcher, device: list, args, backend: str) -> list:
    """`launcher(*device)` on arguments already uploaded from `args`; the arguments after it."""
    launcher(*device)
    return download(args, device, backend)


# ---- the GPU: its lock (installed by the warm-up; None in the parent or inline) and limits ---
device_lock = None


class Poisoned(Exception):
    """The variant spoiled this worker's GPU context (a fault, or a kernel past its limit)."""


@contextlib.contextmanager
def on_device(backend: str):
    """The device lock around GPU work. A worker whose context the work spoiled keeps the
    lock (its kernel may still be running): the parent kills it, then releases the lock."""
    lock = device_lock if backend == "cuda" else None
    if lock is None:
        with timed("on device"):
            yield
        return
    with timed("lock wait"):
        lock.acquire()
    try:
        with timed("on device"):
            yield
    except Poisoned:
        raise
    except BaseException:
        lock.release()
        raise
    lock.release()


def _gpu_limit(backend: str, original_seconds: float | None):
    """On the GPU, a variant's waits give up at 20 times the original's time (plus 50 ms):
    a hang is caught in the worker, which leaves the GPU to the next one as soon as the
    parent has replaced it. None: no limit (the original itself, which cannot hang, and whose
    first runs in a fresh worker, on a host busy starting the others, may take longer)."""
    if backend != "cuda" or original_seconds is None:
        return contextlib.nullcontext()
    from ..cuda import time_limit
    return time_limit(0.05 + 20 * original_seconds)


def variant_runs(backend: str, seconds: float | None, fn, *args):
    """`fn(*args)` under the variant's time limit; a failure that spoils the context is
    re-raised as Poisoned."""
    try:
        with _gpu_limit(backend, seconds):
            return fn(*args)
    except Exception as error:
        if backend == "cuda" and sticky(error):
            raise Poisoned(f"{type(error).__name__}: {str(error)[:200]}") from None
        raise


def sticky(error) -> bool:
    """Whether a failed GPU launch left the context unusable (an illegal address, a trap, a
    misaligned access: the driver's sticky errors, or a kernel still running past its time
    limit). Others (a launch the device refuses) leave the worker as it was."""
    from ..cuda import CudaError
    from ..cuda.driver import _STICKY
    return isinstance(error, CudaError) and (error.code is None or error.code in _STICKY)


def warm_worker(backend: str, locks=None, task=None) -> None:
    """What a fresh worker does before its first task: imports, the CUDA context, and the
    lock of its GPU (shared by the workers of that GPU). Given a `task` (the original kernel),
    it also evaluates it, so that a replacement worker has compiled the original and built
    whatever its inputs cache before its first real task."""
    global device_lock
    import zymo  # noqa: F401
    device_lock = locks[int(os.environ.get("ZYMO_DEVICE", "0")) % len(locks)] if locks else None
    if backend == "cuda":
        from ..cuda import driver
        driver.current_device()
    if task is not None:
        from .evaluate import evaluate
        evaluate(task)
