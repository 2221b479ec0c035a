"""Python that kernels may contain and that once failed to compile or compiled wrongly: each
checked on the CPU backend and the interpreter against plain Python/NumPy."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm

BACKENDS = ("cpu", "interp")
WEIGHTS = np.array([0.5, -1.0, 2.0])
TABLE = np.arange(6, dtype=np.int32).reshape(2, 3)


@zm.kernel
def global_arrays(x, y):
    """Module-level NumPy arrays are constants (as numba freezes them)."""
    i = zm.grid(1)
    if i < x.shape[0]:
        s = 0.0
        for j in range(WEIGHTS.shape[0]):
            s += WEIGHTS[j] * x[i] + TABLE[1, j]
        y[i] = s


@zm.kernel
def nested_conditional(x, v, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        u = x[i]
        y[i] = u if u > 0.5 else (math.exp(u) if u > 0.0 else v)


@zm.func
def limiter(r):
    if r <= 0.0:
        return 0.0
    elif r < 1.0:
        phi = 2.0 * r / (1.0 + r)
    else:
        phi = 1.0
    return phi


@zm.kernel
def returned_then_assigned(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = limiter(x[i])


@zm.kernel
def continued_then_assigned(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        s = 0.0
        for j in range(4):
            if x[i] * j > 1.0:
                continue
            else:
                r = x[i] * j
            s += r
        y[i] = s


@zm.kernel
def inverse_hyperbolic(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        y[i] = math.asinh(v) + math.acosh(v + 2.0) + math.atanh(0.3 * v) + math.cbrt(v)


def _python_limiter(r):
    return 0.0 if r <= 0 else (2 * r / (1 + r) if r < 1 else 1.0)


def _python_continued(v):
    return sum(v * j for j in range(4) if not v * j > 1.0)


CASES = [
    (global_arrays, lambda x: [1.5 * v + 12 for v in x]),
    (returned_then_assigned, lambda x: [_python_limiter(v) for v in x]),
    (continued_then_assigned, lambda x: [_python_continued(v) for v in x]),
    (inverse_hyperbolic, lambda x: np.arcsinh(x) + np.arccosh(x + 2) + np.arctanh(0.3 * x)
     + np.cbrt(x)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kernel, expected", CASES, ids=[c[0].__name__ for c in CASES])
def test_kernel_matches_python(kernel, expected, backend):
    x = np.array([-0.9, 0.0, 0.25, 0.5, 0.9, 1.7, 3.0])
    y = np.zeros_like(x)
    kernel.on(backend)[1, 32](x, y)
    np.testing.assert_allclose(y, expected(x), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_conditional_expressions(backend):
    x = np.array([0.7, 0.2, -1.0])
    y = np.zeros(3)
    nested_conditional.on(backend)[1, 32](x, 3.0, y)
    np.testing.assert_allclose(y, [0.7, math.exp(0.2), 3.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_inverse_hyperbolic_gradients(backend):
    x = np.array([0.1, 0.5, 1.3])
    report = zm.check_grad(inverse_hyperbolic.on(backend), 1, 32,
                           zm.Duplicated(x, np.zeros(3)), zm.Duplicated(np.zeros(3), np.ones(3)))
    assert report.ok, str(report)


def test_a_module_level_object_that_is_no_array_names_what_to_index():
    with pytest.raises(zm.CompileError, match="cannot index"):
        indexes_a_module[1, 32](np.zeros(2), np.zeros(2))


@zm.kernel
def indexes_a_module(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = math[0]


@zm.func
def product(a, b):
    return a * b


@zm.kernel
def calls_with_one_argument(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = product(x[i])    # <- the call with too few arguments


def test_a_call_with_the_wrong_argument_count_is_named_at_the_call():
    with pytest.raises(zm.CompileError) as error:
        calls_with_one_argument[1, 32](np.zeros(2), np.zeros(2))
    text = str(error.value)
    line = next(n for n, source in enumerate(open(__file__).read().splitlines(), 1)
                if source.rstrip().endswith("# <- the call with too few arguments"))
    assert f"test_language_regressions.py:{line}:" in text, text
    assert "product takes 2 arguments, got 1" in text and "product(a, b)" in text
