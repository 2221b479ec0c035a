"""What the Rodinia workload tests share: the bench import path, a CPU launch, the race check."""
from __future__ import annotations

import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from zymo.runtime.evolution.screening import interpreted  # noqa: E402
from zymo.runtime.evolution.validation import Task  # noqa: E402
from zymo.runtime.evolution.worker import run  # noqa: E402


def on_cpu(workload, args) -> list:
    """The workload's kernel launched on the CPU backend; the arguments after the launch."""
    return run(workload.kernel, workload.launch, [np.copy(a) if isinstance(a, np.ndarray)
                                                  else a for a in args], "cpu")


def race_free(workload) -> None:
    """The original passes the interpreter's race check and its own check there."""
    verdict = interpreted(Task(workload.kernel, (), workload.race_check, workload.check,
                               workload.launch, 1, "interp", 1, False))
    assert verdict.valid and not verdict.reason, verdict.reason
