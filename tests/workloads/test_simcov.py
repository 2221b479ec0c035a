"""The SIMCoV workload of the evolutionary optimizer: its hash, the kernel against the NumPy
reference on the CPU backend and on the race-checking interpreter, the model's invariants over
several steps, `check`, and a short seeded evolution."""
from __future__ import annotations

import functools
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import zymo as zm  # noqa: E402
from bench.evolve import simcov as sc  # noqa: E402
from bench.evolve.workloads import load  # noqa: E402
from zymo.genome import dumps  # noqa: E402
from zymo.runtime.evolution.screening import interpreted  # noqa: E402
from zymo.runtime.evolution.validation import Task  # noqa: E402

# status -> the statuses it may have one step later
LEGAL = {sc.HEALTHY: {sc.HEALTHY, sc.INCUBATING},
         sc.INCUBATING: {sc.INCUBATING, sc.EXPRESSING},
         sc.EXPRESSING: {sc.EXPRESSING, sc.APOPTOTIC, sc.DEAD},
         sc.APOPTOTIC: {sc.APOPTOTIC, sc.DEAD},
         sc.DEAD: {sc.DEAD}}
TIMER = {sc.INCUBATING: sc.INCUBATION, sc.EXPRESSING: sc.EXPRESSION, sc.APOPTOTIC: sc.APOPTOSIS}


