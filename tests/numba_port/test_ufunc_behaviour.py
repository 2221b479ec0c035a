"""numba's behaviour of cuda ufuncs and gufuncs around the kernels: argument counts, options
and signatures as numba checks them, host inputs cast to the declared types, output shapes,
old-style scalar arguments, `UFunc.reduce`, and the low-occupancy warning."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from zymo import cuda
from zymo.cuda import float32, guvectorize, int32, vectorize, void
from zymo.cuda.core.errors import NumbaPerformanceWarning
from zymo.cuda.tests.support import override_config


@pytest.fixture(autouse=True)
def quiet():
    with override_config("CUDA_LOW_OCCUPANCY_WARNINGS", 0):
        yield


@guvectorize([(int32[:], int32[:], int32[:], int32[:])], "(m),(m)->(m),(m)", target="cuda")
def sum_and_difference(x, y, s, d):
    for i in range(x.shape[0]):
        s[i] = x[i] + y[i]
        d[i] = x[i] - y[i]


def test_gufunc_argument_counts_and_out():
    x, y = np.arange(5, dtype=np.int32), np.full(5, 2, np.int32)
    for args in [(x,), (x, y, x, y, x)]:
        with pytest.raises(TypeError) as raised:
            sum_and_difference(*args)
        message = str(raised.value)
        assert "gufunc accepts 2 positional arguments" in message
        assert "or 4 positional arguments" in message
        assert f"Got {len(args)} positional argument{'s' * (len(args) != 1)}." in message
    with pytest.raises(ValueError, match="cannot specify argument 'out' as both positional "
                                         "and keyword"):
        sum_and_difference(x, y, x, out=(x, y))
    s, d = sum_and_difference(x, y)           # outputs allocated: no loop dimension, none added
    assert s.shape == d.shape == (5,) and s.dtype == np.int32
    np.testing.assert_array_equal(s, x + y)
    np.testing.assert_array_equal(d, x - y)
    s, d = np.zeros(5, np.int32), np.zeros(5, np.int32)
    sum_and_difference(x, y, s, d)
    np.testing.assert_array_equal(d, x - y)


def test_gufunc_declaration_errors():
    def core(x, y):
        pass

    with pytest.raises(TypeError, match="guvectorized functions cannot return values.*"
                                        "specifies int32 return type"):
        guvectorize([int32(int32[:], int32[:])], "(m)->(m)", target="cuda")(core)
    guvectorize([void(float32[:], float32[:])], "(x)->(x)", target="cuda", nopython=True)(core)
    with pytest.raises(TypeError) as raised:
        guvectorize([void(float32[:], float32[:])], "(x)->(x)", target="cuda",
                    nopython=False)(core)
    assert str(raised.value) == "nopython flag must be True"
    with pytest.raises(TypeError) as raised:
        guvectorize([void(float32[:], float32[:])], "(x)->(x)", target="cuda", what1=True,
                    ever2=False)(core)
    head = "The following target options are not supported:"
    assert str(raised.value).startswith(head)
    assert {i.strip("'\" ") for i in str(raised.value)[len(head):].split(",")} == \
        {"what1", "ever2"}


def test_gufunc_scalars_cast_to_the_signature():
    @guvectorize(["void(int32, int32[:], int32[:])"], "(),(t)->(t)", target="cuda")
    def scale(a, b, out):
        for i in range(b.size):
            out[i] = a * b[i]

    b = np.arange(10, dtype=np.int32)
    out = scale(np.int64(3), b)                  # int64 where int32 is declared: converted
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, 3 * b)
    np.testing.assert_array_equal(scale(3, b), 3 * b)
    with pytest.raises(TypeError, match=r"does not support \.astype\(\)"):
        scale(cuda.to_device(np.array(3, np.int64)), b)   # device arrays are not converted

    @guvectorize(["void(int32, int32[:])"], "()->()", target="cuda")
    def twice(x, out):
        out[0] = x * 2

    assert twice(10) == 20
    arg = np.arange(10, dtype=np.int32)
    got = twice(arg)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, arg * 2)


def test_gufunc_old_style_scalar_given_as_an_array():
    @guvectorize(["void(int32[:], int32[:], int32[:])"], "(n),()->(n)", target="cuda")
    def shift(x, y, res):
        for i in range(x.shape[0]):
            res[i] = x[i] + y[0]

    a, b = np.array([1, 2, 3, 4], np.int32), np.array([2], np.int32)
    res = np.zeros(4, np.int32)
    shift(a, b, out=res)
    np.testing.assert_array_equal(res, a + b)
    rows, shifts = np.arange(12, dtype=np.int32).reshape(3, 4), np.array([1, 2, 3], np.int32)
    np.testing.assert_array_equal(shift(rows, shifts), rows + shifts[:, None])


def test_gufunc_and_ufunc_low_occupancy_warning():
    @guvectorize(["void(float32[:], float32[:], float32[:])"], "(n),(n)->(n)", target="cuda")
    def product(a, b, out):
        for i in range(a.shape[0]):
            out[i] = a[i] * b[i]

    a = np.arange(64, dtype=np.float32)
    with override_config("CUDA_LOW_OCCUPANCY_WARNINGS", 1):
        with pytest.warns(NumbaPerformanceWarning, match="Grid size 1 .+ low occupancy"):
            out = product(a, a)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            many = product(np.ones((128 * 256, 2), np.float32), np.ones((128 * 256, 2),
                                                                        np.float32))
    np.testing.assert_array_equal(out, a * a)
    assert many.shape == (128 * 256, 2) and (many == 1).all()


def test_cuda_vectorize_options():
    def add(a, b):
        return a + b

    with pytest.warns(RuntimeWarning, match="nopython kwarg for cuda target is redundant"):
        f = vectorize([float32(float32, float32)], target="cuda", nopython=True)(add)
    np.testing.assert_array_equal(f(np.float32([2]), np.float32([3])), [5])
    with pytest.raises(KeyError, match="Unrecognized options"):
        vectorize([float32(float32, float32)], target="cuda", nonexistent=2)


@vectorize(["int32(int32, int32)", "float64(float64, float64)"], target="cuda")
def add(a, b):
    return a + b


@vectorize(["float64(float64, float64)"], target="cuda")
def larger(a, b):
    return a if a > b else b


@pytest.mark.parametrize("n", [1, 2, 7, 8, 100, 1025])
def test_reduce_is_a_tree_of_launches_along_axis_0(n):
    x = np.arange(n, dtype=np.int32) - 3
    got = add.reduce(x)
    assert got.dtype == np.int32 and got == x.sum()
    d = cuda.to_device(x)
    assert add.reduce(d, stream=cuda.stream()) == x.sum()
    np.testing.assert_array_equal(d.copy_to_host(), x)          # the argument is not written
    rng = np.random.default_rng(n)
    v = rng.standard_normal(n)
    assert larger.reduce(v) == v.max()


def test_reduce_of_rows_and_errors():
    m = np.arange(35, dtype=np.float64).reshape(7, 5)
    np.testing.assert_allclose(add.reduce(m), m.sum(0))
    got = add.reduce(cuda.to_device(m))
    assert cuda.is_cuda_array(got)
    np.testing.assert_allclose(got.copy_to_host(), m.sum(0))
    with pytest.raises(TypeError, match="empty array"):
        add.reduce(np.zeros(0, np.int32))
    with pytest.raises(NotImplementedError, match="axis 0"):
        add.reduce(m, axis=1)
