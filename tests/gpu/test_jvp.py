"""Forward mode on the GPU: the differentiable corpus's tangents (W = 1 and 3) against finite
differences, device-level jvp/jacfwd (and reverse mode: vjp/grad/jacrev) against the
interpreter, and a CuPy leading-axis batch."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import zymo as zm
from ad import kernels as K
from ad.test_corpus_grad import DIFFERENTIABLE, activities
from ad.test_forward import device_derivatives

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("width", (1, 3))
@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda case: case.name)
def test_corpus_tangents_on_gpu(case, width):
    seed = zlib.crc32(case.name.encode()) + width
    args = case.make_args(np.random.default_rng(seed))
    report = zm.check_jvp(case.kernel, case.grid, case.block, *activities(args), width=width,
                          backend="cuda", seed=seed)
    assert report.ok, str(report)


def test_device_level_derivatives_match_the_interpreter():
    rng = np.random.default_rng(4)
    n = 100
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    q = rng.standard_normal((n, 14)) * 0.5
    out, jac = np.zeros((n, 6)), np.zeros((n, 3, 14))
    device_derivatives.on("interp")[4, 32](x, y, q, out, jac)
    arrays = [zm.to_device(a) for a in (x, y, q, np.zeros((n, 6)), np.zeros((n, 3, 14)))]
    device_derivatives[4, 32](*arrays)
    np.testing.assert_allclose(arrays[3].copy_to_host(), out, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(arrays[4].copy_to_host(), jac, rtol=1e-12, atol=1e-14)


def test_cupy_leading_axis_batch():
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(2)
    x = rng.standard_normal(256)
    t = rng.standard_normal((4, 256))
    outs = cp.zeros((4, 256))
    zm.jvp(K.exp_cos, width=4)[2, 128](zm.BatchDuplicated(cp.asarray(x), cp.asarray(t)),
                                       zm.BatchDuplicated(cp.zeros(256), outs))
    host = np.zeros((4, 256))
    zm.jvp(K.exp_cos, width=4).on("cpu")[2, 128](zm.BatchDuplicated(x, t.copy()),
                                                  zm.BatchDuplicated(np.zeros(256), host))
    np.testing.assert_allclose(cp.asnumpy(outs), host, rtol=1e-13)


def test_device_level_reverse_mode_matches_the_interpreter():
    from ad.test_device_reverse import reverse_inside
    rng = np.random.default_rng(5)
    n = 100
    x, y = rng.uniform(-2.0, 4.0, n), rng.standard_normal(n)
    q = rng.standard_normal((n, 14)) * 0.5
    counts = rng.integers(0, 6, n).astype(np.int32)
    out, jac = np.zeros((n, 8)), np.zeros((2, n, 3, 14))
    reverse_inside.on("interp")[4, 32](x, y, q, counts, out, jac)
    arrays = [zm.to_device(a) for a in (x, y, q, counts, np.zeros_like(out), np.zeros_like(jac))]
    reverse_inside[4, 32](*arrays)
    np.testing.assert_allclose(arrays[4].copy_to_host(), out, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(arrays[5].copy_to_host(), jac, rtol=1e-12, atol=1e-14)
