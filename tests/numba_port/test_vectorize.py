"""zymo.cuda.vectorize / guvectorize: generated kernels over broadcast arrays, checked against
NumPy on the CPU backend, through ptxas for CUDA, and on a GPU (marked)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from zymo.backend.nvptx import ptxas
from zymo.cuda import guvectorize, vectorize

needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")


@vectorize(["float32(float32, float32)", "float64(float64, float64)"], target="cuda")
def hypot(a, b):
    return math.sqrt(a * a + b * b)


@vectorize(["int64(int64, int64)"], target="parallel")
def clamp_diff(a, b):
    return a - b if a > b else 0


def test_vectorize_broadcasts_like_numpy():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = hypot(x, np.float32(2))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.hypot(x, 2), rtol=1e-6)
    col, row = np.arange(4.0)[:, None], np.linspace(0, 1, 5)
    got = hypot(col, row)
    assert got.dtype == np.float64 and got.shape == (4, 5)
    np.testing.assert_allclose(got, np.hypot(col, row), rtol=1e-15)
    assert hypot(3.0, 4.0) == 5.0


def test_vectorize_out_and_signature_choice():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]     # strided input
    out = np.zeros((3, 2), np.float32)
    assert hypot(x, x, out=out) is out
    np.testing.assert_allclose(out, np.hypot(x, x), rtol=1e-6)
    a, b = np.arange(-5, 5), np.int64(1)
    np.testing.assert_array_equal(clamp_diff(a, b), np.maximum(a - 1, 0))
    with pytest.raises(TypeError, match="no signature"):
        clamp_diff(np.ones(3, np.float64), 1.0)


@guvectorize(["void(float64[:], float64, float64[:])"], "(n),()->(n)", target="cuda")
def scaled(v, s, out):
    for i in range(v.shape[0]):
        out[i] = v[i] * s


@guvectorize(["void(float64[:], float64[:])"], "(n)->()", target="cpu")
def row_sum(v, out):
    s = 0.0
    for x in v:
        s += x
    out[0] = s


@guvectorize(["void(float64[:, :], float64[:], float64[:])"], "(m,n),(n)->(m)", target="cpu")
def matvec(a, x, out):
    for i in range(a.shape[0]):
        s = 0.0
        for j in range(a.shape[1]):
            s += a[i, j] * x[j]
        out[i] = s


def test_guvectorize():
    v = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(scaled(v, 2.0), v * 2)
    np.testing.assert_array_equal(scaled(v, np.array([1.0, 2.0, 3.0])[:, None][:, 0]),
                                  v * np.array([[1.0], [2.0], [3.0]]))
    np.testing.assert_array_equal(row_sum(v), v.sum(1))
    stack, x = np.arange(24.0).reshape(2, 3, 4), np.arange(4.0)
    np.testing.assert_allclose(matvec(stack, x), stack @ x)
    out = np.zeros((2, 3))
    matvec(stack, x, out=out)
    np.testing.assert_allclose(out, stack @ x)


@needs_ptxas
def test_generated_kernels_assemble():
    x = np.zeros((2, 3), np.float32)
    hypot(x, x)
    scaled(np.zeros((2, 3)), 1.0)
    for generated in (hypot.generated, scaled.generated):
        for kernel in generated.kernels.values():
            spec = next(iter(kernel._specs.values()))
            for arch in ("sm_80", "sm_90"):
                ptxas.assemble(spec.ptx(arch), arch)



@guvectorize(["void(float64[:], float64[:])"], "(n)->(n)", target="cuda")
def copy_core(a, b):
    for i in range(b.size):
        b[i] = a[i] * 2.0


@guvectorize(["void(float64[:], float64[:], float64[:])"], "(n),(n)->()", target="cuda")
def dot_core(x, y, r):
    s = 0.0
    for i in range(len(x)):
        s += x[i] * y[i]
    r[0] = s


def test_guvectorize_without_loop_dimensions_and_nested_sequences():
    a = np.arange(7.0)
    out = np.zeros(7)
    assert copy_core(a, out=out) is out          # a loop of one; `out` is written in place
    np.testing.assert_array_equal(out, a * 2)
    a, b = ((1.0, 2.0, 3.0), (4.0, 5.0, 6.0)), ((1.5, 2.5, 3.5), (4.5, 5.5, 6.5))
    np.testing.assert_array_equal(dot_core(a, b), np.sum(np.multiply(a, b), axis=1))
    with pytest.raises(TypeError, match="an output of shape"):
        copy_core(np.zeros((2, 7)), out=np.zeros(7))


def test_without_signatures_types_come_from_the_function():
    import math
    from zymo import vectorize as cpu_vectorize

    @cpu_vectorize
    def erf(x):
        return math.erf(x)

    @cpu_vectorize
    def mixed(i, x):
        return i < x

    ints = np.arange(-3, 4, dtype=np.int64)
    got = erf(ints)
    assert got.dtype == np.float64            # math.erf of an int is a float, as numba's
    np.testing.assert_allclose(got, [math.erf(v) for v in ints], rtol=1e-15)
    flags = mixed(ints, np.float32(0.5))
    assert flags.dtype == np.bool_
    np.testing.assert_array_equal(flags, ints < 0.5)
