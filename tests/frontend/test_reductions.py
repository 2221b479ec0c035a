"""NumPy reductions of whole arrays inside kernels (np.sum(a), a.max(), np.nanmean(a), ...): each
thread reduces its array in order; values, result types and NaN rules are NumPy's on every
backend, and the float ones are differentiable. Also numba's literal_unroll."""
from __future__ import annotations

import warnings
from functools import cache

import numpy as np
import pytest

import zymo as zm
from zymo.backend.nvptx import ptxas
from zymo.diagnostics import CompileError

BACKENDS = ("interp", "cpu")
NAN, INF = float("nan"), float("inf")

FUNCTIONS = {name: getattr(np, name) for name in (
    "sum", "prod", "mean", "var", "std", "min", "max", "all", "any", "nanmin", "nanmax",
    "nanmean", "nansum", "nanprod", "count_nonzero")}
REAL_ONLY = {"min", "max", "nanmin", "nanmax", "nanmean", "nansum", "nanprod"}


def expected(fn, a):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(fn(a))


@cache
def reducer(name: str):
    """out[i] = fn(a[i]) for each row i: one thread per row, of any rank below."""
    fn = FUNCTIONS[name]

    @zm.kernel
    def kernel(out, a):
        i = zm.grid(1)
        if i < a.shape[0]:
            out[i] = fn(a[i])

    return kernel


def run(name, a, backend, out_dtype=None):
    fn = FUNCTIONS[name]
    want = np.stack([expected(fn, row) for row in a])
    out = np.zeros(len(a), out_dtype or want.dtype)
    reducer(name).on(backend)[1, 32](out, a)
    return out, want


def close(got, want, dtype):
    if np.dtype(dtype).kind in "fc":
        tol = 1e-12 if np.dtype(dtype).itemsize >= 8 and np.dtype(dtype).kind == "f" or \
            np.dtype(dtype) == np.complex128 else 2e-6
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def sample(dtype, shape, rng):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.6
    if dtype.kind in "iu":
        low = 0 if dtype.kind == "u" else -4
        return rng.integers(low, 5, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.random(shape) - 0.5 + 1j * (rng.random(shape) - 0.5)).astype(dtype)
    return (rng.random(shape) * 2 - 0.5).astype(dtype)


# complex numbers have no order, and no NaN-skipping forms here (a compile error, tested below)
COMBINATIONS = [(name, dtype) for name in sorted(FUNCTIONS)
                for dtype in ("f8", "f4", "i4", "u1", "?", "c16")
                if not (dtype == "c16" and name in REAL_ONLY)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, dtype", COMBINATIONS)
@pytest.mark.parametrize("shape", [(5, 7), (3, 4, 3), (2, 3, 2, 2)], ids=["1d", "2d", "3d"])
def test_values_and_types_as_numpy(backend, name, dtype, shape):
    a = sample(dtype, shape, np.random.default_rng(hash((name, dtype)) % 1000))
    got, want = run(name, a, backend)
    # the result type is NumPy's: int32 sums are int64, means of ints float64, var of complex
    # real, min/max keep the element type, all/any are bool
    assert want.dtype == expected(FUNCTIONS[name], a[0]).dtype
    close(got, want, want.dtype)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_sums_accumulate_in_int64_and_means_in_float64(backend):
    big = np.iinfo(np.int32).max
    a = np.array([[big, big, big], [-big, -big, 3]], np.int32)
    got, want = run("sum", a, backend, np.int64)
    assert list(got) == [3 * big, -2 * big + 3] == list(want)
    got, _ = run("mean", np.array([[1, 2], [3, 6]], np.int8), backend)
    assert list(got) == [1.5, 4.5]
    got, _ = run("max", np.array([[250, 3], [0, 255]], np.uint8), backend, np.int64)
    assert list(got) == [250, 255]   # compared unsigned, kept unsigned


ROWS = np.array([
    [1.0, 2.0, 0.0, -0.0, 1.0, -1.5],
    [-1.5, 2.5, INF, -INF, 0.5, 0.5],
    [NAN, -1.5, 2.5, NAN, 3.0, 1.0],
    [5.0, NAN, -1.5, 7.0, -2.0, 0.0],
    [NAN, NAN, NAN, NAN, NAN, NAN],
    [-0.0, -1.5, -INF, 2.0, 2.0, NAN],
])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(set(FUNCTIONS) - {"count_nonzero"}))
def test_nan_and_infinity_rules(backend, name):
    # min/max/sum propagate a NaN, the nan* forms skip them (all-NaN: NaN for nanmin/nanmax,
    # as numba; 0 for nansum), NaN counts as true
    got, want = run(name, ROWS, backend)
    np.testing.assert_array_equal(got, want)
    numbers = ~np.isnan(want)   # a NaN's sign bit is NumPy's accident (it differs by version)
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


