"""zm.evolve on the CPU: a seeded run finds the known improvement (the redundant clearing loop),
the checkpoint resumes, failing variants are isolated, and variants save and reload."""
import json
from concurrent.futures import Executor, Future, ThreadPoolExecutor

import numpy as np
import pytest

import zymo as zm
from zymo.genome import Copy, Delete, Mutator, Operand, dumps
from zymo.genome.edits import Fill
from zymo.genome.ids import ops_by_id
from zymo.runtime.evolution.evaluate import evaluate
from zymo.runtime.evolution.screening import interpreted
from zymo.runtime.evolution.timing import time_launches, written_copies
from zymo.runtime.evolution.validation import Task, outcome
from zymo.runtime.evolution.variant import base_ir
from zymo.runtime.evolution.workers import EvaluationTimeout, IsolatedPool
from zymo.runtime.kernel import param_of_arg

from evolve.evolve_kernels import (burn_once, neighbour_sum, racy_scale, ring_shift,
                                   scale_holdout, scale_inputs, scale_launch, spin, spin_inputs,
                                   wasteful_scale)


@pytest.fixture(scope="module")
def pool():
    executor = IsolatedPool(2, timeout=20.0, env={"ZYMO_CPU_THREADS": "1"})
    yield executor
    executor.shutdown()


def clearing_store(kernel, args):
    base = base_ir(kernel, [param_of_arg(a) for a in args])
    return base, next(op for op in base.kernel.walk() if op.has_trait(zm.ir.traits.WritesMemory)
                      and any(a.has_trait(zm.ir.traits.Loop) for a in op.ancestors()))


@pytest.fixture(scope="module")
def run(pool, tmp_path_factory):
    path = tmp_path_factory.mktemp("evolve") / "run.json"
    result = zm.evolve(wasteful_scale, scale_launch, scale_inputs, population=16, generations=5,
                       seed=1, executor=pool, checkpoint=path, holdout=scale_holdout,
                       race_check=scale_inputs, progress=False, backend="cpu")
    return result, path


def test_seeded_evolution_removes_the_redundant_clearing(run):
    result, _ = run
    assert result.speedup >= 2.0, result.report()
    # the speedup comes from the clearing loop (bench/evolve/wasteful.py lines 19-22): some
    # edit names an op there
    lines = {int(name.split(":")[0]) for edit in result.edits for name in edit.names()}
    assert lines & {19, 20, 21, 22}, result.report()
    # the variant computes what the original computes, on an input size it never saw
    big = scale_holdout(np.random.default_rng(9))
    expected = [a.copy() for a in big]
    wasteful_scale[scale_launch(big)](*expected)
    result.best[scale_launch(big)](*big)
    np.testing.assert_array_equal(big[1], expected[1])


def test_history_and_checkpoint(run):
    result, path = run
    data = json.loads(path.read_text())
    assert data["generation"] == 5 and len(data["history"]) == 6
    assert [h["generation"] for h in result.history] == list(range(6))
    assert all(0.05 < h["valid_fraction"] <= 1 for h in result.history), result.history


def test_resume_continues_from_the_checkpoint(run, pool, tmp_path):
    _, path = run
    copy = tmp_path / "run.json"
    copy.write_text(path.read_text())
    before = json.loads(copy.read_text())
    result = zm.evolve(wasteful_scale, scale_launch, scale_inputs, population=16, generations=6,
                       seed=1, executor=pool, checkpoint=copy, progress=False, backend="cpu")
    after = json.loads(copy.read_text())
    assert after["generation"] == 6
    assert after["history"][:6] == before["history"]
    assert after["tags"] >= before["tags"]
    assert result.speedup > 1.0


def test_report_and_minimize(run, tmp_path):
    result, _ = run
    minimized = result.minimize()
    assert 1 <= len(minimized.edits) <= len(result.edits)
    assert minimized.baseline / minimized.runtime >= 2.0
    text = result.report(tmp_path, minimized)
    assert "speedup alone" in text and "wasteful.py:" in text
    assert "single-threaded" in text         # what its CPU times mean
    assert result.evaluator.retimed and "timed again beside the original" in text
    assert (tmp_path / "report.md").exists()
    reloaded = zm.load_variant(wasteful_scale, tmp_path / "best.edits.json")
    assert reloaded.edits == result.best.edits


