"""NumPy ufuncs on arrays inside kernels: the loop nest over the output, run by the calling
thread, with the scalar ufunc's rules on every backend and through derivatives."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from zymo.backend.nvptx import ptxas
from zymo.diagnostics import CompileError

from . import ufunc_kernels as K

BACKENDS = ("interp", "cpu")


@pytest.mark.parametrize("backend", BACKENDS)
def test_sine_of_an_array_into_an_output(backend):
    x = np.arange(10, dtype=np.float32) - 5
    r = np.zeros_like(x)
    K.sine.on(backend)[1, 1](r, x)
    np.testing.assert_allclose(r, np.sin(x), rtol=2e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_operator_ufuncs_on_2d_arrays_and_scalars(backend):
    rng = np.random.default_rng(0)
    a, b, out = rng.random((3, 4)), rng.random((3, 4)), np.zeros((3, 4))
    K.add_rows.on(backend)[1, 1](out, a, b)
    np.testing.assert_allclose(out, 2 * (a + b), rtol=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ufunc_on_slices_per_thread(backend):
    x = np.random.default_rng(1).random((5, 6))
    out = np.zeros_like(x)
    K.row_exp.on(backend)[1, 8](out, x)
    expected = np.exp(x)
    expected[:, 0] *= 3
    np.testing.assert_allclose(out, expected, rtol=1e-14)


def test_gradient_through_an_array_ufunc():
    x = np.random.default_rng(2).random(6)
    report = zm.check_grad(K.sine, 1, 1, zm.Duplicated(np.zeros(6), np.random.random(6)),
                           zm.Duplicated(x, np.zeros(6)), backend="interp")
    assert report.ok, str(report)


def test_errors_say_what_to_write():
    with pytest.raises(CompileError, match="needs an output array"):
        K.no_output.specialize(np.zeros(3))
    with pytest.raises(CompileError, match="no broadcasting inside kernels"):
        K.mismatch.specialize(np.zeros((2, 2)), np.zeros(2))


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
def test_ptx_assembles():
    ptxas.assemble(K.sine.specialize(np.zeros(4, np.float32), np.zeros(4, np.float32))
                   .ptx("sm_90"), "sm_90")


@pytest.mark.parametrize("backend", BACKENDS)
def test_builtin_pow_is_the_power_operator(backend):
    rng = np.random.default_rng(3)
    x, y, r = rng.random(8) + 0.5, rng.random(8) * 3, np.zeros(8)
    K.builtin_pow.on(backend)[1, 8](r, x, y)
    np.testing.assert_allclose(r, x ** y + 8, rtol=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_maximum_propagates_nans_and_fmax_ignores_them_as_numpy(backend):
    nan = np.nan
    a = np.array([1.0, nan, 3.0, nan, -1.0], np.float32)
    b = np.array([2.0, 1.0, nan, nan, -2.0], np.float32)
    out = np.zeros((5, 7), np.float32)
    K.nan_extrema.on(backend)[1, 8](out, a, b)
    expected = np.stack([np.maximum(a, b), np.minimum(a, b), np.fmax(a, b), np.fmin(a, b),
                         np.logical_and(a > 0, b > 0), np.logical_or(a > 0, b > 0),
                         np.logical_xor(a > 0, b > 0)], axis=1).astype(np.float32)
    np.testing.assert_array_equal(out, expected)
