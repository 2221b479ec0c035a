"""The search's side of evaluation: where evaluations run by default (isolated worker
processes), tasks for edit lists submitted to the executor, their fitness cached by edit list and
tallied by outcome, and the screens (`screening.screened`) of variants that claim a speedup,
each edit list screened once per search."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import os
from concurrent.futures import as_completed

import numpy as np

from ...genome import dumps
from . import spent
from .device_lock import DeviceLock
from .evaluate import evaluate
from .guards import guard_of, with_size
from .screening import interpreted, screened
from .validation import Fitness, Task, outcome
from .worker import warm_worker
from .workers import IsolatedPool, WorkersCannotStart

# a child that claims a speedup is evaluated on this many more fresh inputs before it may
# enter the population (its first evaluation is one sample; the cache keeps verdicts for good)
CONFIRMATIONS = 2
# ... and one that would lead the population, on this many
LEADER_CONFIRMATIONS = 8


class Evaluator:
    """Submits evaluations of edit lists to an executor; caches fitness by edit list."""

    def __init__(self, kernel, launch, inputs, check, backend, executor, repeats, seed):
        self.kernel, self.launch, self.inputs, self.check = kernel, launch, inputs, check
        self.backend, self.executor, self.repeats = backend, executor, repeats
        self.rng = np.random.default_rng([seed, 1])
        # the race check's inputs: one draw for the whole search, so that a worker runs the
        # original on the interpreter once, not once per check
        self.race_seed = int(np.random.default_rng([seed, 2]).integers(2**62))
        self.holdout_seed = int(np.random.default_rng([seed, 3]).integers(2**62))
        self.cache: dict[str, Fitness] = {}
        self.race_check = None          # small inputs for the interpreter's race check
        # a variant claiming a speedup is also evaluated on this many other fresh inputs
        self.confirmations = CONFIRMATIONS
        self.confirm_key = np.random.default_rng([seed, 4]).bytes(16)
        self.screened: set[str] = set()
        # a would-be leader's screen times it against the original in alternation
        # (`screening.screened`); off, the claimed runtime of its one evaluation stands
        self.paired = True
        self.retimed: list[tuple[float, float]] = []   # (claimed, paired) runtime per leader
        self.count = 0
        # the original's evaluations in `measure`: the slowest compiled it, as every variant's
        # evaluation compiles the variant; the fastest (when a worker ran it twice) did not
        self.compiled_seconds = self.cached_seconds = 0.0
        # outcome -> [evaluations, worker seconds]: where the search's time goes
        self.outcomes: dict[str, list] = {}
        # the pool's replacements and its locks' held seconds, kept when a search ends
        # (`IsolatedPool.account`)
        self.pool_account: dict = {}
        self.tolerance = 0.0            # the error a valid variant may have
        self.sizes: tuple = ()          # held-out sizes: `inputs(rng, size)` at each
        # guard -> the edit lists it rejected (see `guards`)
        self.rejected: dict[str, set] = {}
        self.on_result = None           # called with each fitness as it comes back
        # device -> phase -> worker seconds (see `spent`), over every evaluation and screen
        self.spent: dict[str, dict] = {}

    def task(self, edits, inputs=None, launch=None, time_it=True, seed=None,
             label: str = "") -> Task:
        seed = int(self.rng.integers(2**62)) if seed is None else seed
        return Task(self.kernel, tuple(edits), inputs or self.inputs, self.check,
                    launch or self.launch, seed, self.backend, self.repeats, time_it, label)

    def held_out(self, edits, seed=None) -> list[Task]:
        """Untimed checks of `edits` at each held-out size."""
        return [self.task(edits, inputs=with_size(self.inputs, size), time_it=False, seed=seed,
                          label=f"held-out size {size}") for size in self.sizes]

    def note(self, key: str, fitness: Fitness, label: str = "") -> None:
        """Count `fitness`'s rejection against the guard that made it (`label`: the task's)."""
        if fitness.valid:     # ran, and compared: wrong beyond the tolerance on its inputs
            guard = None if fitness.error <= self.tolerance else \
                guard_of(f"{label}: outputs differ" if label else "outputs differ")
        else:
            guard = guard_of(fitness.reason)
        if guard is not None:
            self.rejected.setdefault(guard, set()).add(key)

    @property
    def guard_counts(self) -> dict[str, int]:
        """guard -> the number of variants (edit lists) it rejected."""
        return {guard: len(keys) for guard, keys in self.rejected.items()}

    def many(self, edit_lists, cached: bool = True, fn=evaluate, **options) -> list[Fitness]:
        batch = self.batch(cached, fn, **options)
        for edits in edit_lists:
            batch.add(edits)
        return batch.results()

    def batch(self, cached: bool = True, fn=evaluate, **options) -> "Batch":
        """Evaluations (`fn` of a task) submitted as they are added (workers start on the
        first while the search still makes the others), collected by `results()`."""
        return Batch(self, cached, options, fn)

    def _result(self, future, kind: str = "") -> Fitness:
        """The fitness from `future`, tallied by outcome (`kind` prefixes the outcome of other
        work than fitness evaluations, which `count` leaves out)."""
        self.count += not kind
        try:
            fitness = future.result()
        except WorkersCannotStart:   # no variant's fault: nothing can run
            raise
        except Exception as error:   # timeouts, crashed workers, unpicklable results
            seconds = getattr(self.executor, "timeout", 0.0) if \
                type(error).__name__ == "EvaluationTimeout" else 0.0
            fitness = Fitness(False, reason=f"{type(error).__name__}: {error}", seconds=seconds)
        tally = self.outcomes.setdefault(kind + outcome(fitness), [0, 0.0])
        tally[0] += 1
        tally[1] += fitness.seconds
        spent.tally(self.spent, fitness.spent)
        if self.on_result is not None and not kind:
            self.on_result(fitness)
        return fitness

    def screen(self, edit_lists, tolerance: float) -> "Screen | None":
        """Screen those of `edit_lists` not screened yet (see `screening.screened`); one that
        fails becomes invalid in the cache, for good."""
        screen = self.screener(tolerance)
        if screen is not None:
            for edits in edit_lists:
                screen.add(edits)
            screen.finish()
        return screen

    def screener(self, tolerance: float) -> "Screen | None":
        """Screens submitted one by one (as the evaluations that call for them finish),
        settled by `finish()`; None when there is nothing to screen with."""
        if self.race_check is None and not self.confirmations:
            return None
        return Screen(self, tolerance)

    def screen_args(self, edits, tolerance: float, leader: bool = False) -> tuple:
        """The arguments of `screening.screened` for `edits`; a would-be `leader` of the
        population gets LEADER_CONFIRMATIONS (it would breed most of the next generations: a
        variant wrong on one input in ten thousand must not get there). The confirmations'
        seeds are a function of the edit list, so that the search stays repeatable whatever
        order the screens are submitted in."""
        digest = hashlib.blake2b(dumps(edits).encode(), digest_size=8,
                                 key=self.confirm_key).digest()
        seeds = np.random.default_rng(int.from_bytes(digest, "little")).integers(
            2**62, size=max(self.confirmations, LEADER_CONFIRMATIONS) if leader and
            self.confirmations else self.confirmations)
        race = None if self.race_check is None else self.task(
            edits, inputs=self.race_check, time_it=False, seed=self.race_seed)
        paired = self.task(edits, seed=int(seeds[0]) if len(seeds) else None) \
            if leader and self.paired else None
        return (race, tuple(self.task(edits, time_it=False, seed=int(s)) for s in seeds) +
                tuple(self.held_out(edits, seed=int(seeds[0]) if len(seeds) else None)),
                tolerance, paired)

    def settle(self, key: str, verdict: Fitness) -> Fitness:
        """Record the screen's `verdict` on edit list `key`: one that failed makes the variant
        invalid in the cache, for good; a would-be leader's paired timing sets its runtime
        (the original's baseline times the variant/original ratio measured side by side).
        The variant's fitness as the cache now holds it."""
        self.screened.add(key)
        claimed = self.cache.get(key)
        if not verdict.valid:
            self.cache[key] = Fitness(False, reason=verdict.reason, error=verdict.error,
                                      race=verdict.race)
        elif verdict.paired and claimed is not None and dumps(()) in self.cache:
            original, variant = verdict.paired
            self.cache[key] = dataclasses.replace(
                claimed, runtime=self.cache[dumps(())].runtime * variant / original,
                paired=verdict.paired)
            self.retimed.append((claimed.runtime, self.cache[key].runtime))
        return self.cache.get(key, verdict)

    def one(self, edits, **options) -> Fitness:
        return self.many([edits], **options)[0]

    def measure(self, edits, samples: int = 3, seeds=None) -> Fitness:
        """`samples` evaluations, on fresh inputs or on those the `seeds` make (so that several
        edit lists can be compared on equal inputs); the fastest, as GEVO's analysis does, or
        the first failure."""
        seeds = seeds or [None] * samples
        futures = [self.executor.submit(evaluate, self.task(tuple(edits), seed=seed))
                   for seed in seeds]
        results = [self._result(f) for f in futures]
        self.compiled_seconds = max(r.seconds for r in results)
        self.cached_seconds = min(r.seconds for r in results)
        failed = [r for r in results if not r.valid]
        return failed[0] if failed else min(results, key=lambda r: r.runtime)


class Batch:
    def __init__(self, evaluator: Evaluator, cached: bool, options: dict, fn):
        self.evaluator, self.cached, self.options, self.fn = evaluator, cached, options, fn
        self.keys: list[str] = []
        self.futures: dict = {}

    def add(self, edits, args: tuple | None = None, key: str | None = None) -> None:
        """Evaluate `edits` (whose `dumps` is `key`, when known): `fn` of their task, or of
        `args` when given."""
        key = key or dumps(edits)
        self.keys.append(key)
        if (self.cached and key in self.evaluator.cache) or key in self.futures:
            return
        self.futures[key] = self.evaluator.executor.submit(
            self.fn, *(args or (self.evaluator.task(edits, **self.options),)))

    def seen(self, key: str) -> bool:
        """Is the edit list `key` evaluated already, or on its way in this batch?"""
        return key in self.futures or (self.cached and key in self.evaluator.cache)

    def results(self, each=None) -> list[Fitness]:
        """The fitness of every edit list added, in order. `each(position, fitness)` is called
        for every position as soon as its fitness is known (cached ones first, then in the
        order evaluations finish), so that follow-up work can start while others still run."""
        kind = {evaluate: "", interpreted: "race check: "}.get(self.fn, "screen: ")
        positions: dict[str, list[int]] = {}
        for position, key in enumerate(self.keys):
            positions.setdefault(key, []).append(position)
        done: dict[str, Fitness] = {}
        if each is not None:
            for key, where in positions.items():
                if key not in self.futures:
                    for position in where:
                        each(position, self.evaluator.cache[key])
        keys = {future: key for key, future in self.futures.items()}
        finished = as_completed(keys) if each is not None else keys
        for future in finished:
            key = keys[future]
            done[key] = self.evaluator._result(future, kind)
            self.evaluator.note(key, done[key], self.options.get("label", ""))
            if each is not None:
                for position in positions[key]:
                    each(position, done[key])
        if self.cached:
            self.evaluator.cache.update(done)
        return [done[k] if k in done else self.evaluator.cache[k] for k in self.keys]


class Screen:
    """The screens of variants that claim a speedup (`screening.screened`), each edit list
    screened once per search."""

    def __init__(self, evaluator: Evaluator, tolerance: float):
        self.evaluator, self.tolerance = evaluator, tolerance
        self.batch = evaluator.batch(cached=False, fn=screened)
        self.edits: dict[str, tuple] = {}
        # (runtime claimed, edits, the two racing ops' ids) of those that failed with a race
        self.races: list[tuple[float, tuple, tuple]] = []

    def add(self, edits, leader: bool = False) -> None:
        key = dumps(edits)
        if key not in self.evaluator.screened and key not in self.edits:
            self.edits[key] = tuple(edits)
            self.batch.add(edits, self.evaluator.screen_args(edits, self.tolerance, leader))

    def finish(self) -> None:
        """Wait for the screens; a variant that failed is invalid in the cache, for good."""
        for (key, edits), verdict in zip(self.edits.items(), self.batch.results()):
            if not verdict.valid and verdict.race:
                claimed = self.evaluator.cache.get(key)
                self.races.append((claimed.runtime if claimed else math.inf, edits,
                                   tuple(verdict.race)))
            self.evaluator.settle(key, verdict)


def default_backend() -> str:
    from ..cuda import driver
    return "cuda" if driver.is_available() else "cpu"


def default_executor(backend: str, timeout: float, workers: int | None = None) -> IsolatedPool:
    """On the GPU, `workers` processes per visible GPU (default: up to 12, one core each) that
    compile variants in parallel and take their GPU in turn (`DeviceLock`), so the GPU runs one
    evaluation at a time and its timings are never shared; on the CPU one process per core
    (each single-threaded)."""
    if backend == "cuda":
        from ..cuda import driver
        gpus = driver.device_count()
        # the parent and two spares need cores too
        per_gpu = workers or max(1, min(12, ((os.cpu_count() or 3) - 2) // gpus))
        locks = [DeviceLock() for _ in range(gpus)]
        # a GPU fault or a hang spoils a worker's context: a started spare replaces it at once
        pool = IsolatedPool(timeout=timeout, env=[{"ZYMO_DEVICE": str(k % gpus)}
                                                  for k in range(per_gpu * gpus)],
                            warmup=functools.partial(warm_worker, backend, locks), spares=2,
                            on_replace=functools.partial(_release_for, locks))
        pool.locks = locks
        return pool
    count = workers or max(1, (os.cpu_count() or 1))
    return IsolatedPool(count, timeout, env={"ZYMO_CPU_THREADS": "1"},
                        warmup=functools.partial(warm_worker, backend))


def _release_for(locks, pid: int) -> None:
    for lock in locks:
        lock.release_for(pid)