def test_out_of_bounds_variant_is_invalid_not_fatal():
    args = scale_inputs(np.random.default_rng(0))
    base, _ = clearing_store(wasteful_scale, args)
    x = base.kernel.regions[0].block.args[0]
    guard = next(op for op in base.kernel.walk() if op.has_trait(zm.ir.traits.Conditional)
                 and any(inner.operands[:1] == [x] for inner in op.walk()))
    # the bounds guard always true: the last block reads past the end of x (500 < 512 threads)
    edit = Operand("e1", guard.id, 0, ("c", "bool", True))
    fitness = evaluate(Task(wasteful_scale, (edit,), scale_inputs, None, scale_launch, 3))
    assert not fitness.valid and "BoundsError" in fitness.reason, fitness


def test_a_hanging_variant_costs_one_evaluation():
    args = spin_inputs(np.random.default_rng(0))
    base = base_ir(spin, [param_of_arg(a) for a in args])
    step = next(op for op in base.kernel.walk() if op.name == "arith.add"
                and op.results[0].type == zm.i64 and any(a.name == "control.while"
                                                         for a in op.ancestors()))
    hang = Operand("e1", step.id, 1, ("c", "i64", 0))   # k += 0: never ends
    pool = IsolatedPool(1, timeout=3.0)
    try:
        stuck = pool.submit(evaluate, Task(spin, (hang,), spin_inputs, None, (1, 64), 1))
        fine = pool.submit(evaluate, Task(spin, (), spin_inputs, None, (1, 64), 2))
        with pytest.raises(EvaluationTimeout):
            stuck.result()
        assert fine.result().valid
        assert pool.timeouts == 1
    finally:
        pool.shutdown()


def test_variant_launches_on_every_backend_alike():
    args = scale_inputs(np.random.default_rng(2))
    base, store = clearing_store(wasteful_scale, args)
    from zymo.genome import Delete
    variant = zm.VariantKernel(wasteful_scale, (Delete("e1", store.id),))
    outs = []
    for backend in ("cpu", "interp"):
        copy = [a.copy() for a in args]
        variant.on(backend)[scale_launch(copy)](*copy)
        outs.append(copy[1])
    expected = [a.copy() for a in args]
    wasteful_scale[scale_launch(expected)](*expected)
    np.testing.assert_array_equal(outs[0], expected[1])
    np.testing.assert_array_equal(outs[1], expected[1])
    assert store.id not in ops_by_id(variant.specialize(*args).optimized)


def test_a_variant_that_writes_an_input_fails():
    args = scale_inputs(np.random.default_rng(0))
    base = base_ir(wasteful_scale, [param_of_arg(a) for a in args])
    x, out = base.kernel.regions[0].block.args[:2]
    store = next(op for op in base.kernel.walk() if op.has_trait(zm.ir.traits.WritesMemory)
                 and out in op.operands)
    # the result goes to x instead of out: out keeps its poison, and x, an input, changes
    edit = Operand("e1", store.id, store.operands.index(out), ("a", base.kernel.id, 0, 0))
    fitness = evaluate(Task(wasteful_scale, (edit,), scale_inputs, None, scale_launch, 3))
    assert not fitness.valid and fitness.reason.startswith("writes to argument 0"), fitness
    assert outcome(fitness) == "wrong output"


