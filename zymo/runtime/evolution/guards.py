"""The guards that keep a variant from passing validation without doing the work, each named,
with what it rejects and a count of the variants (edit lists) it rejected in a search.

- poisoned outputs: arrays the original only writes reach every run filled with poison (NaN, or
  random integers), each run on its own fresh copies, so a variant that leaves an element the
  original writes unwritten shows the poison there, whatever an earlier run left in memory;
- fresh inputs: every evaluation draws its inputs from its own seed, and the search refuses an
  `inputs(rng)` that gives the same arrays for two seeds (a variant that writes the expected
  constants would pass every evaluation);
- held-out sizes: a variant that claims a speedup is confirmed at every held-out size
  (`ValidationOptions.sizes`, `inputs(rng, size)`) and the reported one also on the held-out
  input, so a variant right at the search's size only never leads;
- roofline: a timed launch must move the bytes the original's outputs change and the arrays it
  only reads, at the device's peak bandwidth (`roofline_seconds`); a faster time is an
  evaluator flaw or a skipped computation, rejected and reported;
- race check: the interpreter runs a variant that claims a speedup on small inputs and rejects
  a data race that a hardware run may miss.
"""
from __future__ import annotations

import functools
import math
import time

import numpy as np

# guard -> what it rejects (the report's table, in this order)
GUARDS = {
    "poisoned outputs": "leaves unwritten an output element the original writes (the poison "
                        "shows through)",
    "fresh inputs": "wrong output on the evaluation's own random inputs (constants, skipped "
                    "work, writes to inputs)",
    "held-out sizes": "wrong, or failing, at a held-out input size",
    "roofline": "timed faster than moving its bytes at the device's peak bandwidth allows",
    "race check": "a data race on the interpreter",
}
# the start of a failure's reason -> the guard that rejected it
UNWRITTEN = "leaves argument"
HELD_OUT = "held-out"
ROOFLINE = "faster than the roofline"
_BY_REASON = ((UNWRITTEN, "poisoned outputs"), (HELD_OUT, "held-out sizes"),
              (ROOFLINE, "roofline"), ("RaceError", "race check"),
              ("outputs differ", "fresh inputs"), ("NaN or Inf", "fresh inputs"),
              ("writes to argument", "fresh inputs"))


def guard_of(reason: str) -> str | None:
    """The guard whose rejection `reason` is (None: another failure, such as a crash)."""
    for start, guard in _BY_REASON:
        if reason.startswith(start):
            return guard
    return None


def unwritten(positions, poisoned: list, expected: list, got: list) -> int | None:
    """The first of `positions` (arrays the original only writes) where the variant left an
    element the original wrote holding the poison it was given, or None."""
    for k in positions:
        before, want, have = poisoned[k], expected[k], got[k]
        same = _bitwise_equal(have, before)
        if np.any(same & ~_bitwise_equal(want, before)):
            return k
    return None


def _bitwise_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise equality of the bits (a NaN poison equals itself)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return (a.view(np.uint8).reshape(a.shape + (-1,)) ==
            b.view(np.uint8).reshape(b.shape + (-1,))).all(axis=-1)


def require_varied(inputs, seed: int) -> None:
    """Refuse an inputs function whose arrays do not change with the generator: with one input
    for every evaluation, a variant that writes the original's outputs as constants passes."""
    first = list(inputs(np.random.default_rng([seed, 11])))
    second = list(inputs(np.random.default_rng([seed, 12])))
    arrays = [(a, b) for a, b in zip(first, second) if isinstance(a, np.ndarray)]
    if arrays and all(a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
                      for a, b in arrays):
        raise ValueError(
            "zm.evolve: inputs(rng) returned the same arrays for two different generators, so "
            "every evaluation would see one input and a variant that writes the expected "
            "answer as constants would pass; draw the input arrays from rng, e.g. "
            "rng.standard_normal(n).astype(np.float32)")


def with_size(inputs, size):
    """`inputs` at a held-out `size` (`inputs(rng, size)`), picklable for the workers."""
    return functools.partial(inputs, size=size)


# ---- roofline -------------------------------------------------------------------------------
# peak DRAM bandwidth (bytes/s) by the device's name, as vendors state it; a device not named
# here is measured once per worker by a device-to-device copy
PEAK_BANDWIDTH = (("H200", 4.8e12), ("H100 NVL", 3.9e12), ("H100 PCIe", 2.0e12),
                  ("H100", 3.35e12), ("A100-SXM4-80GB", 2.04e12), ("A100 80GB PCIe", 1.94e12),
                  ("A100", 1.555e12), ("L40S", 0.864e12), ("L4", 0.3e12), ("V100", 0.9e12))
# a timed launch restarts from inputs just copied into place, so its bytes may come from a
# cache faster than DRAM: the bound allows this factor on the peak (a gamed time is off by
# orders of magnitude, a sound one must never be rejected)
CACHE_ALLOWANCE = 4.0


def must_move(written: set, read: set, poisoned: list, expected: list) -> int:
    """Bytes a launch cannot avoid moving: every output element whose value the original
    changes is stored once, every array it only reads is loaded once."""
    total = 0
    for k, before in enumerate(poisoned):
        if not isinstance(before, np.ndarray):
            continue
        if k in written:
            changed = ~_bitwise_equal(expected[k], before)
            total += int(changed.sum()) * before.itemsize
        elif k in read:
            total += before.nbytes
    return total


def roofline_seconds(nbytes: int, backend: str) -> float:
    """The least time a launch moving `nbytes` can take on `backend` (0 where no time is
    physical: the interpreter's time is a model)."""
    bandwidth = peak_bandwidth(backend)
    return nbytes / (bandwidth * CACHE_ALLOWANCE) if bandwidth else 0.0


@functools.lru_cache(maxsize=None)
def peak_bandwidth(backend: str) -> float:
    """Bytes per second: the table by GPU name, else a copy measured once (the CPU's too);
    0 on the interpreter."""
    if backend == "interp":
        return 0.0
    if backend == "cuda":
        from ..cuda import driver
        name = driver.current_device().name
        for part, bandwidth in PEAK_BANDWIDTH:
            if part in name:
                return bandwidth
        return _measured_gpu_copy()
    return _measured_host_copy()


def _measured_host_copy(nbytes: int = 64 << 20) -> float:
    source, target = np.ones(nbytes, np.uint8), np.empty(nbytes, np.uint8)
    best = math.inf
    for _ in range(3):
        began = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - began)
    return 2 * nbytes / best        # read and written


def _measured_gpu_copy(nbytes: int = 256 << 20) -> float:
    from ..cuda import Event, to_device
    source = to_device(np.ones(nbytes, np.uint8))
    target = to_device(np.empty(nbytes, np.uint8))
    best = math.inf
    for _ in range(3):
        start, end = Event(), Event()
        start.record()
        target.copy_from_device(source)
        end.record()
        end.synchronize()
        best = min(best, end.elapsed_ms(start) / 1e3)
    return 2 * nbytes / best
