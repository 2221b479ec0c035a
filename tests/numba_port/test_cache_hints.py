"""numba's cache-hinted loads and stores (`cuda.ldcg(a, i)`, `cuda.stcs(a, (i, j), v)`): the
values of a[i] on the interpreter and the CPU for every hint and element type, the hinted
instruction in PTX that ptxas accepts, bounds checks and numba's errors, and derivatives as
those of a[i] (checked against finite differences)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import zymo as zm
from zymo import cuda
from zymo.backend.nvptx import ptxas
from zymo.cuda import types as nt
from zymo.cuda.core import errors
from zymo.ops.cachehint import LOAD_HINTS, STORE_HINTS

needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
BACKENDS = ("cpu", "interp")
DTYPES = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
          np.float16, np.float32, np.float64)
LOADS = {hint: getattr(cuda, f"ld{hint}") for hint in LOAD_HINTS}
STORES = {hint: getattr(cuda, f"st{hint}") for hint in STORE_HINTS}


def load_kernel(load):
    def kernel(r, x):
        i = zm.grid(1)
        if i < r.shape[0]:
            r[i] = load(x, r.shape[0] - 1 - i)     # reversed: the index is the one used
    return kernel


def store_kernel(store):
    def kernel(r, x):
        i = zm.grid(1)
        if i < r.shape[0]:
            store(r, i, x[i] + x[i])
    return kernel


def copy_2d(load, store):
    def kernel(r, x):
        i, j = zm.grid(2)
        if i < x.shape[0] and j < x.shape[1]:
            store(r, (i, j), load(x, (i, j)))
    return kernel


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("hint", LOAD_HINTS)
def test_loads_read_the_element(hint, backend):
    kernel = zm.kernel(load_kernel(LOADS[hint])).on(backend)
    for dtype in DTYPES:
        x = (np.arange(7) * 3 - 5).astype(dtype)
        r = np.zeros_like(x)
        kernel[1, 8](r, x)
        np.testing.assert_array_equal(r, x[::-1])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("hint", STORE_HINTS)
def test_stores_write_the_element(hint, backend):
    kernel = zm.kernel(store_kernel(STORES[hint])).on(backend)
    for dtype in DTYPES:
        x = np.arange(7).astype(dtype)
        r = np.zeros_like(x)
        kernel[1, 8](r, x)
        np.testing.assert_array_equal(r, x + x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_dimensional_arrays_and_views(backend):
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 4
    for load, store in zip(LOADS.values(), STORES.values()):
        r = np.zeros_like(x)
        zm.kernel(copy_2d(load, store)).on(backend)[(1, 1), (4, 4)](r, x)
        np.testing.assert_array_equal(r, x)

    def of_views(r, x):
        i = zm.grid(1)
        if i < 3:
            cuda.stwt(r[i, 1:], 0, cuda.ldcs(x[:, ::-1], (i, 0)) * 2)
    r = np.zeros_like(x)
    zm.kernel(of_views).on(backend)[1, 4](r, x)
    expected = np.zeros_like(x)
    expected[:, 1] = x[:, -1] * 2
    np.testing.assert_array_equal(r, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_literal_negative_index_and_value_conversion(backend):
    def kernel(r, x):
        r[0] = cuda.ldcg(x, -1)             # counts from the end, as x[-1]
        cuda.stcs(r, 1, 2.75)               # converted to the array's type, as numba does
        cuda.stcg(r, 2, x[0] * 1.5)
    x = np.array([4, 5, 6], np.int32)
    r = np.zeros(3, np.int32)
    zm.kernel(kernel).on(backend)[1, 1](r, x)
    np.testing.assert_array_equal(r, [6, 2, 6])


def test_out_of_bounds_is_reported_as_for_indexing():
    def kernel(r, x):
        i = zm.grid(1)
        if i < r.shape[0]:
            r[i] = cuda.ldcg(x, i + 1)
    x, r = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    with pytest.raises(zm.BoundsError, match="x"):
        zm.kernel(kernel, boundscheck=True).on("cpu")[1, 4](r, x)
    with pytest.raises(zm.BoundsError):
        zm.kernel(kernel).on("interp")[1, 4](r, x)


# ---- PTX ----------------------------------------------------------------------------------------
def _ptx(pyfunc, dtype, ndim=1):
    array = getattr(nt, np.dtype(dtype).name)[(slice(None),) * (ndim - 1) + (slice(None, None, 1),)]
    ptx, _ = cuda.compile_ptx(pyfunc, (array, array), device=False, cc=(9, 0))
    return ptx


@needs_ptxas
@pytest.mark.parametrize("dtype", DTYPES)
def test_ptx_holds_the_hinted_instructions(dtype):
    bits = np.dtype(dtype).itemsize * 8
    for hint, load in LOADS.items():
        ptx = _ptx(load_kernel(load), dtype)
        assert re.search(rf"ld\.global\.{hint}\.b{bits} ", ptx)
        ptxas.assemble(ptx, "sm_90")
    for hint, store in STORES.items():
        ptx = _ptx(store_kernel(store), dtype)
        assert re.search(rf"st\.global\.{hint}\.b{bits} ", ptx)
        ptxas.assemble(ptx, "sm_90")


@needs_ptxas
def test_ptx_of_two_dimensional_access():
    ptx = _ptx(copy_2d(cuda.ldlu, cuda.stwb), np.float64, ndim=2)
    assert "ld.global.lu.b64" in ptx and "st.global.wb.b64" in ptx
    ptxas.assemble(ptx, "sm_90")


def test_plain_code_on_the_cpu():
    """The hint is a GPU cache's: the ops reach the backends, and the CPU target lowers them
    to ordinary loads and stores (no PTX assembly)."""
    from zymo.backend.cpu.target import CPUTarget
    from zymo.backend.llvm import lower_module
    x = np.ones((2, 2), np.float32)
    module = zm.kernel(copy_2d(cuda.ldcg, cuda.stcs)).specialize(np.zeros_like(x), x).codegen
    names = {op.name for op in module.kernel.walk()}
    assert {"memory.cached_load", "memory.cached_store"} <= names
    text = str(lower_module(module, CPUTarget(False)).llvm)
    assert "load float" in text and "store float" in text and "asm" not in text


# ---- errors -------------------------------------------------------------------------------------
def _compile(pyfunc, *sig):
    return cuda.compile_ptx(pyfunc, sig)


def float_index(x):
    cuda.ldcs(x, 1.0)


def two_indices(x):
    cuda.ldcs(x, (1, 2))


def scalar_index(x):
    cuda.ldcs(x, 1)


def one_index(x):
    cuda.ldcs(x, (1,))


def float_in_tuple(x):
    cuda.ldcs(x, (1, 2.0))


def float_value_index(x):
    cuda.ldcs(x, x[0])


def store_complex(x):
    cuda.stcg(x, 0, 1.0)


def load_bool(x):
    cuda.ldca(x, 0)


def load_number(x):
    cuda.ldcv(3, 0)


def keyword(x):
    cuda.ldcg(x, i=0)


def missing_value(x):
    cuda.stwt(x, 0)


@pytest.mark.parametrize("pyfunc, sig, message", [
    (float_index, nt.float32[::1], "float64 is not a valid index"),
    (two_indices, nt.float32[::1], "Expected 1 indices, got 2"),
    (scalar_index, nt.float32[:, ::1], "Expected 2 indices, got a scalar"),
    (one_index, nt.float32[:, ::1], "Expected 2 indices, got 1"),
    (float_in_tuple, nt.float32[:, ::1], "float64 is not a valid index"),
    (float_value_index, nt.float32[::1], "float32 is not a valid index"),
    (store_complex, nt.complex64[::1], "stcg requires array of integer or float"),
    (load_bool, nt.boolean[::1], "ldca requires array of integer or float"),
    (load_number, nt.float32[::1], "ldcv operates on arrays"),
    (keyword, nt.float32[::1], "takes its arguments by position"),
    (missing_value, nt.float32[::1], "stwt takes 3 arguments, got 2"),
], ids=lambda v: getattr(v, "__name__", None))
def test_errors(pyfunc, sig, message):
    with pytest.raises(errors.TypingError, match=message) as info:
        _compile(pyfunc, sig)
    assert "test_cache_hints.py:" in str(info.value)   # the line of the call


def test_shared_memory_is_refused_with_a_hint():
    def kernel(r):
        s = cuda.shared.array(4, np.float32)
        r[0] = cuda.ldcg(s, 0)
    with pytest.raises(errors.TypingError, match="global memory.*shared") as info:
        _compile(kernel, nt.float32[::1])
    assert "a[i]" in str(info.value)


# ---- derivatives --------------------------------------------------------------------------------
def hinted_saxpy(y, x, out, a):
    i = zm.grid(1)
    if i < out.shape[0]:
        v = cuda.ldcg(x, i) * a + cuda.ldcs(y, i)
        cuda.stcs(out, i, v * cuda.ldca(x, i))


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_as_of_plain_indexing(backend):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(6), rng.standard_normal(6)
    kernel = zm.kernel(hinted_saxpy)
    report = zm.check_grad(kernel, 1, 8, zm.Duplicated(y, np.zeros(6)),
                           zm.Duplicated(x, np.zeros(6)), zm.Duplicated(np.zeros(6), np.zeros(6)),
                           zm.Active(1.5), backend=backend)
    assert report.ok, str(report)
    report = zm.check_jvp(kernel, 1, 8, zm.Duplicated(y, np.zeros(6)),
                          zm.Duplicated(x, np.zeros(6)), zm.Duplicated(np.zeros(6), np.zeros(6)),
                          zm.Active(1.5), backend=backend)
    assert report.ok, str(report)