def test_every_timed_launch_starts_from_the_inputs():
    # burn_once zeroes its own trip count: timed on memory left by earlier launches, it would
    # take microseconds; each launch restarts from the inputs, so each does the whole loop
    args = [np.array([3_000_000], np.int64), np.zeros(1, np.float64)]
    once = time_launches(burn_once.on("cpu"), (1, 1), args, "cpu", 1)
    again = time_launches(burn_once.on("cpu"), (1, 1), args, "cpu", 5)
    assert once > 5e-4 and again > 0.3 * once, (once, again)
    assert args[0][0] == 3_000_000     # the caller's arrays are left alone
    # what is restored before each launch: the arrays the kernel may write, as they were
    restored = written_copies(burn_once.on("cpu"), args, "cpu")
    assert sorted(restored) == [0, 1] and restored[0][0] == 3_000_000
    inputs = scale_inputs(np.random.default_rng(0))
    assert sorted(written_copies(wasteful_scale.on("cpu"), inputs, "cpu")) == [1]


def test_a_variant_with_a_data_race_fails_the_interpreter_check():
    args = scale_inputs(np.random.default_rng(0))
    base = base_ir(neighbour_sum, [param_of_arg(a) for a in args])
    barrier = next(op for op in base.kernel.walk() if op.has_trait(zm.ir.traits.Convergent))
    raced = interpreted(Task(neighbour_sum, (Delete("e1", barrier.id),), scale_inputs, None,
                             scale_launch, 3))
    assert not raced.valid and outcome(raced) == "data race (interpreter)", raced
    clean = interpreted(Task(neighbour_sum, (), scale_inputs, None, scale_launch, 3))
    assert clean.valid and clean.error == 0.0 and not clean.reason
    # every thread of wasteful_scale clears every element: one value, no race
    cleared = interpreted(Task(wasteful_scale, (), scale_inputs, None, scale_launch, 3))
    assert cleared.valid and not cleared.reason, cleared
    # racy_scale's original itself races: its variants are not held to more than the original
    unjudged = interpreted(Task(racy_scale, (), scale_inputs, None, scale_launch, 3))
    assert unjudged.valid and "the original races" in unjudged.reason


def _single_buffered(base):
    """ring_shift with its buffer parity deleted (the constant 0 read instead): it races."""
    store = next(op for op in base.kernel.walk() if op.has_trait(zm.ir.traits.WritesMemory)
                 and any(a.has_trait(zm.ir.traits.Loop) for a in op.ancestors()))
    parity = store.operands[1].owner.operands[0].owner
    return (Delete("e1", parity.id, (Fill(parity.id, 0, ("c", "i32", 0)),)),)


def test_a_racing_variant_is_repaired_by_a_barrier_between_the_accesses():
    args = scale_inputs(np.random.default_rng(0))
    base = base_ir(ring_shift, [param_of_arg(a) for a in args])
    racy = _single_buffered(base)
    raced = interpreted(Task(ring_shift, racy, scale_inputs, None, scale_launch, 3))
    assert outcome(raced) == "data race (interpreter)", raced
    ops = ops_by_id(base)
    assert {ops[id].name for id in raced.race} == {"memory.store", "memory.load"}, raced.race
    tags = iter(f"r{k}" for k in range(100))
    repairs = Mutator(base).race_repairs(racy, raced.race, lambda: next(tags))
    # before and after the store and the load (after the store is before the barrier)
    assert 3 <= len(repairs) <= 4 and all(isinstance(r, Copy) for r in repairs), repairs
    verdicts = [interpreted(Task(ring_shift, racy + (r,), scale_inputs, None, scale_launch, 3))
                for r in repairs]
    held = [r for r, v in zip(repairs, verdicts) if v.valid and v.error == 0.0]
    # a barrier right after the load, or right before the store, closes the race; one between
    # the store and the barrier (or the barrier and the load) does not
    assert len(held) == 2, verdicts
    assert all(outcome(v) == "data race (interpreter)" for v in verdicts if not v.valid)
    assert Mutator(base).race_repairs(racy, ("no-such-op", "1:1"), lambda: "r") == []
    from zymo.runtime.evolution.report import describe
    assert describe(held[0], ops_by_id(base)).startswith("copy (race repair) ")


