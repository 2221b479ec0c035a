"""Every differentiable corpus kernel: its forward-mode tangents (one direction, and three at
once as multivariate dual numbers) against finite differences in float64, on the interpreter
and the CPU backend. Forward mode needs no tape, so the kernels reverse mode cannot yet
differentiate are checked here too."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import zymo as zm
from corpus import ALL_CASES
from test_corpus_grad import DIFFERENTIABLE, activities

assert DIFFERENTIABLE and ALL_CASES


@pytest.mark.parametrize("width", (1, 3))
@pytest.mark.parametrize("backend", ("interp", "cpu"))
@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda case: case.name)
def test_tangents_match_finite_differences(case, backend, width):
    seed = zlib.crc32(case.name.encode()) + width
    args = case.make_args(np.random.default_rng(seed))
    report = zm.check_jvp(case.kernel, case.grid, case.block, *activities(args), width=width,
                          backend=backend, seed=seed)
    assert len(report.rows) >= width, f"{case.name}: nothing was checked"
    assert report.ok, str(report)
