"""zymo.cuda.reduce: any associative function folded over a 1-d array in order (commutativity
is not assumed), with init, size and res, on the CPU backend, through ptxas, on a GPU."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from zymo.backend.nvptx import ptxas
from zymo.cuda import Reduce, reduce


@reduce
def add(a, b):
    return a + b


@reduce
def largest(a, b):
    return a if a > b else b


def first(a, b):
    return a


def last(a, b):
    return b


@pytest.mark.parametrize("n", [1, 7, 1024, 1025, 300_000])
def test_sum_and_max(n):
    rng = np.random.default_rng(n)
    x = rng.normal(size=n)
    assert np.isclose(add(x), x.sum(), rtol=1e-12)
    assert largest(x, init=-np.inf) == x.max()
    ints = rng.integers(-100, 100, n).astype(np.int32)
    assert add(ints) == ints.sum() and add(ints).dtype == np.int32


def test_order_is_kept_for_non_commutative_operations():
    x = np.arange(5000, dtype=np.int64) + 10
    assert Reduce(first)(x, init=x[0]) == 10
    assert Reduce(last)(x) == x[-1]
    assert Reduce(last)(x, size=123) == x[122]


def test_init_size_res_and_empty():
    x = np.arange(100, dtype=np.float64)
    assert add(x, init=5) == x.sum() + 5
    assert add(x, size=10) == 45
    assert add(x[:0], init=3) == 3
    res = np.zeros(1)
    assert add(x, res=res) is None and res[0] == x.sum()
    assert add(x) == functools.reduce(lambda a, b: a + b, x, 0.0)


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
def test_reduce_kernel_assembles():
    x = np.arange(10.0)
    add(x)
    kernel = add.kernels[x.dtype]
    spec = next(iter(kernel._specs.values()))
    for arch in ("sm_80", "sm_90"):
        ptxas.assemble(spec.ptx(arch), arch)



def test_lambdas_reduce_and_serve_as_device_functions():
    import zymo as zm

    prod = reduce(lambda a, b: a * b)
    largest = Reduce(lambda a, b: max(a, b))
    x = np.arange(1, 9, dtype=np.float64)
    assert prod(x, init=1) == 40320 and largest(x) == 8
    square = lambda v: v * v   # noqa: E731

    @zm.kernel
    def squares(out, values):
        i = zm.grid(1)
        if i < values.size:
            out[i] = square(values[i])

    out = np.zeros(8)
    squares[1, 8](out, x)
    np.testing.assert_array_equal(out, x * x)
