"""zm.DuplicatedNoNeed in reverse mode: the derivative skips the stores into an array the kernel
only writes (the adjoints are those of zm.Duplicated), and keeps them wherever something could
observe them: the kernel reads the array back, or the launch's arrays may overlap."""
from __future__ import annotations

import numpy as np

import zymo as zm


@zm.kernel
def square_into(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        for k in range(3):
            y[k, i] = (k + 1.0) * x[i] * x[i]


@zm.kernel
def square_and_reread(x, y, z):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = x[i] * x[i]
        z[i] = 2.0 * y[i]


def test_stores_into_a_write_only_array_are_skipped_with_the_same_adjoints():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(50)
    seed = rng.standard_normal((3, 50))
    grads = {}
    for activity in (zm.Duplicated, zm.DuplicatedNoNeed):
        y = np.full((3, 50), np.nan)
        dx, dy = np.zeros(50), seed.copy()
        zm.grad(square_into.on("cpu"))[1, 64](zm.Duplicated(x, dx), activity(y, dy))
        grads[activity] = dx, y
        np.testing.assert_array_equal(dy, 0.0)      # consumed either way
    dx, y = grads[zm.Duplicated]
    np.testing.assert_allclose(dx, 2 * x * (seed * [[1.0], [2.0], [3.0]]).sum(0), rtol=1e-13)
    np.testing.assert_allclose(y, [[k + 1.0] for k in range(3)] * x * x, rtol=1e-15)
    dx_noneed, y_noneed = grads[zm.DuplicatedNoNeed]
    np.testing.assert_array_equal(dx_noneed, dx)
    assert np.isnan(y_noneed).all()                 # never written


def stores_into(spec, name: str) -> int:
    func = spec.optimized.kernel
    arg = func.args[list(func.arg_names).index(name)]
    return sum(1 for op in func.walk() if op.name == "memory.store"
               and zm.ops.views.array_origin(op.operands[0]) is arg)


def test_stores_stay_where_the_kernel_reads_them_back_or_arrays_may_overlap():
    x = np.zeros(8)
    reread = zm.grad(square_and_reread).specialize(
        zm.Duplicated(x, x), zm.DuplicatedNoNeed(x, x), zm.Duplicated(x, x))
    assert stores_into(reread, "y") == 1
    write_only = zm.grad(square_into).specialize(zm.Duplicated(x, x),
                                                 zm.DuplicatedNoNeed(np.zeros((3, 8)),
                                                                     np.zeros((3, 8))))
    assert stores_into(write_only, "y") == 0
    aliased = zm.grad(square_into).specialize(zm.Duplicated(x, x),
                                              zm.DuplicatedNoNeed(np.zeros((3, 8)),
                                                                  np.zeros((3, 8))),
                                              noalias=False)
    assert stores_into(aliased, "y") >= 1


def test_an_array_read_back_is_written_and_differentiated_through():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(20)
    y, z = np.full(20, np.nan), np.zeros(20)
    dx, dy, dz = np.zeros(20), np.zeros(20), rng.standard_normal(20)
    zm.grad(square_and_reread.on("cpu"))[1, 32](zm.Duplicated(x, dx), zm.DuplicatedNoNeed(y, dy),
                                                zm.Duplicated(z, dz.copy()))
    np.testing.assert_allclose(y, x * x, rtol=1e-15)
    np.testing.assert_allclose(dx, 4 * x * dz, rtol=1e-13)
