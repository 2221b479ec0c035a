"""Rodinia particlefilter: the likelihood kernel on the CPU backend against NumPy (Rodinia's
generator bit for bit), the check rejects variants that drop part of the work (including one
GEVO's 1% alone would pass), and the kernel assembles for the GPU."""
import functools

import numpy as np
import pytest

import zymo as zm

from rodinia_helpers import on_cpu, race_free, run
from bench.evolve import rodinia_particlefilter as pf
from bench.evolve.rodinia_common import elementwise_relative
from zymo.backend.nvptx import ptxas
from zymo.runtime.evolution.workers import IsolatedPool

W = pf.WORKLOADS["rodinia_particlefilter"]


@pytest.mark.parametrize("isz_x,isz_y,nfr,n,k", [(20, 24, 6, 600, 3), (16, 16, 3, 77, 1),
                                                 (30, 22, 5, 1025, 4)])
def test_kernel_matches_numpy(isz_x, isz_y, nfr, n, k):
    args = pf.inputs(np.random.default_rng(n), isz_x=isz_x, isz_y=isz_y, nfr=nfr, n=n, k=k)
    got = on_cpu(W, args)
    x, y, w, seed = pf.reference(args)
    np.testing.assert_allclose(got[pf.ARRAY_X], x, rtol=1e-14)
    np.testing.assert_allclose(got[pf.ARRAY_Y], y, rtol=1e-14)
    np.testing.assert_allclose(got[pf.WEIGHTS], w, rtol=1e-11)   # exp of sums of ~300
    np.testing.assert_array_equal(got[pf.SEED], seed)
    blocks = pf.cdiv(n, pf.THREADS)
    sums = [w[b * pf.THREADS:(b + 1) * pf.THREADS].sum() for b in range(blocks)]
    np.testing.assert_allclose(got[pf.PARTIAL_SUMS][:blocks], sums, rtol=1e-11)
    assert W.check(got, got) == 0.0


def test_the_generator_is_rodinias():
    """GCC's LCG in C's int arithmetic: 1103515245 s + 12345 wraps, the remainder by INT_MAX
    keeps the dividend's sign, the draw is its magnitude over INT_MAX."""
    seed = np.array([0, 1, 2 ** 31 - 2, 7], np.int32)
    u = pf.lcg_uniform(seed)
    expected = []
    for s in (0, 1, 2 ** 31 - 2, 7):
        num = (1103515245 * s + 12345) & 0xFFFFFFFF
        num = num - 2 ** 32 if num >= 2 ** 31 else num
        rem = abs(num) % (2 ** 31 - 1) * (1 if num >= 0 else -1)
        expected.append(rem)
    np.testing.assert_array_equal(seed, expected)
    np.testing.assert_allclose(u, np.abs(np.array(expected)) / (2 ** 31 - 1))


def _variant(args, expected, **change):
    """The launch's outputs with some replaced (weights also updates the block sums)."""
    got = [np.copy(a) if isinstance(a, np.ndarray) else a for a in expected]
    for name, value in change.items():
        got[getattr(pf, name)] = value
    if "WEIGHTS" in change:
        n = int(args[pf.N_PARTICLES])
        for b in range(pf.cdiv(n, pf.THREADS)):
            got[pf.PARTIAL_SUMS][b] = got[pf.WEIGHTS][b * pf.THREADS:(b + 1) * pf.THREADS].sum()
    return got


