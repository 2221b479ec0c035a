"""Rodinia SRAD v2: both kernels on the CPU backend against NumPy, and their checks reject a
variant that drops a direction of the diffusion."""
import numpy as np

from rodinia_helpers import on_cpu, race_free
from bench.evolve import rodinia_srad as sr


def test_kernel_1_matches_numpy():
    w = sr.WORKLOADS["rodinia_srad"]
    args = sr.inputs_1(np.random.default_rng(1), rows=48, cols=32)
    got = on_cpu(w, args)
    want = sr.step_1(args[sr.J], float(args[-1]))
    for k, pos in enumerate(range(sr.DN, sr.C + 1)):
        np.testing.assert_allclose(got[pos], want[k], rtol=1e-4, atol=1e-5)
    assert w.check(got, got) == 0.0
    bad = list(got)
    bad[sr.DE] = np.zeros_like(got[sr.DE])
    assert w.check(got, bad) > w.tolerance


def test_kernel_2_matches_numpy():
    w = sr.WORKLOADS["rodinia_srad2"]
    args = sr.inputs_2(np.random.default_rng(2), rows=32, cols=64)
    got = on_cpu(w, args)
    want = sr.step_2(args[sr.J], *args[sr.DN:sr.C + 1], float(args[-1]))
    np.testing.assert_allclose(got[sr.J], want, rtol=1e-6)
    assert w.check(got, got) == 0.0
    bad = list(got)
    bad[sr.J] = sr.step_2(args[sr.J], *args[sr.DN:sr.DE], np.zeros_like(args[sr.DE]),
                          args[sr.C], float(args[-1])).astype(np.float32)
    assert w.check(got, bad) > w.tolerance
    close = list(got)
    close[sr.J] = want.astype(np.float32)
    assert w.check(got, close) < 1e-3


def test_race_free():
    race_free(sr.WORKLOADS["rodinia_srad"])
    race_free(sr.WORKLOADS["rodinia_srad2"])
