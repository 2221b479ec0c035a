"""LastTrip: a loop whose trips all compute the same values runs once, under `if` it runs at
all; loops whose trips differ (a carried value read, a store, an induction variable it cannot
name) stay. The values match the loop as written on the CPU backend and the interpreter, the
gradients match finite differences."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm
from zymo.passes.lasttrip import LastTrip

from zymo.ir import Module
from zymo.ir.types import Array, f32, i32
from zymo.ops import arith, math as zmath, memory

from .helpers import FunctionBuilder, run_checked


# ---- IR-level cases (tests/passes/test_semantics.py runs them before and after the pass) ----
def _kernel(m: Module) -> FunctionBuilder:
    return FunctionBuilder(m, "k", [("a", i32), ("x", Array(f32, 1)), ("y", Array(f32, 1))])


def repeated_ir(m):
    """`a` trips (0 to 3) of a body that reads memory and the carried values' initial values
    only through the loop's operands; the results are stored after the loop."""
    k = _kernel(m)
    a, x, y = k.args["a"], k.args["x"], k.args["y"]
    zero, one = k.const(0, i32), k.const(1, i32)
    start = k.value(memory.Load, x, one)

    def body(i, c0, c1):
        v = k.value(memory.Load, x, zero)
        w = k.value(zmath.Sqrt, k.value(arith.Mul, v, v))
        return [k.value(arith.Add, w, start), k.value(arith.Mul, w, v)]

    r0, r1 = k.for_(zero, a, one, [start, k.const(-1.0, f32)], body)
    k.create(memory.Store, y, zero, r0)
    k.create(memory.Store, y, one, r1)
    k.ret()


def last_index_ir(m):
    """Step 1 and step -1 loops whose bodies read x at the induction variable: the last
    trip's element (a + 2 - 1 and 1), or the initial value without a trip."""
    k = _kernel(m)
    a, x, y = k.args["a"], k.args["x"], k.args["y"]
    zero, one, two = k.const(0, i32), k.const(1, i32), k.const(2, i32)
    up = k.for_(one, k.value(arith.Add, a, two), one, [k.const(5.0, f32)],
                lambda i, c: [k.value(memory.Load, x, i)])
    down = k.for_(a, zero, k.const(-1, i32), [k.const(6.0, f32)],
                  lambda i, c: [k.value(memory.Load, x, i)])
    k.create(memory.Store, y, zero, up[0])
    k.create(memory.Store, y, one, down[0])
    k.ret()


def differing_trips_ir(m):
    """Left alone: a sum (the body reads its carried value), and a loop of step 2 whose body
    uses the induction variable."""
    k = _kernel(m)
    a, x, y = k.args["a"], k.args["x"], k.args["y"]
    zero, one = k.const(0, i32), k.const(1, i32)
    total = k.for_(zero, a, one, [k.const(0.0, f32)],
                   lambda i, c: [k.value(arith.Add, c, k.value(memory.Load, x, i))])
    stepped = k.for_(zero, a, k.const(2, i32), [k.const(0.0, f32)],
                     lambda i, c: [k.value(memory.Load, x, i)])
    k.create(memory.Store, y, zero, total[0])
    k.create(memory.Store, y, one, stepped[0])
    k.ret()


CASES = {"repeated": repeated_ir, "last_index": last_index_ir,
         "differing_trips": differing_trips_ir}


@pytest.mark.parametrize("case, loops_left", [("repeated", 0), ("last_index", 0),
                                              ("differing_trips", 2)])
def test_ir_cases(case, loops_left):
    module = Module()
    CASES[case](module)
    changed, printed = run_checked(LastTrip(), module)
    assert changed == (loops_left == 0)
    assert printed.count("control.for") == loops_left


# ---- through the frontend ---------------------------------------------------------------------
@zm.func
def energy(p, e):
    """LULESH-like: clamps, a guarded sqrt."""
    q = 0.0
    if p > 0.0:
        q = math.sqrt(p * e + 1.0)
    return p + 0.5 * q, e - 0.25 * q


@zm.kernel
def repeated(p, e, reps, out_p, out_e):
    i = zm.grid(1)
    if i < p.shape[0]:
        a = -1.0
        b = -2.0
        for _ in range(reps[i]):
            a, b = energy(p[i], e[i])
        out_p[i] = a
        out_e[i] = b