@zm.kernel
def views(out, a, counts):
    i = zm.grid(1)
    if i < a.shape[0]:
        row = a[i, ::2]
        out[i, 0] = row.sum()
        out[i, 1] = a[i, 1:4].max()
        out[i, 2] = np.mean(a[:, i])            # a strided column
        out[i, 3] = a[i, :].var()
        out[i, 4] = np.std(a[i])
        out[i, 5] = a.min()                     # the whole argument, as a method
        out[i, 6] = np.prod(a[i, ::-1][:3])
        counts[i] = np.count_nonzero(a[i, :])


@pytest.mark.parametrize("backend", BACKENDS)
def test_methods_and_views(backend):
    a = np.random.default_rng(4).random((6, 6))
    a[2, 3] = 0.0
    out, counts = np.zeros((6, 7)), np.zeros(6, np.int64)
    views.on(backend)[1, 8](out, a, counts)
    want = np.stack([[a[i, ::2].sum(), a[i, 1:4].max(), a[:, i].mean(), a[i].var(),
                      a[i].std(), a.min(), np.prod(a[i, ::-1][:3])] for i in range(6)])
    np.testing.assert_allclose(out, want, rtol=1e-13)
    assert list(counts) == [np.count_nonzero(row) for row in a]


@zm.kernel
def scratch(out, x):
    i = zm.grid(1)
    local = zm.local.array(4, zm.f32)
    tile = zm.shared.array((8, 4), zm.f32)
    for k in range(4):
        local[k] = x[i, k] * (k + 1)
        tile[zm.threadIdx.x, k] = x[i, k] - 1.0
    zm.syncthreads()
    out[i, 0] = local.sum()
    out[i, 1] = np.max(local)
    out[i, 2] = tile[zm.threadIdx.x, :].mean()
    out[i, 3] = np.nanmin(tile[zm.threadIdx.x])
    out[i, 4] = tile.any()


@pytest.mark.parametrize("backend", BACKENDS)
def test_local_and_shared_arrays(backend):
    x = np.random.default_rng(5).random((8, 4)).astype(np.float32)
    out = np.zeros((8, 5), np.float32)
    scratch.on(backend)[1, 8](out, x)
    local = x * np.arange(1, 5, dtype=np.float32)
    want = np.stack([local.sum(1), local.max(1), (x - 1).mean(1), (x - 1).min(1),
                     np.full(8, True)], axis=1)
    np.testing.assert_allclose(out, want, rtol=2e-6)


TABLE = np.array([[3, -1, 4], [1, -5, 9]], np.int16)
FLAGS = np.array([False, True, False])
SCALAR = np.array(7.5)
CASES = (TABLE, FLAGS, SCALAR, np.float32([2.0, NAN]))


@zm.kernel
def captured(out):
    k = 0
    for c in zm.literal_unroll(CASES):
        out[k, 0] = np.sum(c)
        out[k, 1] = c.max()
        out[k, 2] = np.mean(c)
        out[k, 3] = np.any(c)
        k += 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_captured_constant_arrays_of_every_kind_through_literal_unroll(backend):
    out = np.zeros((4, 4))
    captured.on(backend)[1, 1](out)
    want = [[np.sum(c), np.max(c), np.mean(c), np.any(c)] for c in CASES]
    np.testing.assert_array_equal(out, np.array(want, np.float64))


@zm.kernel
def empty_rows(out, a, n):
    row = a[0, :n]
    out[0] = row.sum()
    out[1] = row.prod()
    out[2] = row.min()
    out[3] = row.max()
    out[4] = np.nanmax(row)
    out[5] = row.mean()
    out[6] = row.all()
    out[7] = row.any()
    out[8] = np.min(row, initial=-3.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_array_empty_at_run_time_gives_the_identity(backend):
    # kernels cannot raise: min/max of no element are NumPy's `initial=` defaults, documented
    # in zymo/frontend/reductions.py
    out = np.zeros(9)
    empty_rows.on(backend)[1, 1](out, np.ones((1, 4)), 0)
    np.testing.assert_array_equal(out, [0.0, 1.0, INF, -INF, NAN, NAN, 1.0, 0.0, -3.0])
    empty_rows.on(backend)[1, 1](out, np.arange(4.0)[None], 3)
    np.testing.assert_array_equal(out, [3.0, 0.0, 0.0, 2.0, 2.0, 1.0, 0.0, 1.0, -3.0])


@zm.kernel
def complex_sums(out, z):
    i = zm.grid(1)
    if i < z.shape[0]:
        out[i, 0] = np.sum(z[i])
        out[i, 1] = z[i].prod()
        out[i, 2] = np.mean(z[i])
        out[i, 3] = np.var(z[i])


@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_arrays(backend):
    z = sample(np.complex64, (4, 5), np.random.default_rng(6))
    out = np.zeros((4, 4), np.complex64)
    complex_sums.on(backend)[1, 4](out, z)
    want = np.stack([z.sum(1), z.prod(1), z.mean(1), z.var(1)], axis=1)
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-7)


