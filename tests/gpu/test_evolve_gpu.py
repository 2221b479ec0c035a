"""Evolution on a GPU: variants are validated with bounds checks (an out-of-bounds variant is a
failed evaluation, not a lost worker), a hang is caught in the worker by its time limit, the
workers of one GPU take it in turn, and a small search finds the known improvement."""
from __future__ import annotations

import time

import numpy as np
import pytest

import zymo as zm
from zymo.genome import Operand
from zymo.runtime.evolution.evaluate import evaluate
from zymo.runtime.evolution.evaluator import default_executor
from zymo.runtime.evolution.validation import Task, outcome
from zymo.runtime.evolution.variant import base_ir
from zymo.runtime.kernel import param_of_arg

from evolve.evolve_kernels import (activity_launch, grad_holdout, grad_inputs, restore_sine,
                                   scale_holdout, scale_inputs, scale_launch, spin,
                                   spin_inputs, wasteful_scale)

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def pool():
    executor = default_executor("cuda", timeout=60.0, workers=2)
    yield executor
    executor.shutdown()


def _always_in_bounds():
    args = scale_inputs(np.random.default_rng(0))
    base = base_ir(wasteful_scale, [param_of_arg(a) for a in args])
    x = base.kernel.regions[0].block.args[0]
    guard = next(op for op in base.kernel.walk() if op.has_trait(zm.ir.traits.Conditional)
                 and any(inner.operands[:1] == [x] for inner in op.walk()))
    return Operand("e1", guard.id, 0, ("c", "bool", True))


def _never_ends():
    args = spin_inputs(np.random.default_rng(0))
    base = base_ir(spin, [param_of_arg(a) for a in args])
    step = next(op for op in base.kernel.walk() if op.name == "arith.add"
                and op.results[0].type == zm.i64 and any(a.name == "control.while"
                                                         for a in op.ancestors()))
    return Operand("e1", step.id, 1, ("c", "i64", 0))


def test_an_out_of_bounds_variant_fails_without_costing_the_worker(pool):
    before = pool.replacements
    bad = pool.submit(evaluate, Task(wasteful_scale, (_always_in_bounds(),), scale_inputs,
                                     None, scale_launch, 3, "cuda")).result(timeout=120)
    assert not bad.valid and "BoundsError" in bad.reason, bad
    assert not bad.poisons_worker
    good = pool.submit(evaluate, Task(wasteful_scale, (), scale_inputs, None, scale_launch, 4,
                                      "cuda")).result(timeout=120)
    assert good.valid and good.runtime > 0, good
    assert pool.replacements == before


def test_a_hang_is_caught_by_the_worker_and_the_gpu_goes_on(pool):
    before = pool.replacements
    began = time.monotonic()
    stuck = pool.submit(evaluate, Task(spin, (_never_ends(),), spin_inputs, None, (1, 64), 1,
                                       "cuda"))
    fine = [pool.submit(evaluate, Task(spin, (), spin_inputs, None, (1, 64), 2 + k, "cuda"))
            for k in range(3)]
    hung = stuck.result(timeout=120)
    assert not hung.valid and outcome(hung) == "hang (time limit)", hung
    # caught by the kernel time limit, far below the pool's 60 s backstop
    assert hung.seconds < 10 and pool.timeouts == 0
    assert all(f.result(timeout=120).valid for f in fine)
    assert pool.replacements == before + 1
    assert time.monotonic() - began < 60


def test_a_small_search_on_the_gpu_removes_the_clearing(pool):
    result = zm.evolve(wasteful_scale, scale_launch, scale_inputs, population=16,
                       generations=4, seed=1, executor=pool, holdout=scale_holdout,
                       progress=False, backend="cuda")
    assert result.speedup >= 1.5, result.report()
    assert result.evaluator.outcomes.get("valid", [0])[0] > 0
    big = scale_holdout(np.random.default_rng(9))
    expected = [a.copy() for a in big]
    wasteful_scale[scale_launch(big)](*expected)
    result.best.on("cpu")[scale_launch(big)](*big)
    np.testing.assert_array_equal(big[1], expected[1])


def test_a_gradient_evolves_on_the_gpu_and_stays_the_gradient(pool):
    # 8 generations: timings steer the selection, and with 5 one run among others on the
    # same GPU (the -k "grad or ... or evolve" subset) missed the loop edit; alone it passed
    result = zm.evolve(zm.grad(restore_sine), activity_launch, grad_inputs, population=16,
                       generations=8, seed=1, executor=pool, holdout=grad_holdout,
                       progress=False, backend="cuda")
    assert result.speedup >= 1.3, result.report()
    args = grad_holdout(np.random.default_rng(5))
    x, dout = args[0].value, args[1].shadow.copy()
    result.best.on("cpu")[scale_launch([x])](*result.kernel.flat(args))
    np.testing.assert_allclose(args[0].shadow, 2 * x * dout, rtol=1e-5)


class _Counted:
    """A kernel whose launches are counted."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, 0

    def specialization_for(self, args):
        return self.kernel.specialization_for(args)

    def __getitem__(self, dims):
        launcher = self.kernel[dims]

        def launch(*args):
            self.launches += 1
            return launcher(*args)
        return launch


def test_a_slow_variant_is_timed_by_fewer_launches_within_the_timing_budget():
    from zymo.runtime.evolution.timing import time_launches
    args = spin_inputs(np.random.default_rng(0))
    args[0] = np.ones(1 << 22, np.float32)      # every thread sums 4M floats: milliseconds
    counted = _Counted(spin)
    # compiled beforehand: the events of a cold first launch would time the compile too
    spin.specialization_for(args).compiled("cuda")
    slow = time_launches(counted, (1, 64), args, "cuda", 5, warm=False, budget=1e-4)
    assert counted.launches == 1 and slow > 1e-4
    counted.launches = 0
    again = time_launches(counted, (1, 64), args, "cuda", 5, warm=False)
    assert counted.launches == 5 and 0.5 < again / slow < 2.0
