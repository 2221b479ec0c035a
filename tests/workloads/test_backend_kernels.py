"""The backend benchmark kernels as evolution workloads: each original passes its own check and
the interpreter's race check, and the norm-wise check tells a reordered sum from a dropped
term."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.evolve.backend_kernels import WORKLOADS, normwise_error  # noqa: E402
from bench.evolve.workloads import load  # noqa: E402
from zymo.runtime.evolution.screening import interpreted  # noqa: E402
from zymo.runtime.evolution.validation import Task  # noqa: E402
from zymo.runtime.evolution.worker import run  # noqa: E402


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_original_is_race_free_and_matches_numpy(name):
    workload = WORKLOADS[name]
    verdict = interpreted(Task(workload.kernel, (), workload.race_check, workload.check,
                               workload.launch, 1, "interp", 1, False))
    assert verdict.valid and not verdict.reason, verdict.reason
    args = workload.race_check(np.random.default_rng(2))
    got = run(workload.kernel, workload.launch, args, "cpu")
    if name == "sgemm":
        want = args[0].astype(np.float64) @ args[1]
        np.testing.assert_allclose(got[2], want, rtol=1e-4, atol=1e-4)
    elif name == "hotspot":
        t = args[0].astype(np.float64)
        p = np.pad(t, 1, mode="edge")
        cap, rx, ry, rz, amb = args[3:]
        want = t + cap * (args[1] + (p[:-2, 1:-1] + p[2:, 1:-1] - 2 * t) * ry
                          + (p[1:-1, :-2] + p[1:-1, 2:] - 2 * t) * rx + (amb - t) * rz)
        np.testing.assert_allclose(got[2], want, rtol=1e-6)
    else:
        pos = args[0].astype(np.float64)
        d = pos[None, :, :3] - pos[:, None, :3]
        inv = 1.0 / np.sqrt((d ** 2).sum(-1) + args[2])
        want = (d * (pos[None, :, 3] * inv ** 3)[..., None]).sum(1)
        np.testing.assert_allclose(got[1], want, rtol=1e-3, atol=1e-3)


def test_normwise_error():
    e = [np.array([1.0, -2.0, 1e-9], np.float32), np.array([3], np.int32)]
    assert normwise_error(e, [a.copy() for a in e]) == 0.0
    small = [e[0] + np.float32(1e-7), e[1]]
    assert 0 < normwise_error(e, small) < 1e-6
    assert normwise_error(e, [e[0], np.array([4], np.int32)]) == np.inf
    assert normwise_error(e, [np.full(3, np.nan, np.float32), e[1]]) == np.inf


def test_every_workload_is_registered():
    names = set(load())
    assert {"sw_v0", "sw_v1", "sgemm", "hotspot", "nbody"} <= names
    with pytest.raises(KeyError, match="no workload named"):
        load(["nope"])