def copied(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def step_on_cpu(args):
    got = copied(args)
    sc.simcov_step[sc.launch](*got)
    return got


def assert_matches_reference(got, want):
    """Integer outputs and fields to the bit, totals up to the order of the atomic adds."""
    np.testing.assert_array_equal(got[sc.CELLS_OUT], want[sc.CELLS_OUT])
    np.testing.assert_array_equal(got[sc.COUNTS_OUT], want[sc.COUNTS_OUT])
    np.testing.assert_array_equal(got[sc.FIELDS_OUT], want[sc.FIELDS_OUT])
    np.testing.assert_allclose(got[sc.TOTALS], want[sc.TOTALS], rtol=sc.REFERENCE_TOTALS_RTOL)


def next_args(after):
    """The arguments of the following step."""
    return sc.step_args(after[sc.CELLS_OUT], after[sc.FIELDS_OUT], after[sc.NX], after[sc.NY],
                        after[sc.SEED], after[sc.STEP] + 1)


def contested_moves(args) -> int:
    """Empty points that two or more T cells try to move into this step."""
    cells = args[sc.CELLS]
    target, wanders = sc.targets(cells, args[sc.FIELDS], sc.neighbours(args[sc.NX], args[sc.NY]),
                                 args[sc.SEED], args[sc.STEP])
    wanted = np.bincount(target[wanders], minlength=len(cells))
    return int(np.count_nonzero((wanted >= 2) & (cells[:, sc.TCELL] < 0)))


# ---- the hash ----------------------------------------------------------------------------------
def test_hash_is_reproducible_and_differs_across_seeds_steps_and_purposes():
    n = 4096
    h = sc.draws(7, 3, sc.MOVE, n)
    np.testing.assert_array_equal(h, sc.draws(7, 3, sc.MOVE, n))
    for other in (sc.draws(8, 3, sc.MOVE, n), sc.draws(7, 4, sc.MOVE, n),
                  sc.draws(7, 3, sc.INFECT, n)):
        assert np.mean(h == other) < 0.01
    assert len(np.unique(h)) == n                  # a bijection of the point, for a fixed step
    uniform = (h >> 8).astype(np.float64) * sc.UNIT
    assert 0.0 <= uniform.min() and uniform.max() < 1.0 and abs(uniform.mean() - 0.5) < 0.02
    directions = np.bincount(h >> 29, minlength=8)
    assert directions.min() > 0.8 * n / 8


def test_make_state_is_seeded_and_mid_infection():
    a = sc.make_state(40, 30, np.random.default_rng(4))
    b = sc.make_state(40, 30, np.random.default_rng(4))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    statuses = np.bincount(a[sc.CELLS][:, sc.EPI], minlength=sc.STATUSES)
    assert (statuses[:sc.DEAD] > 0).all(), statuses
    assert a[sc.FIELDS].min() >= 0 and a[sc.FIELDS][:, sc.CHEMOKINE].max() > 0


# ---- the kernel against the reference ----------------------------------------------------------
def test_kernel_matches_reference_on_cpu():
    args = sc.inputs(np.random.default_rng(1))
    assert_matches_reference(step_on_cpu(args), sc.reference(args))


def test_kernel_matches_reference_on_a_crowded_oblong_grid():
    args = sc.make_state(23, 41, np.random.default_rng(2), tcell_density=0.1)
    assert contested_moves(args) > 0
    assert_matches_reference(step_on_cpu(args), sc.reference(args))


def test_kernel_is_race_free_on_interpreter():
    args = sc.small_inputs(np.random.default_rng(5))
    assert contested_moves(args) > 0
    got = copied(args)
    sc.simcov_step.on("interp")[sc.launch](*got)
    assert_matches_reference(got, sc.reference(args))
    # and as the search runs it: outputs poisoned, the original against itself
    verdict = interpreted(Task(sc.simcov_step, (), sc.small_inputs, sc.check, sc.launch, 1,
                               "interp", 1, False))
    assert verdict.valid and verdict.error == 0.0 and not verdict.reason, verdict


def test_totals_add_to_what_is_there():
    args = sc.make_state(20, 20, np.random.default_rng(6))
    args[sc.TOTALS][:] = [10.0, 20.0]
    args[sc.COUNTS_OUT][:] = np.arange(sc.COUNTS)
    got = step_on_cpu(args)
    assert_matches_reference(got, sc.reference(args))
    fresh = step_on_cpu(sc.step_args(*args[:6]))
    np.testing.assert_array_equal(got[sc.COUNTS_OUT] - fresh[sc.COUNTS_OUT], np.arange(sc.COUNTS))


# ---- the model's invariants, over steps of the kernel ------------------------------------------
def check_step(before, after):
    """Asserts the model's invariants across one step; returns how many points' T cell
    changed."""
    cells, new = before[sc.CELLS], after[sc.CELLS_OUT]
    nx, ny = before[sc.NX], before[sc.NY]
    # T cells: none duplicated; gone only if their tissue time ran out; moved at most one point
    old_ids, new_ids = cells[:, sc.TCELL], new[:, sc.TCELL]
    present = new_ids >= 0
    assert len(np.unique(new_ids[present])) == np.count_nonzero(present)
    dying = (old_ids >= 0) & (cells[:, sc.TISSUE_TIME] <= 1)
    assert set(new_ids[present]) == set(old_ids[(old_ids >= 0) & ~dying])
    where_before = {i: p for p, i in enumerate(old_ids) if i >= 0}
    for p in np.flatnonzero(present):
        q = where_before[new_ids[p]]
        assert max(abs(p // ny - q // ny), abs(p % ny - q % ny)) <= 1
        assert new[p, sc.TISSUE_TIME] == cells[q, sc.TISSUE_TIME] - 1
    assert (new[present, sc.TISSUE_TIME] > 0).all()
    assert (new[~present][:, [sc.TISSUE_TIME, sc.BINDING]] == 0).all()
    # epithelial cells: legal statuses, legal transitions, running timers
    old, status = cells[:, sc.EPI], new[:, sc.EPI]
    for s, allowed in LEGAL.items():
        assert set(np.unique(status[old == s])) <= allowed
    for s, timer in TIMER.items():
        assert (new[status == s, timer] > 0).all()
    apoptotic = (old == sc.EXPRESSING) & (status == sc.APOPTOTIC)
    assert (new[apoptotic, sc.TCELL] >= 0).all() and (new[apoptotic, sc.BINDING] > 0).all()
    # the totals are the new state's
    tally = np.append(np.bincount(status, minlength=sc.STATUSES), np.count_nonzero(present))
    np.testing.assert_array_equal(after[sc.COUNTS_OUT], tally)
    np.testing.assert_allclose(after[sc.TOTALS], after[sc.FIELDS_OUT].sum(axis=0, dtype=np.float64),
                               rtol=sc.REFERENCE_TOTALS_RTOL)
    assert nx * ny == len(new) and after[sc.FIELDS_OUT].min() >= 0
    return np.count_nonzero(new_ids != old_ids)


def test_steps_keep_the_model_invariants():
    args = sc.make_state(30, 50, np.random.default_rng(8), tcell_density=0.1)
    changed = 0
    for _ in range(15):
        after = step_on_cpu(args)
        changed += check_step(args, after)
        args = next_args(after)
    assert changed > 0


# ---- check -------------------------------------------------------------------------------------
def test_check():
    want = sc.reference(sc.make_state(20, 20, np.random.default_rng(9)))
    assert sc.check(want, copied(want)) == 0.0
    got = copied(want)
    p = int(np.argmax(got[sc.FIELDS_OUT][:, sc.VIRIONS]))
    got[sc.FIELDS_OUT][p, sc.VIRIONS] *= np.float32(1.001)
    assert sc.check(want, got) == pytest.approx(1e-3, rel=1e-3)
    got = copied(want)
    got[sc.TOTALS][1] *= np.float32(1 + 1e-5)
    assert 0 < sc.check(want, got) < 2e-5
    for k, index in ((sc.CELLS_OUT, (3, sc.TCELL)), (sc.COUNTS_OUT, 0)):
        got = copied(want)
        got[k][index] += 1
        assert sc.check(want, got) == math.inf
    got = copied(want)
    got[sc.FIELDS_OUT][0, sc.CHEMOKINE] = np.nan
    assert sc.check(want, got) == math.inf


def test_tolerance_is_measured_and_cached():
    tol = sc.tolerance("cpu")
    assert sc.MIN_TOLERANCE <= tol < 1e-3
    assert sc.tolerance("cpu") == tol
    assert load(["simcov"])["simcov"].tolerance_on("cpu") == tol


def test_holdout_is_built_once_and_legal(monkeypatch):
    monkeypatch.setattr(sc, "HOLDOUT", 60)
    monkeypatch.setattr(sc, "TILE", 20)
    monkeypatch.setattr(sc, "_cache", {})
    args = sc.holdout()
    assert sc.holdout()[sc.CELLS] is not args[sc.CELLS]            # copies of one cached state
    np.testing.assert_array_equal(sc.holdout()[sc.CELLS], args[sc.CELLS])
    assert args[sc.NX] == args[sc.NY] == 60 and args[sc.CELLS].shape == (3600, sc.CELL_FIELDS)
    ids = args[sc.CELLS][:, sc.TCELL]
    assert sorted(ids[ids >= 0]) == list(range(np.count_nonzero(ids >= 0)))
    check_step(args, step_on_cpu(args))


# ---- evolution ---------------------------------------------------------------------------------
def test_short_evolution_on_cpu():
    """A short seeded search that finds sound variants: SIMCoV's compile is most of an
    evaluation on the CPU, and a time limit below it once rejected every variant as a hang."""
    workload = sc.WORKLOADS["simcov"]
    reduced = functools.partial(sc.make_state, 24, 24, warmup_steps=20)
    result = zm.evolve(workload.kernel, workload.launch, reduced, check=workload.check,
                       tolerance=workload.tolerance_on("cpu"), population=4, generations=1,
                       seed=3, backend="cpu", workers=1, holdout=reduced,
                       race_check=workload.race_check, progress=False)
    assert [h["generation"] for h in result.history] == [0, 1]
    variants = [f for key, f in result.evaluator.cache.items() if key != dumps(())]
    assert any(f.valid for f in variants), [f.reason for f in variants]
    assert result.speedup > 0
    args = reduced(np.random.default_rng(11))
    want = step_on_cpu(args)
    got = copied(args)
    result.best[workload.launch](*got)
    assert workload.check(want, got) <= workload.tolerance_on("cpu")