class _Inline(Executor):
    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def test_the_search_evaluates_the_repairs_of_a_racing_variant_in_the_next_generation(tmp_path):
    from zymo.runtime.evolution.checkpoint import Individual, State
    from zymo.runtime.evolution.evaluator import Evaluator
    from zymo.runtime.evolution.search import _generation, _queue_repairs
    args = scale_inputs(np.random.default_rng(0))
    base = base_ir(ring_shift, [param_of_arg(a) for a in args])
    racy = _single_buffered(base)
    evaluator = Evaluator(ring_shift, scale_launch, scale_inputs, None, "cpu", _Inline(), 1, 0)
    evaluator.race_check = scale_inputs
    mutator = Mutator(base)
    state = State(np.random.default_rng(0))
    state.baseline = evaluator.one(()).runtime
    state.population = [Individual((), evaluator.cache[dumps(())])] * 2
    evaluator.cache[dumps(racy)] = evaluator.one(racy)
    _queue_repairs(mutator, state, evaluator.screen([racy], 0.0), 2)
    assert len(state.repairs) == 4 and all(r[:1] == racy for r in state.repairs)
    queued = list(state.repairs)
    state.save(tmp_path / "c.json", ring_shift, evaluator)     # a resumed run repairs them too
    resumed = State.load(tmp_path / "c.json", ring_shift)
    assert resumed.repairs == queued
    assert resumed.cache[dumps(racy)] == evaluator.cache[dumps(racy)]
    _generation(mutator, evaluator, state, 2, 0.0, 0.0, 0.0)
    assert state.repairs == []
    verdicts = [evaluator.cache[dumps(r)] for r in queued]
    # every repair was evaluated and screened: two hold, two still race
    assert all(dumps(r) in evaluator.screened for r in queued)
    assert sum(v.valid for v in verdicts) == 2, verdicts
    assert all(v.race for v in verdicts if not v.valid)
    assert len(state.population) == 2


def test_racing_children_are_screened_out_during_the_search():
    from zymo.runtime.evolution.evaluator import Evaluator
    args = scale_inputs(np.random.default_rng(0))
    base = base_ir(neighbour_sum, [param_of_arg(a) for a in args])
    barrier = next(op for op in base.kernel.walk() if op.has_trait(zm.ir.traits.Convergent))
    racy = (Delete("e1", barrier.id),)
    evaluator = Evaluator(neighbour_sum, scale_launch, scale_inputs, None, "cpu", _Inline(), 1, 0)
    evaluator.race_check = scale_inputs
    evaluator.screen([racy, ()], 0.0)
    assert not evaluator.cache[dumps(racy)].valid
    assert "RaceError" in evaluator.cache[dumps(racy)].reason
    assert dumps(()) not in evaluator.cache            # clean: its fitness is left to the search
    assert evaluator.count == 0                         # checks are not fitness evaluations
    assert evaluator.outcomes["screen: data race (interpreter)"][0] == 1
    evaluator.screen([racy], 0.0)                       # screened once
    assert sum(n for n, _ in evaluator.outcomes.values()) == 2


def _first_positive(expected, got) -> float:
    """A check that fails whenever the first input is positive: a stand-in for a variant that
    is wrong on some inputs only."""
    return float(expected[0][0] > 0)


def test_a_speedup_is_confirmed_on_other_inputs_before_it_counts():
    from zymo.runtime.evolution.evaluator import LEADER_CONFIRMATIONS, Evaluator
    from zymo.runtime.evolution.validation import Fitness
    verdicts = []
    for key in range(8):
        evaluator = Evaluator(wasteful_scale, scale_launch, scale_inputs, _first_positive, "cpu",
                              _Inline(), 1, 0)
        evaluator.confirm_key = bytes([key]) * 16
        evaluator.cache[dumps(())] = Fitness(True, 1e-3, 0.0)   # its first evaluation passed
        _, confirmations, _, paired = evaluator.screen_args((), 0.0)
        assert paired is None                 # only a would-be leader is timed again
        assert len(confirmations) == evaluator.confirmations == 2
        assert evaluator.screen_args((), 0.0)[1] == confirmations     # repeatable
        leading = evaluator.screen_args((), 0.0, leader=True)[1]
        assert len(leading) == LEADER_CONFIRMATIONS and leading[:2] == confirmations
        wrong = any(scale_inputs(np.random.default_rng(t.seed))[0][0] > 0
                    for t in confirmations)
        evaluator.screen([()], 0.0)
        verdict = evaluator.cache[dumps(())]
        assert verdict.valid == (not wrong)
        if wrong:
            assert verdict.reason == "outputs differ"
            assert evaluator.outcomes["screen: wrong output"][0] == 1
        verdicts.append(verdict.valid)
    assert True in verdicts and False in verdicts


