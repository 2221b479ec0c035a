"""Loops whose iterations are reversed one at a time inside the forward sweep
(`zymo/ad/interleave.py`): which loops qualify, and gradients of the kernels around the edges
of the rule against finite differences."""
from __future__ import annotations

import io
import math

import numpy as np
import pytest

import zymo as zm
from ad import kernels as K

BACKENDS = ("interp", "cpu")


def dup(a):
    return zm.Duplicated(a, np.zeros_like(a))


@zm.kernel
def scaled_features(W, x, y, s):
    """An active scalar used inside the loop: its adjoint leaves the loop through a slot."""
    n = zm.grid(1)
    if n < x.shape[0]:
        for j in range(W.shape[0]):
            acc = 0.0
            for k in range(W.shape[1]):
                acc += W[j, k] * x[n, k]
            if acc > 0.0:
                y[n, j] = s * math.sin(acc)
            else:
                y[n, j] = acc * acc


@zm.kernel
def while_features(W, x, y):
    """The inner reduction is a `while` loop (its trip count recounted in the adjoint)."""
    n = zm.grid(1)
    if n < x.shape[0]:
        for j in range(W.shape[0]):
            acc = 0.0
            k = 0
            while k < W.shape[1]:
                acc += W[j, k] * x[n, k]
                k += 1
            y[n, j] = math.tanh(acc)


@zm.kernel
def features_read_after(W, x, y, z):
    """y, which the loop writes, is read after it: plain order."""
    n = zm.grid(1)
    if n < x.shape[0]:
        for j in range(W.shape[0]):
            acc = 0.0
            for k in range(W.shape[1]):
                acc += W[j, k] * x[n, k]
            y[n, j] = math.tanh(acc)
        z[n] = y[n, 0] * y[n, 1]


@zm.kernel
def features_overwritten(W, x, y):
    """Every iteration stores y[n]: the last store wins, so the order matters."""
    n = zm.grid(1)
    if n < x.shape[0]:
        for j in range(W.shape[0]):
            acc = 0.0
            for k in range(W.shape[1]):
                acc += W[j, k] * x[n, k]
            y[n] = math.tanh(acc)


@zm.kernel
def features_updated(W, x, y):
    """y is read and written inside the loop: plain order."""
    n = zm.grid(1)
    if n < x.shape[0]:
        for j in range(W.shape[0]):
            acc = 0.0
            for k in range(W.shape[1]):
                acc += W[j, k] * x[n, k]
            y[n, j] = y[n, j] * math.tanh(acc)


@zm.kernel
def features_twice(W, x, y):
    """The loop sits in another loop: plain order."""
    n = zm.grid(1)
    if n < x.shape[0]:
        for r in range(2):
            for j in range(W.shape[0]):
                acc = 0.0
                for k in range(W.shape[1]):
                    acc += W[j, k] * x[n, k] * (r + 1)
                y[n, j] += math.tanh(acc)


@zm.kernel
def features_then_input_written(W, x, y):
    """x, which the loop reads, is written after it: plain order."""
    n = zm.grid(1)
    if n < x.shape[0]:
        for j in range(W.shape[0]):
            acc = 0.0
            for k in range(W.shape[1]):
                acc += W[j, k] * x[n, k]
            y[n, j] = math.tanh(acc)
        x[n, 0] = 2.0 * x[n, 1]


@zm.kernel
def features_narrowed(W, x, y):
    """y[n, u8(j)]: iterations 0 and 256 store one element (found by a held-out probe)."""
    n = zm.grid(1)
    if n < x.shape[0]:
        for j in range(W.shape[0]):
            acc = 0.0
            for k in range(W.shape[1]):
                acc += W[j, k] * x[n, k]
            y[n, zm.u8(j)] = acc * acc


@zm.kernel
def features_and_total(W, x, y):
    """A plain store at [n, j] and an atomic at [n, 0] of the same array: iteration 0's store
    adjoint would zero the cotangent the later atomics read (found by a held-out probe)."""
    n = zm.grid(1)
    if n < x.shape[0]:
        for j in range(W.shape[0]):
            acc = 0.0
            for k in range(W.shape[1]):
                acc += W[j, k] * x[n, k]
            y[n, j] = math.tanh(acc)
            zm.atomic.add(y, (n, 0), acc * acc)


@zm.kernel
def scratch_in_loop(x, y):
    """A local array allocated inside a loop gets its shadow too (its derivative was dropped
    silently before; found by a held-out probe)."""
    n = zm.grid(1)
    if n < x.shape[0]:
        for j in range(3):
            t = zm.local.array(1, zm.f64)
            t[0] = x[n] * (j + 1)
            y[n, j] = t[0] * t[0]


def _args(rng, rows=70, features=5, inputs=7, extra=()):
    return (dup(rng.standard_normal((features, inputs)) * 0.4),
            dup(rng.standard_normal((rows, inputs))), *extra)


