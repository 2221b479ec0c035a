"""Validation that cannot be gamed (issue 30, item 5): for each guard a variant built to game it
(an edit list made for the purpose), shown passing without the guard where that can be shown,
rejected with it, and counted against the guard."""
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import zymo as zm
from zymo.genome import Delete, Operand
from zymo.runtime.evolution import evaluate as evaluate_module
from zymo.runtime.evolution import guards, validation
from zymo.runtime.evolution.evaluate import evaluate
from zymo.runtime.evolution.evaluator import Evaluator
from zymo.runtime.evolution.guards import (GUARDS, guard_of, must_move, require_varied,
                                           roofline_seconds, with_size)
from zymo.runtime.evolution.validation import Task, outcome, within
from zymo.runtime.evolution.variant import base_ir
from zymo.runtime.kernel import param_of_arg

from evolve.evolve_kernels import neighbour_sum, scale_inputs, scale_launch

BLOCK = 32
N = 64


@zm.kernel
def shifted_double(x, out):
    """out[i] = 2 x[i + 1], wrapping around at the end of x."""
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = x[(i + 1) % x.shape[0]] * 2.0


def inputs(rng, size=N):
    return [rng.standard_normal(size).astype(np.float32), np.zeros(size, np.float32)]


def launch(args):
    return ((args[0].shape[0] + BLOCK - 1) // BLOCK, BLOCK)


def answer(x):
    return np.roll(x, -1) * np.float32(2.0)


def with_answer_left(rng):
    """The output buffer already holds the expected answer, as memory an earlier run of the
    original left behind would."""
    x, out = inputs(rng)
    out[:] = answer(x)
    return [x, out]


def fixed_inputs(rng):
    """Ignores rng: every evaluation would see this one input."""
    return [np.full(N, 0.5, np.float32), np.zeros(N, np.float32)]


def base_and_ops():
    base = base_ir(shifted_double, [param_of_arg(a) for a in inputs(np.random.default_rng(0))])
    ops = list(base.kernel.walk())
    store = next(op for op in ops if op.has_trait(zm.ir.traits.WritesMemory))
    return base, ops, store


def evaluated(edits, make=inputs, seed=3, label=""):
    return evaluate(Task(shifted_double, tuple(edits), make, None, launch, seed, label=label))


def test_every_guard_has_a_description_and_its_reasons_map_to_it():
    assert set(GUARDS) == {"poisoned outputs", "fresh inputs", "held-out sizes", "roofline",
                           "race check"}
    assert guard_of("RaceError: ops a and b") == "race check"
    assert guard_of("held-out size 96: outputs differ") == "held-out sizes"
    assert guard_of("outputs differ") == "fresh inputs"
    assert guard_of("BoundsError: index 70") is None


# ---- (a) an output buffer that still holds the expected answer ------------------------------
def test_an_output_left_holding_the_answer_is_poisoned_before_the_variant_sees_it(monkeypatch):
    _, _, store = base_and_ops()
    skip_the_store = (Delete("e1", store.id),)
    assert evaluated((), with_answer_left).valid
    rejected = evaluated(skip_the_store, with_answer_left)
    assert not rejected.valid
    assert rejected.reason.startswith("leaves argument 1 unwritten"), rejected
    assert outcome(rejected) == "unwritten output (poison)"
    assert guard_of(rejected.reason) == "poisoned outputs"
    # without the poison, the variant that computes nothing would pass: the guard is what
    # stops it
    monkeypatch.setattr(validation, "poison", lambda args, positions, rng: None)
    gamed = evaluated(skip_the_store, with_answer_left)
    assert gamed.valid and gamed.error == 0.0, gamed


def test_the_poison_shows_through_on_the_interpreter_too():
    from zymo.runtime.evolution.screening import interpreted
    _, _, store = base_and_ops()
    verdict = interpreted(Task(shifted_double, (Delete("e1", store.id),), with_answer_left,
                               None, launch, 5))
    assert not verdict.valid and guard_of(verdict.reason) == "poisoned outputs", verdict


# ---- (b) a variant that writes constants --------------------------------------------------
def test_a_variant_writing_constants_fails_on_fresh_inputs():
    _, _, store = base_and_ops()
    # the stored value becomes the constant 1.0: what the original writes when x is 0.5
    constant = (Operand("e1", store.id, 2, ("c", "f32", 1.0)),)
    gamed = evaluated(constant, fixed_inputs)
    assert gamed.valid and gamed.error == 0.0, gamed     # one fixed input: it passes
    for seed in range(3):                                # every fresh input refutes it
        rejected = evaluated(constant, seed=seed)
        assert not within(rejected, 0.0) and rejected.error > 1.0, rejected
    counted = screen_with()
    counted.many([constant])
    assert counted.guard_counts == {"fresh inputs": 1}


def test_an_inputs_function_that_ignores_its_generator_is_refused():
    with pytest.raises(ValueError, match="same arrays for two different generators"):
        require_varied(fixed_inputs, 0)
    require_varied(inputs, 0)
    with pytest.raises(ValueError, match="draw the input arrays from rng"):
        zm.evolve(shifted_double, launch, fixed_inputs, population=4, generations=1,
                  executor=ThreadPoolExecutor(1), progress=False, backend="cpu")


# ---- (c) a variant right at one input size only -------------------------------------------
def size_bound_variant():
    """x.shape[0] replaced by the constant 64, the search's size: right at 64 only."""
    _, ops, _ = base_and_ops()
    wrap = next(op for op in ops if op.name == "arith.mod")
    return (Operand("e1", wrap.id, 1, ("c", "i64", N)),)


def test_a_variant_right_at_one_size_fails_at_a_held_out_size():
    edits = size_bound_variant()
    assert evaluated(edits).valid                        # at the search's size it is right
    rejected = evaluated(edits, with_size(inputs, 96), label="held-out size 96")
    assert not within(rejected, 0.0) and rejected.error > 1.0, rejected
    # at a size the variant's constant index runs past, it fails outright, under the label
    failed = evaluated(edits, with_size(inputs, 32), label="held-out size 32")
    assert not failed.valid and failed.reason.startswith("held-out size 32: "), failed
    assert outcome(failed) == "fails on a held-out input"


def screen_with(sizes=(), race_check=None, kernel=shifted_double, make=inputs):
    executor = ThreadPoolExecutor(1)
    evaluator = Evaluator(kernel, launch if kernel is shifted_double else scale_launch, make,
                          None, "cpu", executor, 3, 0)
    evaluator.sizes, evaluator.race_check = sizes, race_check
    return evaluator


def test_a_speedup_claim_is_screened_at_every_held_out_size():
    edits = size_bound_variant()
    unguarded = screen_with()
    unguarded.screen([edits], 0.0)
    assert unguarded.guard_counts == {}                  # the search's size alone: it passes
    guarded = screen_with(sizes=(96, 200))
    guarded.screen([edits], 0.0)
    assert guarded.guard_counts == {"held-out sizes": 1}
    verdict = guarded.cache[zm.genome.dumps(edits)]
    assert not verdict.valid and verdict.reason.startswith("held-out size 96"), verdict


def test_held_out_sizes_need_an_inputs_function_of_the_size():
    def sizeless(rng):
        return inputs(rng)
    with pytest.raises(ValueError, match=r"def inputs\(rng, size=N\)"):
        zm.evolve(shifted_double, launch, sizeless, sizes=(96,), population=4, generations=1,
                  executor=ThreadPoolExecutor(1), progress=False, backend="cpu")
    with pytest.raises(ValueError, match="need launch to be a function"):
        zm.evolve(shifted_double, (2, BLOCK), inputs, sizes=(96,), population=4,
                  generations=1, executor=ThreadPoolExecutor(1), progress=False, backend="cpu")


# ---- (d) faster than physics allows ---------------------------------------------------------
def test_the_bytes_a_launch_must_move():
    x, out = inputs(np.random.default_rng(0))
    expected = [x, answer(x)]
    # out's 64 changed floats stored, x's 64 floats loaded
    assert must_move({1}, {0}, [x, out], expected) == 2 * N * 4
    # an output element the original leaves as it was costs nothing
    expected[1][:10] = 0.0
    assert must_move({1}, {0}, [x, out], expected) == (2 * N - 10) * 4
    assert roofline_seconds(10**9, "interp") == 0.0      # a modelled time is not physical
    assert 0.0 < roofline_seconds(10**9, "cpu") < math.inf


def test_the_bandwidth_table_names_the_lent_gpus():
    table = dict(guards.PEAK_BANDWIDTH)
    found = {name: next(b for part, b in guards.PEAK_BANDWIDTH if part in name)
             for name in ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA H100 PCIe")}
    assert found == {"NVIDIA H100 80GB HBM3": table["H100"], "NVIDIA H200": table["H200"],
                     "NVIDIA H100 PCIe": table["H100 PCIe"]}


def test_a_time_below_the_roofline_is_rejected(monkeypatch):
    honest = evaluated(())
    bound = roofline_seconds(2 * N * 4, "cpu")
    assert honest.valid and honest.runtime > bound, (honest, bound)
    # an evaluator flaw (a timer that stops before the kernel ends) claims a time that no
    # device can reach
    real = evaluate_module.time_launches

    def flawed(kernel, *args, **options):
        seconds = real(kernel, *args, **options)
        return seconds if kernel.py_func is shifted_double.py_func and \
            not isinstance(kernel, zm.runtime.evolution.VariantKernel) else 1e-15

    monkeypatch.setattr(evaluate_module, "time_launches", flawed)
    rejected = evaluated(())
    assert not rejected.valid and rejected.reason.startswith("faster than the roofline"), \
        rejected
    assert outcome(rejected) == "faster than the roofline"
    assert guard_of(rejected.reason) == "roofline"


# ---- (e) a variant that races -----------------------------------------------------------------
def test_a_racing_variant_is_counted_against_the_race_check():
    args = scale_inputs(np.random.default_rng(0))
    base = base_ir(neighbour_sum, [param_of_arg(a) for a in args])
    barrier = next(op for op in base.kernel.walk() if op.has_trait(zm.ir.traits.Convergent))
    evaluator = screen_with(race_check=scale_inputs, kernel=neighbour_sum, make=scale_inputs)
    evaluator.screen([(Delete("e1", barrier.id),)], 0.0)
    assert evaluator.guard_counts == {"race check": 1}


# ---- the counts on the result and in the report ---------------------------------------------
def test_the_result_and_report_count_each_guards_rejections(tmp_path):
    result = zm.evolve(shifted_double, launch, inputs, sizes=(96,), population=6,
                       generations=2, seed=2, executor=ThreadPoolExecutor(2), progress=False,
                       backend="cpu", kinds=("operand", "delete"))
    assert set(result.guards) == set(GUARDS)
    assert all(isinstance(n, int) and n >= 0 for n in result.guards.values())
    # a search over a tight kernel rejects many variants: some guard counted them
    assert sum(result.guards.values()) > 0, result.report()
    text = result.report(tmp_path / "report")
    assert "## Validation guards" in text
    for guard, count in result.guards.items():
        assert f"| {guard} | {GUARDS[guard]} | {count} |" in text
