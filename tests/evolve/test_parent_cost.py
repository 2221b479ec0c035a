"""The search's own process made cheap (issue 30, item 1) without changing the search: the
cached keys, the kept replays, the NumPy Pareto sort and crossover's keys give what the plain
versions gave, so a seeded search is the same step for step; the collector's pace is the
caller's again afterwards; each fitness says where its worker's time went."""
import gc
import hashlib
import math
from concurrent.futures import Executor, Future

import numpy as np
import pytest

import zymo as zm
from zymo.genome import Mutator, dumps, replay, select
from zymo.genome.select import crossover, nondominated_fronts
from zymo.runtime.evolution import spent
from zymo.runtime.evolution.checkpoint import Individual
from zymo.runtime.evolution.evaluate import evaluate
from zymo.runtime.evolution.validation import Fitness, Task
from zymo.runtime.evolution.variant import base_ir
from zymo.runtime.kernel import param_of_arg

from evolve.evolve_kernels import scale_inputs, scale_launch, wasteful_scale


def _pairwise_fronts(points):
    """Deb's sort pair by pair, as the search did before the NumPy table."""
    def dominates(a, b):
        return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))
    n = len(points)
    beaten_by = [[] for _ in range(n)]
    counts = [0] * n
    for i in range(n):
        for j in range(n):
            if i != j and dominates(points[i], points[j]):
                beaten_by[i].append(j)
                counts[j] += 1
    fronts = [[i for i in range(n) if counts[i] == 0]]
    while fronts[-1]:
        following = []
        for i in fronts[-1]:
            for j in beaten_by[i]:
                counts[j] -= 1
                if counts[j] == 0:
                    following.append(j)
        fronts.append(sorted(following))
    return fronts[:-1]


def test_the_pareto_fronts_are_those_of_the_pairwise_sort():
    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(1, 40))
        # few distinct values: ties on one objective or both; invalid ones at (inf, inf)
        points = [tuple(float(v) for v in rng.integers(0, 5, size=2)) for _ in range(n)]
        points = [(math.inf, math.inf) if rng.random() < 0.2 else p for p in points]
        if trial % 7 == 0:
            points[0] = (math.nan, 1.0)
        assert nondominated_fronts(points) == _pairwise_fronts(points), points
    assert nondominated_fronts([]) == []


def _keyed_crossover(first, second, rng):
    """GEVO's crossover as written before each key was kept (`Edit.key()` at every use)."""
    keys_second = {e.key() for e in second}
    keys_first = {e.key() for e in first}
    shared = [e for e in first if e.key() in keys_second]
    differing = [e for e in first if e.key() not in keys_second] + \
                [e for e in second if e.key() not in keys_first]
    if len(differing) < 2:
        return None
    order = rng.permutation(len(differing))
    cut = int(rng.integers(1, len(differing)))
    left = {int(i) for i in order[:cut]}
    position = {}
    for e in first + second:
        position.setdefault(e.key(), len(position))
    return tuple(sorted(shared + [e for i, e in enumerate(differing) if (i in left) == side],
                        key=lambda e: position[e.key()]) for side in (True, False))


@pytest.fixture(scope="module")
def base():
    args = scale_inputs(np.random.default_rng(0))
    return base_ir(wasteful_scale, [param_of_arg(a) for a in args])


def test_crossover_and_kept_replays_match_the_plain_ones(base):
    mutator, rng = Mutator(base), np.random.default_rng(1)
    lists = []
    for _ in range(6):
        edits = []
        for index in range(4):
            edit = mutator.mutate(edits, rng, f"e{len(lists)}.{index}")
            if edit is not None:
                edits.append(edit)
                # the checked trial the mutation kept is the replay of the longer list
                assert str(mutator.variant(edits)) == str(replay(base, edits).module)
        lists.append(edits)
    for first in lists:
        for second in lists:
            seed = len(first) * 7 + len(second)
            found = crossover(first, second, np.random.default_rng(seed))
            expected = _keyed_crossover(first, second, np.random.default_rng(seed))
            assert (found is None) == (expected is None)
            if found is not None:
                assert [dumps(c) for c in found] == [dumps(c) for c in expected]


def test_an_individual_key_follows_its_edits(base):
    edit = Mutator(base).mutate([], np.random.default_rng(2), "e1")
    person = Individual(())
    assert person.key == dumps(())
    person.edits = person.edits + (edit,)
    assert person.key == dumps((edit,))
    assert Individual(person.edits, key=person.key).key == dumps((edit,))


class _Instant(Executor):
    """Answers at once: a fitness that is a function of the edit list, so that a search is a
    function of its seed and runs in a moment."""

    workers = 4

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        if fn is evaluate:
            edits = args[0].edits
            digest = int.from_bytes(hashlib.blake2b(dumps(edits).encode(),
                                                    digest_size=8).digest(), "little")
            valid = not edits or digest % 10 < 6
            runtime = 1e-3 * (0.8 + 0.4 * (digest >> 8) % 1000 / 1000) if edits else 1e-3
            future.set_result(Fitness(valid, runtime if valid else math.inf,
                                      0.0 if valid else math.inf,
                                      "" if valid else "outputs differ"))
        elif fn.__name__ == "time_side_by_side":
            future.set_result((1e-3, 1e-3))
        else:
            future.set_result(Fitness(True, math.inf, 0.0))
        return future


