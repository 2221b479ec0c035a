"""Recursive device functions (self and mutual, with and without declared signatures): kept
as real functions, run by the CPU backend and the interpreter against Python, assembled by
ptxas; numba's errors for runaway recursion and result types that do not converge."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from zymo import cuda
from zymo.backend.nvptx import ptxas
from zymo.diagnostics import CompileError

BACKENDS = ("cpu", "interp")
needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")


@zm.func
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


@cuda.jit("f8(f8, i4)", device=True)
def power(x, k):    # declared: the recursive call needs no return before it
    if k > 0:
        return x * power(x, k - 1)
    return 1.0


@zm.func
def is_even(n):
    if n == 0:
        return 1
    return is_odd(n - 1)


@zm.func
def is_odd(n):
    if n == 0:
        return 0
    return is_even(n - 1)


@zm.func
def fill_down(a, i):   # no value returned; writes an array it is passed
    if i >= 0:
        a[zm.grid(1), i] = i * i
        fill_down(a, i - 1)


@zm.func
def square(v):
    return v * v


@zm.func
def sum_squares(n):    # calls an ordinary device function, which is inlined into it
    if n == 0:
        return 0
    return square(n) + sum_squares(n - 1)


@zm.kernel
def recursive_kernel(ns, xs, out, grid):
    i = zm.grid(1)
    if i < ns.shape[0]:
        n = ns[i]
        out[0, i] = fib(n)
        out[1, i] = is_even(n)
        out[2, i] = sum_squares(n)
        out[3, i] = power(xs[i], n)
        fill_down(grid, n - 1)


TYPES = (zm.Array(zm.i32, 1), zm.Array(zm.f64, 1), zm.Array(zm.f64, 2), zm.Array(zm.f64, 2))


def _python(ns, xs):
    def f(n):
        return n if n < 2 else f(n - 1) + f(n - 2)
    return np.array([[f(n) for n in ns], [1 - n % 2 for n in ns],
                     [sum(k * k for k in range(n + 1)) for n in ns],
                     [x ** n for n, x in zip(ns, xs)]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_recursion_matches_python(backend):
    ns = np.array([0, 1, 2, 5, 9, 12, 3, 7], np.int32)
    xs = np.linspace(0.5, 1.5, ns.size)
    out = np.zeros((4, ns.size))
    grid = np.full((ns.size, 12), -1.0)
    recursive_kernel.on(backend)[2, 4](ns, xs, out, grid)
    np.testing.assert_allclose(out, _python(ns, xs), rtol=1e-12)
    expected = np.array([[k * k if k < n else -1 for k in range(12)] for n in ns], float)
    np.testing.assert_array_equal(grid, expected)


@needs_ptxas
def test_recursion_assembles_as_calls():
    spec = recursive_kernel.specialize(*TYPES)
    ptx = spec.ptx("sm_90")
    ptxas.assemble(ptx, "sm_90")
    assert "call" in ptx and ".func" in ptx


def test_recursive_function_stays_a_function():
    spec = recursive_kernel.specialize(*TYPES)
    text = spec.ir("optimize")
    assert "func.call" in text
    assert "square" not in text.split("func.func")[0]   # inlined where it is called


@zm.func
def runaway(x):
    return runaway(x)


@zm.func
def growing(n):
    if n <= 0:
        return None
    return (n, growing(n - 1))


@zm.kernel
def calls_runaway(out):
    out[0] = runaway(1)


@zm.kernel
def calls_growing(out):
    out[0] = growing(100)[0]


@pytest.mark.parametrize("kernel, message", [
    (calls_runaway, "cannot type infer runaway recursion"),
    (calls_growing, "Return type of recursive function does not converge"),
])
def test_recursion_errors_name_the_line(kernel, message):
    with pytest.raises(CompileError) as raised:
        kernel.on("cpu")[1, 1](np.zeros(1))
    assert message in str(raised.value)
    assert "test_recursion.py:" in str(raised.value)


def test_cuda_errors_are_typing_errors():
    from zymo.cuda.core.errors import TypingError
    with pytest.raises(TypingError, match="runaway recursion"):
        @cuda.jit("void()")
        def kernel():
            runaway(1)


@zm.func
def count_down(n):
    if n <= 0:
        return 0
    return 1 + count_down(n - 1)


@zm.kernel
def from_a_constant(out):
    out[0] = count_down(40)      # recursion on a constant: one function, not 40 inlined


def test_recursion_on_a_constant_argument():
    out = np.zeros(1)
    from_a_constant.on("interp")[1, 1](out)
    assert out[0] == 40
    assert from_a_constant.specialize(zm.Array(zm.f64, 1)).ir("optimize").count("func.func") <= 3


@zm.kernel
def recursive_loss(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = power(x[i], 3)


def test_recursive_call_is_not_differentiated_silently():
    x, out = np.linspace(1, 2, 4), np.zeros(4)
    with pytest.raises(CompileError, match="recursive device function") as raised:
        zm.grad(recursive_loss).on("cpu")[1, 4](zm.Duplicated(x, np.zeros(4)),
                                                 zm.Duplicated(out, np.ones(4)))
    assert "test_recursion.py:" in str(raised.value)
    with pytest.raises(CompileError, match="recursive device function"):
        zm.jvp(recursive_loss).on("cpu")[1, 4](zm.Duplicated(x, np.ones(4)),
                                                zm.Duplicated(out, np.zeros(4)))