def test_check_rejects_dropped_work():
    args = pf.inputs(np.random.default_rng(7), isz_x=40, isz_y=40, nfr=8, n=1100, k=2)
    expected = on_cpu(W, args)
    n = int(args[pf.N_PARTICLES])
    x, y, w, seed = pf.reference(args)
    # the weights without the likelihood, or from 67 of the 69 pixels
    bad = [_variant(args, expected, WEIGHTS=np.full(n, 1.0 / n))]
    fewer = args[pf.OBJXY][:-4]
    _, _, w67 = pf.likelihood_step(args[pf.FRAMES], args[pf.XJ], args[pf.YJ],
                                   args[pf.SEED].copy(), fewer, int(args[pf.FRAME]),
                                   int(args[pf.ISZ_Y]), int(args[pf.NFR]))
    bad.append(_variant(args, expected, WEIGHTS=w67))
    # the seeds not written back; a move without its random part
    bad.append(_variant(args, expected, SEED=args[pf.SEED].copy()))
    bad.append(_variant(args, expected, ARRAY_Y=args[pf.YJ] - 2.0))
    # the block sum that holds the largest weight lost (the others barely count)
    lost = expected[pf.PARTIAL_SUMS].copy()
    lost[int(np.argmax(expected[pf.WEIGHTS])) // pf.THREADS] = 0.0
    bad.append(_variant(args, expected, PARTIAL_SUMS=lost))
    for k, variant in enumerate(bad):
        assert W.check(expected, variant) > W.tolerance, k
    # float32 positions pass
    close = _variant(args, expected, ARRAY_X=x.astype(np.float32).astype(np.float64))
    assert W.check(expected, close) < 1e-3


def test_a_dropped_drift_fails_though_gevos_one_percent_passes():
    """On a 256-pixel frame the particles sit near 128: dropping the drift of 1 is within 1% of
    every position, but not within 1% of the frame's move."""
    args = pf.inputs(np.random.default_rng(3), isz_x=256, isz_y=256, nfr=3, n=600, k=1)
    expected = on_cpu(W, args)
    bad = _variant(args, expected, ARRAY_X=expected[pf.ARRAY_X] - 1.0)
    assert elementwise_relative(expected[pf.ARRAY_X], bad[pf.ARRAY_X]) < 0.01
    assert W.check(expected, bad) > W.tolerance


def test_race_free_inputs_vary_and_holdout_differs():
    race_free(W)
    a, b = (W.race_check(np.random.default_rng(s)) for s in (1, 2))
    assert not np.array_equal(a[pf.SEED], b[pf.SEED])
    assert not np.array_equal(a[pf.FRAMES], b[pf.FRAMES])
    held = W.holdout(None)
    assert int(held[pf.N_PARTICLES]) == 30011 and held[pf.FRAMES].size == 256 * 200 * 20
    assert W.launch(held) == ((59,), (512,))
    # the video: the disk (69 cells of 228 before noise) on a background of 100
    frames = pf.video(np.random.default_rng(0), 64, 64, 3).reshape(64, 64, 3)
    assert pf.disk_offsets().size == 2 * 69
    assert ((frames[:, :, 0] > 164).sum(), np.median(frames)) == (69, 100)


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
def test_kernel_assembles():
    args = W.race_check(np.random.default_rng(1))
    report = ptxas.assemble(W.kernel.specialize(*args).ptx(arch="sm_90"), "sm_90")
    assert report.registers > 0


@pytest.mark.slow   # ~30 s on 2 busy cores
def test_a_short_search_keeps_the_filter():
    pool = IsolatedPool(2, timeout=60.0, env={"ZYMO_CPU_THREADS": "1"})
    try:
        result = zm.evolve(W.kernel, W.launch, functools.partial(pf.inputs, isz_x=32, isz_y=32,
                                                                 nfr=6, n=700),
                           check=W.check, tolerance=W.tolerance, population=6, generations=2,
                           seed=2, executor=pool, backend="cpu", progress=False,
                           holdout=functools.partial(pf.inputs, isz_x=40, isz_y=28, nfr=5,
                                                     n=1300, k=3),
                           race_check=W.race_check)
    finally:
        pool.shutdown()
    assert len(result.history) == 3 and result.history[-1]["evaluations"] > 6
    # whatever it reports still filters, on an input it has never seen
    best = result.best if result.best is not None else W.kernel
    args = pf.inputs(np.random.default_rng(99), isz_x=24, isz_y=36, nfr=4, n=900, k=2)
    expected = on_cpu(W, args)
    assert W.check(expected, run(best, W.launch, args, "cpu")) <= W.tolerance
