"""Every differentiable corpus kernel: its reverse-mode gradient against finite differences
(float64, random directions and output cotangents) on the interpreter and the CPU backend.
Tiled matmul, n-body and softmax need tapes (shared-memory tiles reloaded per iteration,
in-place updates in loops): global tapes sized at launch."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import zymo as zm
from corpus import ALL_CASES

DIFFERENTIABLE = [case for case in ALL_CASES if case.differentiable]

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
    report = zm.check_grad(case.kernel, case.grid, case.block, *activities(args),
                           backend=backend, seed=seed)
    assert report.rows, f"{case.name}: nothing was checked"
    assert report.ok, str(report)
