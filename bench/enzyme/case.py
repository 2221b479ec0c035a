"""What one application of the Enzyme GPU suite hands the runner.

The runner (`bench/enzyme/run.py`) never knows an application's kernels: it asks the case for a
state at a scale on a device, then calls the launch closures below, each of which queues the
whole program once (every kernel of one primal evaluation, or of one gradient) without
synchronizing. Timing, the correctness gate's report and the table are the runner's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

# scale names every case accepts
GATE = "gate"      # a small instance: float64 finite differences and the dot-product test
QUICK = "quick"    # a reduced instance for CPU runs and smoke tests
PAPER = "paper"    # the Enzyme paper's size (XSBench "large", LULESH s=90, ...)


@dataclass
class Gate:
    """The correctness gate's findings on a small instance, float64."""
    fd_error: float         # worst relative error of directional derivatives vs central FD
    dot_error: float        # |<J v, w> - <v, J^T w>| / max(|.|) (forward vs reverse, or FD vs reverse)
    tolerance: float
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.fd_error <= self.tolerance and self.dot_error <= self.tolerance


@dataclass
class Case:
    name: str                                   # "XSBench"
    paper_ratio: float                          # Enzyme's published gradient/primal time ratio
    features: str                               # one line: what the kernels exercise
    setup: Callable[[str, str], Any]            # (scale, device "cpu"|"cuda") -> state
    primal: Callable[[Any], None]               # zymo primal, as a user compiles it
    primal_as_derivative: Callable[[Any], None]  # the primal compiled the way the derivative is
    gradient: Callable[[Any], None]             # forward + reverse sweep (seeds already in state)
    gate: Callable[[str], Gate]                 # (device) -> the gate on a GATE instance
    tape_bytes: Callable[[Any], int]            # bytes of tape/cache the gradient allocates
    specializations: Callable[[Any], dict]      # label -> compiled specialization (registers, spills)
    cuda_c: str = ""                            # the primal in CUDA C (our own port), for NVRTC
    cuda_c_launch: Callable[[Any, Any], None] | None = None  # (state, nvrtc module) -> queues it
    cuda_c_check: Callable[[Any], float] | None = None  # state -> relative error, CUDA C vs zymo
    notes: list[str] = field(default_factory=list)
    # puts back the seeds a gradient consumes (a store's adjoint zeroes the shadow it read):
    # without it every timed gradient after the first would run on zero cotangents, and
    # derivatives that skip zero updates would time less work than one gradient does
    reseed: Callable[[Any], None] | None = None