@zm.kernel
def options(out, a):
    out[0] = np.sum(a, dtype=np.float32)
    out[1] = a.var(ddof=1)
    out[2] = np.std(a, ddof=1)
    out[3] = np.max(a, initial=100.0)
    out[4] = np.prod(a, initial=2.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dtype_ddof_and_initial(backend):
    a = np.array([1.0, 2.5, 4.0, 8.0])
    out = np.zeros(5)
    options.on(backend)[1, 1](out, a)
    want = [np.float32(a.sum()), a.var(ddof=1), a.std(ddof=1), 100.0, 2 * a.prod()]
    np.testing.assert_allclose(out, want, rtol=1e-15)


@zm.kernel
def row_stats(out, x):
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = x[i, :].sum() + 2.0 * np.mean(x[i]) + x[i].var() + np.std(x[i]) + \
            x[i].prod() + x[i].max()


def test_gradient_of_sum_mean_var_std_prod_max_against_finite_differences():
    x = np.random.default_rng(7).random((4, 5)) + 0.5
    report = zm.check_grad(row_stats, 1, 4, zm.Duplicated(np.zeros(4), np.random.random(4)),
                           zm.Duplicated(x, np.zeros_like(x)), backend="interp")
    assert report.ok, str(report)


def test_gradient_on_the_cpu_backend():
    x = np.random.default_rng(8).random((4, 5)) + 0.5
    report = zm.check_grad(row_stats, 1, 4, zm.Duplicated(np.zeros(4), np.random.random(4)),
                           zm.Duplicated(x, np.zeros_like(x)), backend="cpu")
    assert report.ok, str(report)


def test_literal_unroll_outside_kernels_is_the_identity():
    from zymo.cuda.misc.special import literal_unroll
    cases = (np.zeros(2), 3)
    assert literal_unroll(cases) is cases and zm.literal_unroll is literal_unroll


@zm.kernel
def min_of_empty(out):
    out[0] = np.min(EMPTY)


@zm.kernel
def reduce_axis(out, a):
    out[0] = np.sum(a, axis=0)


@zm.kernel
def order_complex(out, z):
    out[0] = z.max().real


@zm.kernel
def reduce_number(out, a):
    out[0] = np.sum(a[0])


@zm.kernel
def unknown_keyword(out, a):
    out[0] = np.mean(a, keepdims=True)


EMPTY = np.float64([])


@pytest.mark.parametrize("kernel, args, message, hint", [
    (min_of_empty, (np.zeros(1),), "np.min() of an empty array", "initial="),
    (reduce_axis, (np.zeros(1), np.zeros((2, 2))), "kernels do not allocate", "a[i, :].sum()"),
    (order_complex, (np.zeros(1), np.zeros(2, np.complex128)), "of a complex array", "abs"),
    (reduce_number, (np.zeros(1), np.zeros(2)), "np.sum() of", "reduce an array"),
    (unknown_keyword, (np.zeros(1), np.zeros(2)), "does not take keepdims=", "dtype"),
])
def test_unsupported_forms_are_compile_errors_at_the_line(kernel, args, message, hint):
    with pytest.raises(CompileError) as info:
        kernel.specialize(*args)
    (diagnostic,) = info.value.diagnostics
    text = diagnostic.format()
    assert message in diagnostic.message and hint in text
    assert text.startswith(f"{__file__}:{diagnostic.loc.line}:{diagnostic.loc.col}: error: ")
    assert "out[0] = " in text.splitlines()[1]


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
def test_ptx_assembles():
    kernel = reducer("var").specialize(np.zeros(4), np.zeros((4, 3, 2)))
    ptxas.assemble(kernel.ptx("sm_90"), "sm_90")
    kernel = reducer("nanmax").specialize(np.zeros(4, np.float32), np.zeros((4, 9), np.float32))
    ptxas.assemble(kernel.ptx("sm_80"), "sm_80")

