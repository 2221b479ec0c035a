"""`raise` in kernels (the `error.raise` op): a checked build (`boundscheck=True`, numba's
`debug=True`) raises the kernel's exception on the host with numba's message; an unchecked one
ends the raising thread silently; the interpreter raises for the first raising thread. Checked
builds also raise ZeroDivisionError and a tuple's IndexError; the CUDA lowering is checked
through ptxas."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

import zymo as zm
from zymo.backend import nvptx
from zymo.backend.nvptx import ptxas
from zymo.diagnostics import CompileError
from zymo.ops.raising import Raise

from . import raise_kernels as K

KERNEL_FILE = os.path.abspath(K.__file__)
needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")


def launcher(kernel, backend):
    """The kernel on `backend`: "interp", "cpu" (unchecked) or "cpu-checked"."""
    if backend == "interp":
        return kernel.on("interp")
    if backend == "cpu-checked":
        return zm.kernel(kernel.py_func, boundscheck=True).on("cpu")
    return kernel.on("cpu")


@pytest.mark.parametrize("backend", ["interp", "cpu-checked"])
def test_raise_reaches_the_host_with_numbas_message(backend):
    x = np.array([1.0, 2.0, -3.0, 4.0])
    out = np.zeros(4)
    with pytest.raises(K.NegativeInput) as info:
        launcher(K.check_positive, backend)[1, 4](x, out)
    message = str(info.value)
    assert message == (f"In function 'check_positive', file {KERNEL_FILE}, line 20, "
                       f"tid=[0, 0, 2] ctaid=[0, 0, 0]: negative input")
    assert info.value.args[0] == message
    assert out[2] == 1.0     # the raising thread stopped at the raise


def test_unchecked_raise_ends_only_the_raising_thread():
    x = np.array([1.0, -2.0, 3.0, -4.0])
    out = np.zeros(4)
    K.check_positive.on("cpu")[1, 4](x, out)
    np.testing.assert_array_equal(out, [2.0, 1.0, 2.0, 1.0])


@pytest.mark.parametrize("backend", ["interp", "cpu-checked"])
def test_bare_class_names_the_thread_and_block(backend):
    x = np.arange(64, dtype=np.float64)
    x[45] = 500.0                # block 1, thread 13 of a 32-thread block
    out = np.zeros(64)
    with pytest.raises(K.NegativeInput) as info:
        launcher(K.bare_class, backend)[2, 32](x, out)
    assert re.fullmatch(r"In function 'bare_class', file .*raise_kernels\.py, line \d+, "
                        r"tid=\[0, 0, 13\] ctaid=\[0, 0, 1\]", str(info.value))
    x[45] = 45.0
    launcher(K.bare_class, backend)[2, 32](x, out)   # nothing raised: every thread ran
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("backend", ["interp", "cpu-checked"])
def test_raise_an_instance_defined_outside(backend):
    x = np.array([1.0, 0.0, 2.0], np.float32)
    with pytest.raises(ValueError, match=r"tid=\[0, 0, 1\] ctaid=\[0, 0, 0\]: bad input$"):
        launcher(K.raise_instance, backend)[1, 3](x, np.zeros(3, np.float32))


@pytest.mark.parametrize("backend", ["interp", "cpu", "cpu-checked"])
def test_raise_in_a_loop(backend):
    x = np.array([[1.0, 2.0, 4.0], [1.0, 0.0, 1.0]])
    out = np.full(2, -1.0)
    if backend == "cpu":          # unchecked: thread 1 leaves without writing
        launcher(K.in_loop, backend)[1, 2](x, out, 3)
        np.testing.assert_allclose(out, [1.75, -1.0])
        return
    with pytest.raises(ZeroDivisionError, match=r"tid=\[0, 0, 1\].*: zero entry$"):
        launcher(K.in_loop, backend)[1, 2](x, out, 3)
    x[1, 1] = 2.0
    launcher(K.in_loop, backend)[1, 2](x, out, 3)
    np.testing.assert_allclose(out, [1.75, 2.5])


@pytest.mark.parametrize("backend", ["interp", "cpu-checked"])
def test_raise_in_a_device_function(backend):
    x = np.array([4.0, 9.0, -1.0])
    out = np.zeros(3)
    with pytest.raises(ValueError) as info:
        launcher(K.through_device, backend)[1, 3](x, out)
    assert "In function 'checked_sqrt'" in str(info.value)
    assert str(info.value).endswith("tid=[0, 0, 2] ctaid=[0, 0, 0]: sqrt of a negative number")
    launcher(K.through_device, backend)[1, 3](np.array([4.0, 9.0, 16.0]), out)
    np.testing.assert_allclose(out, [2.0, 3.0, 4.0])


# ---- checks of a checked build -------------------------------------------------------------
@pytest.mark.parametrize("backend", ["interp", "cpu-checked"])
@pytest.mark.parametrize("kernel, dtype, message", [
    (K.divide, np.float64, "division by zero"),
    (K.divide, np.int32, "division by zero"),
    (K.floor_divide, np.int64, "integer division by zero"),
    (K.floor_divide, np.float32, "division by zero"),
    (K.modulo, np.int32, "integer modulo by zero"),
    (K.modulo, np.float64, "modulo by zero")])
def test_checked_division_by_zero(backend, kernel, dtype, message):
    x = np.array([7, 8, 9], dtype)
    y = np.array([2, 0, 3], dtype)
    out = np.zeros(3)
    checked = zm.kernel(kernel.py_func, boundscheck=True)
    run = checked.on("interp") if backend == "interp" else checked.on("cpu")
    with pytest.raises(ZeroDivisionError) as info:
        run[1, 3](x, y, out)
    assert str(info.value).endswith(f"tid=[0, 0, 1] ctaid=[0, 0, 0]: {message}")
    assert out[1] == 0     # the division never ran for the raising thread
    y[1] = 4
    run[1, 3](x, y, out)
    expected = {K.divide: np.true_divide, K.floor_divide: np.floor_divide,
                K.modulo: np.mod}[kernel](x, y)
    np.testing.assert_allclose(out, expected)


def test_unchecked_division_by_zero_follows_numpy():
    x, y = np.array([1.0, -1.0, 0.0]), np.zeros(3)
    out = np.zeros(3)
    for run in (K.divide.on("cpu"), K.divide.on("interp")):
        with np.errstate(divide="ignore", invalid="ignore"):
            run[1, 3](x, y, out)
        assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])


def test_fastmath_divides_floats_unchecked():
    fast = zm.kernel(K.divide.py_func, boundscheck=True, fastmath=True)
    out = np.zeros(2, np.float32)
    fast.on("cpu")[1, 2](np.ones(2, np.float32), np.zeros(2, np.float32), out)
    assert np.all(np.isinf(out))
    assert not any(isinstance(op, Raise) for op in
                   fast.specialize(*(np.ones(2, np.float32),) * 3).module.walk())


@pytest.mark.parametrize("backend", ["interp", "cpu", "cpu-checked"])
def test_run_time_tuple_index_counts_from_the_end(backend):
    a = np.zeros((5, 7, 9))
    out = np.zeros(3, np.int64)
    launcher(K.shape_from_end, backend)[1, 3](a, out)
    np.testing.assert_array_equal(out, [9, 7, 5])


@pytest.mark.parametrize("backend", ["interp", "cpu-checked"])
def test_run_time_tuple_index_out_of_range(backend):
    run = zm.kernel(K.shape_from_end.py_func, boundscheck=True)
    run = run.on("interp") if backend == "interp" else run.on("cpu")
    with pytest.raises(IndexError, match=r"tid=\[0, 0, 2\] ctaid=\[0, 0, 0\]: "
                                         r"tuple index out of range$"):
        run[1, 3](np.zeros((5, 7)), np.zeros(3, np.int64))


# ---- derivatives -------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_gradient_of_a_kernel_that_may_raise(backend):
    """The raise is not taken: the derivative is the primal's, and the reverse sweep does not
    raise again."""
    x = np.linspace(-2.0, 2.0, 8)
    report = zm.check_grad(K.squared_unless_negative, 1, 8,
                           zm.Duplicated(x, np.zeros(8)), zm.Duplicated(np.zeros(8), np.ones(8)),
                           backend=backend)
    assert report.ok, str(report)
    dx = np.zeros(8)
    zm.grad(K.squared_unless_negative).on(backend)[1, 8](
        zm.Duplicated(x, dx), zm.Duplicated(np.zeros(8), np.ones(8)))
    np.testing.assert_allclose(dx, 2 * x)


@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_tangents_of_a_kernel_that_may_raise(backend):
    x = np.linspace(-2.0, 2.0, 8)
    report = zm.check_jvp(K.squared_unless_negative, 1, 8,
                          zm.Duplicated(x, np.zeros(8)), zm.Duplicated(np.zeros(8), np.zeros(8)),
                          backend=backend)
    assert report.ok, str(report)


def test_gradient_launch_raises_where_the_primal_does():
    x = np.array([1.0, -1e7])
    with pytest.raises(ValueError, match="out of range"):
        zm.grad(K.squared_unless_negative).on("interp")[1, 2](
            zm.Duplicated(x, np.zeros(2)), zm.Duplicated(np.zeros(2), np.ones(2)))


# ---- compile errors ------------------------------------------------------------------------
def _errors(source_fn, *args):
    with pytest.raises(CompileError) as info:
        zm.kernel(source_fn).specialize(*args)
    return [(d.message, d.hint) for d in info.value.diagnostics]


def test_raise_needs_constant_arguments():
    def kernel(x):
        if x[0] < 0:
            raise ValueError(x[0])
    [(message, hint)] = _errors(kernel, np.zeros(2))
    assert "compile-time constants" in message and "string literal" in hint


def test_bare_raise_and_non_exceptions_are_rejected():
    def bare(x):
        raise

    def number(x):
        raise 3

    assert "bare `raise`" in _errors(bare, np.zeros(2))[0][0]
    assert _errors(number, np.zeros(2))[0][0] == "cannot raise the constant 3"


# ---- CUDA ----------------------------------------------------------------------------------
@needs_ptxas
def test_checked_ptx_records_the_raise_and_assembles():
    spec = zm.kernel(K.check_positive.py_func, boundscheck=True).specialize(
        np.zeros(4), np.zeros(4))
    compiled = nvptx.compile(spec.codegen, arch="sm_90", boundscheck=True)
    assert compiled.params[-1].role == "errbuf"
    # the first error of the launch claims the buffer with the code of a raise (3)
    assert re.search(r"atom\.[\w.]*cas\.b64\s+%rd\d+, \[%rd\d+\], 0, 3;", compiled.ptx)
    assert "%tid.x" in compiled.ptx and "%ctaid.x" in compiled.ptx
    report = ptxas.assemble(compiled.ptx, "sm_90")
    assert report.function == compiled.kernel_name


@needs_ptxas
def test_unchecked_ptx_has_no_error_buffer():
    spec = K.check_positive.specialize(np.zeros(4), np.zeros(4))
    compiled = nvptx.compile(spec.codegen, arch="sm_90")
    assert all(p.role != "errbuf" for p in compiled.params)
    assert "atom" not in compiled.ptx and "%ctaid" not in compiled.ptx
    ptxas.assemble(compiled.ptx, "sm_90")