def test_a_would_be_leaders_time_is_measured_again_beside_the_original():
    """One evaluation's time is a sample: a would-be leader's screen times it against the
    original in alternation, and that ratio times the original's baseline replaces its claim."""
    from zymo.runtime.evolution.evaluator import Evaluator
    from zymo.runtime.evolution.screening import screened
    from zymo.runtime.evolution.validation import Fitness
    evaluator = Evaluator(wasteful_scale, scale_launch, scale_inputs, None, "cpu", _Inline(), 1, 0)
    race, confirmations, tolerance, paired = evaluator.screen_args((), 0.0, leader=True)
    assert paired is not None and paired.time_it and paired.edits == ()
    verdict = screened(race, confirmations, tolerance, paired)
    original, variant = verdict.paired
    assert verdict.valid and original > 0 and variant > 0
    assert 0.3 < variant / original < 3          # the original beside itself
    evaluator.paired = False
    assert evaluator.screen_args((), 0.0, leader=True)[3] is None
    # settling: a lucky claim of 0.1 ms becomes the baseline (2 ms) times the measured ratio
    evaluator.cache[dumps(())] = Fitness(True, 2e-3, 0.0)
    evaluator.cache["lucky"] = Fitness(True, 1e-4, 0.0)
    settled = evaluator.settle("lucky", Fitness(True, error=0.0, paired=(1e-3, 9e-4)))
    assert settled.runtime == pytest.approx(1.8e-3) and settled.paired == (1e-3, 9e-4)
    assert evaluator.cache["lucky"] is settled and "lucky" in evaluator.screened
    assert evaluator.retimed == [(1e-4, pytest.approx(1.8e-3))]
    evaluator.cache["wrong"] = Fitness(True, 1e-4, 0.0)
    assert not evaluator.settle("wrong", Fitness(False, reason="outputs differ")).valid


class _Always:
    """A mutator that always proposes one edit."""

    def __init__(self, edit):
        self.edit = edit

    def mutate(self, edits, rng, tag):
        return self.edit

    def race_repairs(self, edits, race, tags):
        return []


def test_a_racing_start_never_leads_the_population():
    # the hardware missed the race and timed the variant faster than the original: the
    # initial population must not keep it (it would lead the whole search)
    from zymo.runtime.evolution.checkpoint import State
    from zymo.runtime.evolution.evaluator import Evaluator
    from zymo.runtime.evolution.search import _initial
    from zymo.runtime.evolution.validation import Fitness
    args = scale_inputs(np.random.default_rng(0))
    base = base_ir(neighbour_sum, [param_of_arg(a) for a in args])
    barrier = next(op for op in base.kernel.walk() if op.has_trait(zm.ir.traits.Convergent))
    racy = Delete("e1", barrier.id)
    evaluator = Evaluator(neighbour_sum, scale_launch, scale_inputs, None, "cpu", _Inline(), 1, 0)
    evaluator.race_check = scale_inputs
    evaluator.cache[dumps(())] = Fitness(True, 2e-3, 0.0)
    evaluator.cache[dumps((racy,))] = Fitness(True, 1e-3, 0.0)
    state = State(np.random.default_rng(0))
    state.baseline = 2e-3
    people = _initial(_Always(racy), evaluator, state, 4, 1, 0.0)
    assert all(p.edits == () for p in people)
    assert "RaceError" in evaluator.cache[dumps((racy,))].reason