@zm.kernel
def last_element(x, n, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        v = 7.0
        for k in range(n):
            v = x[i, k] * 2.0
        out[i] = v


@zm.kernel
def summed(x, n, out):            # reads its carried value: trips differ
    i = zm.grid(1)
    if i < out.shape[0]:
        v = 0.0
        for k in range(n):
            v = v + x[i, k]
        out[i] = v


@zm.kernel
def stored(x, n, out):            # stores in the loop: each trip is observable
    i = zm.grid(1)
    if i < out.shape[0]:
        v = 0.0
        for k in range(n):
            v = x[i, 0]
            out[i] = v + k
        out[i] += v


@zm.kernel
def strided(x, n, out):           # step 2 with the induction variable used: left as is
    i = zm.grid(1)
    if i < out.shape[0]:
        v = 7.0
        for k in range(0, n, 2):
            v = x[i, k]
        out[i] = v


def optimized(kernel, *args) -> str:
    return kernel.on("cpu").specialization_for(args).ir("opt")


def test_a_repeated_evaluation_runs_once_and_computes_the_same():
    rng = np.random.default_rng(0)
    p, e = rng.standard_normal(64), rng.random(64)
    reps = rng.integers(0, 4, 64).astype(np.int32)       # 0 trips: the values before the loop
    ir = optimized(repeated, p, e, reps, np.zeros(64), np.zeros(64))
    assert "control.for" not in ir and "control.if" in ir
    q = np.where(p > 0, np.sqrt(np.maximum(p * e + 1.0, 0)), 0.0)
    want_p = np.where(reps > 0, p + 0.5 * q, -1.0)
    want_e = np.where(reps > 0, e - 0.25 * q, -2.0)
    for backend in ("cpu", "interp"):
        out_p, out_e = np.zeros(64), np.zeros(64)
        repeated.on(backend)[2, 32](p, e, reps, out_p, out_e)
        np.testing.assert_allclose(out_p, want_p, rtol=1e-15)
        np.testing.assert_allclose(out_e, want_e, rtol=1e-15)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_the_last_trips_induction_variable_for_step_one(n):
    x = np.arange(40.0).reshape(8, 5)
    assert "control.for" not in optimized(last_element, x, n, np.zeros(8))
    out = np.zeros(8)
    last_element.on("cpu")[1, 8](x, n, out)
    np.testing.assert_array_equal(out, 2 * x[:, n - 1] if n else np.full(8, 7.0))


@pytest.mark.parametrize("kernel", [summed, stored, strided])
def test_loops_whose_trips_differ_stay(kernel):
    x = np.arange(40.0).reshape(8, 5)
    assert "control.for" in optimized(kernel, x, 5, np.zeros(8))


def test_the_pass_alone_keeps_verified_ir():
    """Run on a module with the loop still there (the frontend's IR), checked before and
    after; a second run finds nothing."""
    from zymo.passes.pipeline import run_pipeline
    spec = repeated.on("cpu").specialization_for(
        (np.zeros(4), np.zeros(4), np.zeros(4, np.int32), np.zeros(4), np.zeros(4)))
    module = spec.module.clone()
    run_pipeline(module, stop_after="inline")
    changed, printed = run_checked(LastTrip(), module)
    assert changed and "control.for" not in printed
    assert not LastTrip().run(module)


def test_the_gradient_through_a_repeated_evaluation():
    """reps of 0, 1 and 3: the cotangents reach p and e once where the loop runs, and not at
    all where it does not."""
    rng = np.random.default_rng(1)
    p, e = rng.random(16) + 0.1, rng.random(16)
    reps = np.array([0, 1, 3, 2] * 4, np.int32)
    report = zm.check_grad(repeated.on("cpu"), (1,), (16,), zm.Duplicated(p, np.zeros(16)),
                           zm.Duplicated(e, np.zeros(16)), reps,
                           zm.Duplicated(np.zeros(16), rng.standard_normal(16)),
                           zm.Duplicated(np.zeros(16), rng.standard_normal(16)))
    assert report.ok, report
