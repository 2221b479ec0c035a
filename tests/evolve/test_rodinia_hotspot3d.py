"""Rodinia hotspot3D: the kernel on the CPU backend against the NumPy step, and the check
rejects a variant that drops the power term."""

import numpy as np

from rodinia_helpers import on_cpu, race_free
from bench.evolve import rodinia_hotspot3d as h3


def test_kernel_matches_numpy_on_odd_sizes():
    w = h3.WORKLOADS["rodinia_hotspot3d"]
    for nx, ny, nz in ((70, 9, 5), (64, 4, 1), (33, 17, 2)):
        args = h3.inputs(np.random.default_rng(nz), nx=nx, ny=ny, nz=nz)
        got = on_cpu(w, args)
        np.testing.assert_allclose(got[h3.T_OUT], h3.reference(args), rtol=2e-6)
        assert w.check(got, got) == 0.0


def test_check_rejects_a_dropped_power_term():
    w = h3.WORKLOADS["rodinia_hotspot3d"]
    args = h3.inputs(np.random.default_rng(3), nx=40, ny=8, nz=4)
    expected = on_cpu(w, args)
    bad = list(expected)
    bad[h3.T_OUT] = (h3.reference(args) - float(args[-2]) * args[h3.P]).astype(np.float32)
    assert w.check(expected, bad) > w.tolerance
    # a float32 rounding of the step passes
    close = list(expected)
    close[h3.T_OUT] = h3.reference(args).astype(np.float32)
    assert w.check(expected, close) < 1e-3


def test_race_free_and_inputs_vary():
    w = h3.WORKLOADS["rodinia_hotspot3d"]
    race_free(w)
    a, b = (h3.inputs(np.random.default_rng(s), nx=8, ny=4, nz=2) for s in (1, 2))
    assert not np.array_equal(a[h3.T_IN], b[h3.T_IN])
