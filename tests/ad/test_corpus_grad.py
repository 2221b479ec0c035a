"""Every differentiable corpus kernel: its reverse-mode gradient against finite differences
(float64, random directions and output cotangents) on the interpreter and the CPU backend."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import zymo as zm
from corpus import ALL_CASES

DIFFERENTIABLE = [case for case in ALL_CASES if case.differentiable]

# Kernels whose reverse sweep needs values that a loop with a run-time trip count overwrites
# in memory (shared-memory tiles reloaded per iteration, in-place updates): they need a global
# tape, which is not built yet, so they must fail to compile with the line and the reason,
# never run wrong. (solve4's in-place elimination runs in static loops: a per-thread tape.)
NEEDS_TAPE = {"matmul_tiled_64x48x32", "matmul_tiled_37x29x41", "nbody_accel", "softmax_rows"}


def activities(args: list) -> list:
    """Float arrays are Duplicated, float scalars Active, the rest Const."""
    out = []
    for value in args:
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            out.append(zm.Duplicated(value, np.zeros_like(value)))
        elif isinstance(value, (float, np.floating)):
            out.append(zm.Active(value))
        else:
            out.append(value)
    return out


@pytest.mark.parametrize("backend", ("interp", "cpu"))
@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda case: case.name)
def test_gradient_matches_finite_differences(case, backend):
    seed = zlib.crc32(case.name.encode())
    args = case.make_args(np.random.default_rng(seed))
    if case.name in NEEDS_TAPE:
        with pytest.raises(zm.CompileError, match="which is written later"):
            zm.check_grad(case.kernel, case.grid, case.block, *activities(args),
                          backend=backend, seed=seed)
        return
    report = zm.check_grad(case.kernel, case.grid, case.block, *activities(args),
                           backend=backend, seed=seed)
    assert report.rows, f"{case.name}: nothing was checked"
    assert report.ok, str(report)
