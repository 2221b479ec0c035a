"""Every table case of the pass tests computes the same memory before and after its pass (and
after the whole pipeline), on the reference interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from zymo.backend import interp
from zymo.ir import Module
from zymo.ir.types import Array
from zymo.passes import PASSES, run_pipeline

from . import test_cse, test_dce, test_fold, test_inline, test_lasttrip, test_licm

TABLES = {"fold": test_fold.CASES, "cse": test_cse.CASES, "dce": test_dce.CASES,
          "licm": test_licm.CASES, "inline": test_inline.CASES,
          "last-trip": test_lasttrip.CASES}
CANNOT_RUN = {
    ("fold", "loops"): "has a loop with step 0, which never ends",
    ("inline", "no_kernel"): "has no kernel to launch",
    ("dce", "effects_kept"): "calls a device function, which only inlining makes runnable",
}
PARAMS = [(pass_name, case) for pass_name, cases in TABLES.items() for case in cases]


def arguments(module: Module, seed: int) -> list:
    """Small scalars (indices stay in bounds) and arrays of 64 (or 8 x 8) random values."""
    rng = np.random.default_rng(seed)
    values = []
    for arg in module.kernel.regions[0].block.args:
        if isinstance(arg.type, Array):
            dtype, shape = arg.type.dtype.dtype, (64,) if arg.type.ndim == 1 else (8, 8)
        else:
            dtype, shape = arg.type.dtype, ()
        if dtype.kind == "f":
            value = rng.uniform(-2, 2, shape).astype(dtype)
        else:
            value = rng.integers(0, 2 if dtype.kind == "b" else 4, shape).astype(dtype)
        values.append(value if shape else value[()])
    return values


def launch(module: Module, seed: int) -> list:
    args = arguments(module, seed)
    interp.run(module, 1, 1, args)
    return [a for a in args if isinstance(a, np.ndarray)]


@pytest.mark.parametrize("pass_name, case", PARAMS, ids=[f"{p}-{c}" for p, c in PARAMS])
@pytest.mark.parametrize("whole_pipeline", [False, True], ids=["pass", "pipeline"])
def test_same_memory(pass_name, case, whole_pipeline):
    if (pass_name, case) in CANNOT_RUN:
        pytest.skip(CANNOT_RUN[pass_name, case])
    build = TABLES[pass_name][case]
    original, optimized = Module(), Module()
    build(original)
    build(optimized)
    if whole_pipeline:
        run_pipeline(optimized, verify=True)
    else:
        PASSES[pass_name]().run(optimized)
    for seed in range(3):
        for want, got in zip(launch(original, seed), launch(optimized, seed)):
            np.testing.assert_array_equal(got, want)
