"""Where a worker's evaluation time goes, by phase: compiling, making inputs, waiting for its
GPU's lock, holding it (every launch, copy and timing), checking outputs, the interpreter's race
check. Each fitness carries its evaluation's split (`Fitness.spent`), so that a search can say
per GPU whether the device was busy (the lock held most of the time: more GPUs help) or its
workers were compiling or waiting (more GPUs help less)."""
from __future__ import annotations

import contextlib
import os
import time

PHASES = ("compile", "inputs", "lock wait", "on device", "checking", "interpreter")
_totals = dict.fromkeys(PHASES, 0.0)


@contextlib.contextmanager
def timed(phase: str):
    began = time.perf_counter()
    try:
        yield
    finally:
        _totals[phase] += time.perf_counter() - began


def mark() -> dict:
    """This worker's totals so far, for `since`."""
    return dict(_totals)


def since(before: dict, seconds: float) -> dict:
    """The split of an evaluation of `seconds` that began at `before` (its other time, the
    worker's own bookkeeping, as "other"), and the device it ran on."""
    split = {phase: _totals[phase] - before[phase] for phase in PHASES}
    split["other"] = max(0.0, seconds - sum(split.values()))
    split["device"] = device()
    return split


def device() -> str:
    """The GPU this worker uses, as the machine numbers it (CUDA_VISIBLE_DEVICES maps the
    worker's ordinal ZYMO_DEVICE to it), or "cpu"."""
    ordinal = os.environ.get("ZYMO_DEVICE")
    if ordinal is None:
        return "cpu"
    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v]
    index = int(ordinal)
    return f"gpu {visible[index] if index < len(visible) else index}"


def tally(totals: dict, split: dict | None) -> None:
    """Add an evaluation's `split` to `totals` (device -> phase -> seconds, and its count)."""
    if not split:
        return
    mine = totals.setdefault(split["device"], {"evaluations": 0})
    mine["evaluations"] += 1
    for phase, seconds in split.items():
        if phase != "device":
            mine[phase] = mine.get(phase, 0.0) + seconds