def _search(mode: str):
    result = zm.evolve(wasteful_scale, scale_launch, scale_inputs, population=12,
                       generations=4, seed=5, backend="cpu", executor=_Instant(),
                       profile=False, progress=False, mode=mode)
    return ([p.key for p in result.state.population],
            [(h["evaluations"], h["best_edits"], h["front"]) for h in result.history],
            sorted((k, f.valid, f.runtime) for k, f in result.evaluator.cache.items()))


@pytest.mark.parametrize("mode", ["generational", "steady"])
def test_a_seeded_search_is_the_search_the_plain_parent_made(mode, monkeypatch):
    """The same search step for step as with the parent's plain versions: Pareto fronts pair
    by pair, every key written anew, no replay kept from a mutation's trial."""
    _Instant.workers = 1 if mode == "steady" else 4   # steady: repeatable with one worker
    fast = _search(mode)
    assert fast == _search(mode)
    monkeypatch.setattr(select, "nondominated_fronts", _pairwise_fronts)
    monkeypatch.setattr(Individual, "key", property(lambda self: dumps(self.edits)))
    monkeypatch.setattr(Mutator, "_keep", lambda self, edits, module: None)
    from zymo.runtime.evolution import search, steady
    monkeypatch.setattr(search, "crossover", _keyed_crossover)
    monkeypatch.setattr(steady, "crossover", _keyed_crossover)
    assert _search(mode) == fast


def test_the_collector_pace_is_the_callers_after_a_search():
    before = gc.get_threshold()
    gc.set_threshold(900, 11, 12)
    try:
        _search("generational")
        assert gc.get_threshold() == (900, 11, 12)
    finally:
        gc.set_threshold(*before)


def test_a_fitness_says_where_its_worker_time_went():
    task = Task(wasteful_scale, (), scale_inputs, None, scale_launch, 3, "cpu", 3)
    fitness = evaluate(task)
    split = fitness.spent
    assert fitness.valid and split["device"] == "cpu"
    assert set(split) == set(spent.PHASES) | {"other", "device"}
    assert all(split[p] >= 0 for p in spent.PHASES)
    assert split["on device"] > 0 and split["inputs"] > 0
    assert sum(split[p] for p in spent.PHASES) + split["other"] == pytest.approx(
        fitness.seconds, rel=1e-6)
    totals = {}
    spent.tally(totals, split)
    spent.tally(totals, split)
    assert totals["cpu"]["evaluations"] == 2
    assert totals["cpu"]["on device"] == pytest.approx(2 * split["on device"])


def test_the_device_of_a_worker_is_named_as_the_machine_numbers_it(monkeypatch):
    monkeypatch.delenv("ZYMO_DEVICE", raising=False)
    assert spent.device() == "cpu"
    monkeypatch.setenv("ZYMO_DEVICE", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert spent.device() == "gpu 3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    monkeypatch.setenv("ZYMO_DEVICE", "0")
    assert spent.device() == "gpu 5"


def test_the_scaling_table_splits_each_gpus_time():
    from bench.evolve.scaling import instant, lock_table, split_table
    row = {"executor": "pool", "mode": "generational", "gpus": 2, "seconds": 10.0,
           "parent_busy": 0.25,
           "spent": {"gpu 1": {"evaluations": 100, "compile": 6.0, "inputs": 0.5,
                               "lock wait": 2.0, "on device": 1.5, "checking": 0.0,
                               "interpreter": 0.0, "other": 0.0},
                     "gpu 0": {"evaluations": 50, "compile": 0.0, "inputs": 0.0,
                               "lock wait": 0.0, "on device": 5.0, "checking": 0.0,
                               "interpreter": 0.0, "other": 0.0}}}
    lines = split_table([row])
    assert lines[-2] == ("| pool | generational | 2 | gpu 0 | 50 | 0 % | 0 % | 0 % | 100 % | "
                         "0 % | 0 % | 0 % | 100.0 | 50 % | 0.25 |")
    assert lines[-1].startswith("| pool | generational | 2 | gpu 1 | 100 | 60 % | 5 % | 20 % | "
                                "15 % |")
    row.update(lock_held_s=[6.5, 1.0], replaced={"timeouts": 2, "crashes": 0},
               outcomes={"valid": 120, "hang (time limit)": 30})
    assert lock_table([row])[-1] == (
        "| pool | generational | 2 | 6.5 (65 %), 1.0 (10 %) | 6.5 | timeouts 2, crashes 0 | "
        "valid: 120, hang (time limit): 30 |")
    task = Task(wasteful_scale, (), scale_inputs, None, scale_launch, 3)
    assert instant(evaluate, task) == Fitness(True, 1e-3, 0.0)