def test_a_variant_checked_on_two_backends_in_one_worker_runs_on_each():
    # a worker's cache of variants must not hand the CPU (or CUDA) build to the interpreter
    from zymo.runtime.evolution.worker import original_on, variant_of
    builds = [variant_of(original_on(neighbour_sum, backend), (), False)
              for backend in ("cpu", "interp")]
    assert [b.backend for b in builds] == ["cpu", "interp"]


def test_a_variant_slower_side_by_side_is_not_reported(run, monkeypatch):
    result, _ = run
    found = result.edits
    monkeypatch.setattr(result, "side_by_side", lambda edits: (1.0, 1.25))
    monkeypatch.setattr(result, "holdout_rejected", [])
    result._choose_best()
    assert result.edits == [] and result.speedup == 1.0
    assert result.not_faster[1] == 0.8 and len(result.not_faster[0]) >= 1
    assert "no faster than the original" in result.report()
    monkeypatch.setattr(result, "side_by_side", lambda edits: (1.0, 0.5))
    result._choose_best()
    assert result.speedup == 2.0 and len(result.edits) == len(found)


def test_candidates_are_checked_past_the_first_batch(run, monkeypatch):
    """When every one of the fastest candidates fails the held-out input (they share an edit
    only it refutes), the next ones are checked, batch by batch: the fastest alone, then
    `candidates` at a time."""
    result, _ = run
    batches = []

    def first_holding(ranked):
        batches.append([p.edits for p in ranked])
        return ranked[-1].edits if len(batches) == 3 else ()

    monkeypatch.setattr(result, "_first_holding", first_holding)
    monkeypatch.setattr(result, "side_by_side", lambda edits: (1.0, 0.5))
    result._choose_best(candidates=2)
    assert [len(b) for b in batches] == [1, 2, 2]
    assert tuple(result.edits) == tuple(batches[2][-1])
    seen = [set(map(tuple, b)) for b in batches]
    assert not (seen[0] & seen[1]) and not (seen[1] & seen[2]) and not (seen[0] & seen[2])


def _report_counts(text: str) -> tuple[int, dict[str, int]]:
    """The evaluations in the report's first table, and the bold rows of its outcome table."""
    header = text.splitlines()[2].split("|")[1:-1]
    first = text.splitlines()[4].split("|")[1:-1]
    row = dict(zip((h.strip() for h in header), (c.strip() for c in first)))
    totals = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if cells and cells[0].startswith("**"):
            totals[cells[0].strip("*")] = int(cells[1].strip("*"))
    return int(row["evaluations"]), totals


def test_the_report_counts_add_up(run):
    """The evaluations at the top are the fitness evaluations of the outcome table, and its
    parts (screens, race checks) add up to all the workers' tasks."""
    result, _ = run
    evaluations, totals = _report_counts(result.report())
    outcomes = result.evaluator.outcomes
    assert evaluations == totals["fitness evaluations"] == result.evaluator.count
    assert totals["all tasks"] == sum(count for count, _ in outcomes.values())
    parts = [n for name, n in totals.items() if name not in ("all tasks",)]
    assert sum(parts) == totals["all tasks"], totals


def test_progress_gives_one_original_time(tmp_path):
    """The progress lines give the search's ratios (its timings are not the ones to quote);
    the last line gives the side-by-side times that `result` reports."""
    lines = []

    class Stream:
        def write(self, text):
            lines.extend(t for t in text.splitlines() if t.strip())

        def flush(self):
            pass

    with ThreadPoolExecutor(2) as threads:
        result = zm.evolve(neighbour_sum, scale_launch, scale_inputs, population=4,
                           generations=1, seed=1, backend="interp", executor=threads,
                           profile=False, progress=Stream())
    generations = [line for line in lines if line.startswith("generation ")]
    assert len(generations) == 2 and all(" ms" not in line for line in generations), lines
    original, best = result.runtimes
    assert lines[-1] == (f"side by side: the original {original * 1e3:.4g} ms, the best "
                         f"variant {best * 1e3:.4g} ms ({result.speedup:.2f}x, "
                         f"{len(result.edits)} edit(s))")