CASES = [
    # kernel, extra arguments after (W, x), loops reversed in place (source lines)
    (K.dense, None, 1),
    (scaled_features, lambda r: (dup(np.zeros((70, 5))), zm.Active(1.3)), 1),
    (while_features, lambda r: (dup(np.zeros((70, 5))),), 1),
    (features_read_after, lambda r: (dup(np.zeros((70, 5))), dup(np.zeros(70))), 0),
    (features_overwritten, lambda r: (dup(np.zeros(70)),), 0),
    (features_updated, lambda r: (dup(r.standard_normal((70, 5))),), 0),
    (features_twice, lambda r: (dup(np.zeros((70, 5))),), 0),
    (features_then_input_written, lambda r: (dup(np.zeros((70, 5))),), 0),
    (features_and_total, lambda r: (dup(np.zeros((70, 5))),), 0),
]


def _case_args(kernel, extra, rng):
    if kernel is K.dense:
        return (dup(rng.standard_normal((5, 7)) * 0.4), dup(rng.standard_normal(5)),
                dup(rng.standard_normal((70, 7))), dup(np.zeros((70, 5))))
    return _args(rng, extra=extra(rng))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kernel, extra, count", CASES, ids=lambda v: getattr(v, "name", ""))
def test_gradients_and_which_loops_interleave(kernel, extra, count, backend):
    rng = np.random.default_rng(61)
    args = _case_args(kernel, extra, rng)
    report = zm.check_grad(kernel, 2, 64, *args, backend=backend)
    assert report.ok, str(report)
    spec = zm.grad(kernel).specialize(*_case_args(kernel, extra, rng))
    assert len(spec.interleaved) == count, spec.interleaved


def test_interleaved_loop_has_no_reverse_copy_and_reruns_nothing():
    """The dense layer's derivative: one loop over j (forward and adjoint together), and the
    inner product over x runs twice per feature (forward, adjoint), not three times."""
    rng = np.random.default_rng(62)
    args = _case_args(K.dense, None, rng)
    ir = zm.grad(K.dense).specialize(*args).ir("ad")
    assert ir.count("memory.load(%x") == 2 + 1   # forward, and the two versions of the adjoint
    assert ir.count("math.tanh") == 1            # never recomputed
    shown = zm.grad(K.dense).show(*args, file=io.StringIO())
    assert shown.startswith("// the loop at ") and "kernels.py:30:" in shown


def test_aliasing_arguments_keep_the_plain_order():
    """When two arguments overlap, arrays are one memory (y's stores may change x): the
    derivative compiled for that launch reverses in the plain order."""
    rng = np.random.default_rng(63)
    W, b = rng.standard_normal((5, 7)) * 0.4, rng.standard_normal(5)
    x, dx = rng.standard_normal((70, 7)), np.zeros((70, 7))
    dk = zm.grad(K.dense).on("interp")
    dk[2, 64](dup(W), dup(b), zm.Duplicated(x, dx), zm.Duplicated(x[:, 2:], dx[:, 2:]))
    assert dk.last.noalias is False and dk.last.interleaved == ()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_narrowing_cast_of_the_loop_variable_keeps_the_plain_order(backend):
    rng = np.random.default_rng(64)
    args = (dup(rng.standard_normal((258, 3)) * 0.3), dup(rng.standard_normal((1, 3))),
            dup(np.zeros((1, 258))))
    report = zm.check_grad(features_narrowed, 1, 1, *args, backend=backend)
    assert report.ok, str(report)
    assert zm.grad(features_narrowed).specialize(*args).interleaved == ()


@pytest.mark.parametrize("backend", BACKENDS)
def test_local_array_allocated_in_a_loop(backend):
    x = np.random.default_rng(65).standard_normal(4)
    report = zm.check_grad(scratch_in_loop, 1, 4, dup(x), dup(np.zeros((4, 3))),
                           backend=backend)
    assert report.ok, str(report)


def test_an_argument_folded_onto_itself_takes_the_conservative_variant():
    """A zero stride makes distinct indices one element: no plain updates, no interleaving."""
    from zymo.runtime.aliasing import self_overlapping as _self_overlapping
    base = np.zeros(5)
    folded = np.lib.stride_tricks.as_strided(base, shape=(70, 5), strides=(0, 8))
    assert _self_overlapping(folded)
    assert not _self_overlapping(np.zeros((70, 7))[:, 2:])
    assert not _self_overlapping(np.zeros((7, 70)).T)
    rng = np.random.default_rng(66)
    W, b, x = rng.standard_normal((5, 7)) * 0.4, rng.standard_normal(5), rng.standard_normal(
        (70, 7))
    # the input folded (every row one memory): writing a folded output would race in the
    # kernel itself, which the interpreter reports
    folded_x = np.lib.stride_tricks.as_strided(x[0].copy(), shape=(70, 7), strides=(0, 8))
    dfolded = np.lib.stride_tricks.as_strided(np.zeros(7), shape=(70, 7), strides=(0, 8))
    dk = zm.grad(K.dense).on("interp")
    dk._specs.clear()   # shared by the kernel's derivatives: only this launch's
    dk[2, 64](dup(W), dup(b), zm.Duplicated(folded_x, dfolded), dup(np.zeros((70, 5))))
    assert [key[2:4] for key in dk._specs] == [(False, False)]
