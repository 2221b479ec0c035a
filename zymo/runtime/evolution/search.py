"""`zm.evolve`: GEVO's search on zymo's IR.

Individuals are edit lists. Generation loop (GEVO's): binary tournaments on (front, crowding)
pick parents; pairs cross over with `crossover_rate`; each child gains one edit with
`mutation_rate`; children are evaluated (fresh inputs each time, in parallel); a child that fails
validation gives its place back to its parent; NSGA-II keeps `population` of the elite
(population/64, at least 1) and the children. A checkpoint is written after every generation, and
a run given an existing checkpoint resumes from it.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import sys
import time
from concurrent.futures import as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ...genome import Mutator, crossover, dumps, loads, nsga2_select, tournament
from ...genome.edits import Edit
from ...genome.mutate import REPAIR_TAG
from ...ops.mutations import EDIT_KINDS
from ..derivative import DerivativeKernel
from ..kernel import Kernel, param_of_arg
from .derivatives import as_kernel
from . import heat
from .device_lock import DeviceLock
from .evaluate import (Fitness, Task, evaluate, interpreted, outcome, screened,
                       time_side_by_side, warm_with_task, warm_worker)
from .variant import VariantKernel, base_ir
from .workers import IsolatedPool, WorkersCannotStart, leave_if_importing_main

INVALID = (math.inf, math.inf)
# of the population: how many racing variants a generation repairs (the fastest first), each
# into up to four children of the next generation
REPAIRED_SHARE = 1 / 16


@dataclass
class Individual:
    edits: tuple[Edit, ...]
    fitness: Fitness | None = None

    @property
    def key(self) -> str:
        return dumps(self.edits)

    @property
    def objectives(self) -> tuple[float, float]:
        f = self.fitness
        return f.objectives() if f is not None and f.valid else INVALID


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
        self.count = 0
        self.fastest_seconds = 0.0
        # outcome -> [evaluations, worker seconds]: where the search's time goes
        self.outcomes: dict[str, list] = {}

    def task(self, edits, inputs=None, launch=None, time_it=True, seed=None) -> Task:
        seed = int(self.rng.integers(2**62)) if seed is None else seed
        return Task(self.kernel, tuple(edits), inputs or self.inputs, self.check,
                    launch or self.launch, seed, self.backend, self.repeats, time_it)

    def many(self, edit_lists, cached: bool = True, fn=evaluate, **options) -> list[Fitness]:
        batch = self.batch(cached, fn, **options)
        for edits in edit_lists:
            batch.add(edits)
        return batch.results()

    def batch(self, cached: bool = True, fn=evaluate, **options) -> "_Batch":
        """Evaluations (`fn` of a task) submitted as they are added (workers start on the
        first while the search still makes the others), collected by `results()`."""
        return _Batch(self, cached, options, fn)

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
        return fitness

    def screen(self, edit_lists, tolerance: float) -> "_Screen | None":
        """Screen those of `edit_lists` not screened yet (see `evaluate.screened`); one that
        fails becomes invalid in the cache, for good."""
        screen = self.screener(tolerance)
        if screen is not None:
            for edits in edit_lists:
                screen.add(edits)
            screen.finish()
        return screen

    def screener(self, tolerance: float) -> "_Screen | None":
        """Screens submitted one by one (as the evaluations that call for them finish),
        settled by `finish()`; None when there is nothing to screen with."""
        if self.race_check is None and not self.confirmations:
            return None
        return _Screen(self, tolerance)

    def screen_args(self, edits, tolerance: float, leader: bool = False) -> tuple:
        """The arguments of `evaluate.screened` for `edits`; a would-be `leader` of the
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
        return (race, tuple(self.task(edits, time_it=False, seed=int(s)) for s in seeds),
                tolerance)

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
        self.fastest_seconds = min(r.seconds for r in results)
        failed = [r for r in results if not r.valid]
        return failed[0] if failed else min(results, key=lambda r: r.runtime)


class _Batch:
    def __init__(self, evaluator: Evaluator, cached: bool, options: dict, fn):
        self.evaluator, self.cached, self.options, self.fn = evaluator, cached, options, fn
        self.keys: list[str] = []
        self.futures: dict = {}

    def add(self, edits, args: tuple | None = None) -> None:
        """Evaluate `edits`: `fn` of their task, or of `args` when given."""
        key = dumps(edits)
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
            if each is not None:
                for position in positions[key]:
                    each(position, done[key])
        if self.cached:
            self.evaluator.cache.update(done)
        return [done[k] if k in done else self.evaluator.cache[k] for k in self.keys]


class _Screen:
    """The screens of variants that claim a speedup (`evaluate.screened`), each edit list
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
            self.evaluator.screened.add(key)
            if not verdict.valid:
                if verdict.race:
                    claimed = self.evaluator.cache.get(key)
                    self.races.append((claimed.runtime if claimed else math.inf, edits,
                                       tuple(verdict.race)))
                self.evaluator.cache[key] = Fitness(False, reason=verdict.reason,
                                                    error=verdict.error, race=verdict.race)


# the held-out checks' time limit, at least: a worker's first one builds the large held-out
# input and runs the original on it, often behind the other workers' turns on the GPU (the
# search's limit, tens of times one small evaluation, rejected sound variants as hangs)
HOLDOUT_TIMEOUT = 120.0


@contextlib.contextmanager
def _patient(executor, seconds: float):
    """`executor`'s time limit per task raised to at least `seconds` (where it has one)."""
    saved = getattr(executor, "timeout", None)
    if saved is not None:
        executor.timeout = max(saved, seconds)
    try:
        yield
    finally:
        if saved is not None:
            executor.timeout = saved


def _check_options(population, generations, tolerance, kinds, time_budget) -> None:
    """The caller's mistakes, named before any work starts."""
    if not isinstance(population, int) or population < 2:
        raise ValueError(f"zm.evolve: population must be an int of at least 2, not "
                         f"{population!r}")
    if not isinstance(generations, int) or generations < 0:
        raise ValueError(f"zm.evolve: generations must be an int >= 0, not {generations!r}")
    if not (isinstance(tolerance, (int, float)) and tolerance >= 0):
        raise ValueError(f"zm.evolve: tolerance must be a number >= 0, not {tolerance!r}")
    if isinstance(kinds, str) or not len(kinds):
        raise ValueError(f"zm.evolve: kinds must be a non-empty list of edit kinds, e.g. "
                         f"('delete', 'copy'), not {kinds!r}")
    if time_budget is not None and not time_budget >= 0:
        raise ValueError(f"zm.evolve: time_budget must be seconds >= 0, not {time_budget!r}")


def _default_backend() -> str:
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
        return IsolatedPool(timeout=timeout, env=[{"ZYMO_DEVICE": str(k % gpus)}
                                                  for k in range(per_gpu * gpus)],
                            warmup=functools.partial(warm_worker, backend, locks), spares=2,
                            on_replace=functools.partial(_release_for, locks))
    count = workers or max(1, (os.cpu_count() or 1))
    return IsolatedPool(count, timeout, env={"ZYMO_CPU_THREADS": "1"},
                        warmup=functools.partial(warm_worker, backend))


def _release_for(locks, pid: int) -> None:
    for lock in locks:
        lock.release_for(pid)


def evolve(kernel, launch, inputs, check=None, tolerance: float = 0.0, population: int = 256,
           generations: int = 100, time_budget: float | None = None, seed: int = 0,
           executor=None, checkpoint: str | os.PathLike | None = None, *,
           backend: str | None = None, kinds=EDIT_KINDS, crossover_rate: float = 0.7,
           mutation_rate: float = 0.3, initial_edits: int = 3, repeats: int = 5,
           timeout: float | None = None, holdout=None, workers: int | None = None,
           race_check=None, profile=True, progress=True) -> "EvolveResult":
    """Evolve `kernel` (see design.md, Evolution). `launch` is (grid, block) or a function of
    the argument list; `holdout` is an inputs function (or (inputs, launch)) for the final,
    larger validation; the default draws fresh inputs from `inputs`. `race_check` is an inputs
    function of small inputs: the reported variant must also run on them on the reference
    interpreter, free of data races (which a GPU run can miss however often it passes).
    `profile` guides which ops mutations edit (hot ones, see `zymo.genome.mutate`): an inputs
    function (or (inputs, launch)) of small inputs the interpreter profiles the original on;
    True (the default) profiles on the race-check inputs when given, else on `inputs` for at
    most PROFILE_OPS thread-ops; False picks uniformly, as GEVO does.
    `timeout` limits one evaluation (default: 10 times the original's evaluation on the CPU,
    at least 2 s; 20 times and at least 10 s on a GPU, where a worker's own kernel time limit
    catches hangs sooner)."""
    leave_if_importing_main()   # a worker importing a script that calls this at top level
    if isinstance(kernel, DerivativeKernel):
        kernel, inputs, launch, holdout, race_check = as_kernel(kernel, inputs, launch, holdout,
                                                                race_check, seed)
    if not isinstance(kernel, Kernel):
        raise TypeError(f"zm.evolve takes a @zm.kernel, zm.grad(kernel) or zm.jvp(kernel), "
                        f"not {kernel!r}")
    kernel = getattr(kernel, "original", kernel)
    backend = backend or kernel.backend or _default_backend()
    _check_options(population, generations, tolerance, kinds, time_budget)
    example = list(inputs(np.random.default_rng(seed)))
    # the held-out and race-check inputs are made in workers at the end, where a failure would
    # only reject every candidate: a broken inputs function is the caller's error, now
    for name, made in (("holdout", holdout), ("race_check", race_check)):
        function = made[0] if isinstance(made, tuple) else made
        if function is not None:
            try:
                function(np.random.default_rng(seed))
            except Exception as error:
                raise RuntimeError(f"zm.evolve: the {name} inputs function failed: "
                                   f"{type(error).__name__}: {error}") from error
    base = base_ir(kernel, tuple(param_of_arg(a) for a in example))
    owned = executor is None
    adaptive_timeout = timeout is None
    executor = executor or default_executor(backend, timeout or 60.0, workers)
    say = _printer(progress)
    mutator = Mutator(base, kinds, heat=_heat(profile, race_check, kernel, launch, inputs, seed,
                                                say))
    evaluator = Evaluator(kernel, launch, inputs, check, backend, executor, repeats, seed)
    evaluator.race_check = race_check
    if owned and getattr(executor, "_spare_count", 0):
        # a replacement worker's first task would otherwise compile the original and build
        # the inputs' caches: on a GPU, where every fault replaces a worker, most of the time
        executor.warmup = functools.partial(warm_with_task, backend,
                                            evaluator.task((), time_it=False, seed=seed),
                                            *executor.warmup.args[1:])
        executor.restart_spares()
    state = _State.load(checkpoint, kernel) if checkpoint and Path(checkpoint).exists() else None
    started = time.perf_counter()
    try:
        if state is None:
            state = _State(np.random.default_rng(seed))
            baseline = evaluator.measure((), samples=max(3, getattr(executor, "workers", 1)))
            if owned and adaptive_timeout:
                # a variant that hangs costs this much, not GEVO's fixed 30 s. On the CPU, 10
                # times the original's whole evaluation (which compiled the original too; a
                # worker's start-up is outside the limit), at least 2 s: each worker has its
                # core, so an evaluation's time varies little. On a GPU 20 times, at least
                # 10 s, which covers waiting for the device lock behind the other workers; a
                # GPU worker catches its own hangs sooner (its waits time out at 20 times the
                # original's kernel time): this limit is the backstop
                factor, floor = (20, 10.0) if backend == "cuda" else (10, 2.0)
                executor.timeout = max(floor, factor * evaluator.fastest_seconds)
            if not baseline.valid:
                raise RuntimeError(f"the original kernel fails its own validation: "
                                   f"{baseline.reason}")
            state.baseline = baseline.runtime
            evaluator.cache[dumps(())] = baseline
            state.population = _initial(mutator, evaluator, state, population, initial_edits,
                                        tolerance)
            state.record(0, evaluator, started)
            say(state.history[-1], generations, time_budget)
            state.save(checkpoint, kernel, evaluator)
        else:
            evaluator.cache.update(state.cache)
            evaluator.screened |= state.screened
            evaluator.rng.bit_generator.state = state.evaluator_rng
        while state.generation < generations:
            if time_budget is not None and time.perf_counter() - started > time_budget:
                break
            _generation(mutator, evaluator, state, population, crossover_rate, mutation_rate,
                        tolerance)
            state.record(state.generation, evaluator, started)
            say(state.history[-1], generations, time_budget)
            state.save(checkpoint, kernel, evaluator)
    except KeyboardInterrupt:
        if state is not None:
            state.save(checkpoint, kernel, evaluator)
        say("interrupted: the checkpoint holds the last finished generation", 0, None)
    result = EvolveResult(kernel, launch, inputs, check, tolerance, backend, evaluator, state,
                          holdout, seed, race_check)
    try:
        result._choose_best()
    finally:
        if owned:
            executor.shutdown(cancel_futures=True)
            evaluator.executor = None
    original, best = result.runtimes
    say(f"side by side: the original {original * 1e3:.4g} ms, the best variant "
        f"{best * 1e3:.4g} ms ({result.speedup:.2f}x, {len(result.edits)} edit(s))", 0, None)
    return result


# a child that claims a speedup is evaluated on this many more fresh inputs before it may
# enter the population (its first evaluation is one sample; the cache keeps verdicts for good)
CONFIRMATIONS = 2
# ... and one that would lead the population, on this many
LEADER_CONFIRMATIONS = 8

# without small inputs to profile on, the fitness inputs are profiled for at most this many
# (thread, op) executions (seconds of interpretation)
PROFILE_OPS = 20_000_000


def _heat(profile, race_check, kernel, launch, inputs, seed, say) -> dict | None:
    limit = None
    if profile is True:
        profile = race_check
        if profile is None:
            profile, limit = inputs, PROFILE_OPS
    if not profile:
        return None
    inputs, dims = profile if isinstance(profile, tuple) else (profile, launch)
    try:
        return heat.profile(kernel, inputs, dims, seed, limit)
    except Exception as error:   # a kernel the interpreter cannot run is still searched
        say(f"no profile ({type(error).__name__}: {str(error)[:120]}): edits pick ops "
            f"uniformly", 0, None)
        return None


def _valid(fitness: Fitness | None, tolerance: float) -> bool:
    return fitness is not None and fitness.valid and fitness.error <= tolerance


def _initial(mutator, evaluator, state, size, initial_edits, tolerance) -> list[Individual]:
    """GEVO's start: each individual carries a few random edits; an invalid one is redrawn
    with one edit fewer each time, down to a single edit (in a kernel where most edits break
    the output, three at once are rarely valid, one often is), then falls back to the
    original."""
    people = []
    for _ in range(size):
        edits: list[Edit] = []
        for _ in range(initial_edits):
            edit = mutator.mutate(edits, state.rng, state.tag())
            if edit is not None:
                edits.append(edit)
        people.append(Individual(tuple(edits)))
    for attempt in range(max(1, initial_edits)):
        fits = evaluator.many([p.edits for p in people])
        # as for children: a variant faster than the original must not race before it can
        # lead the population (one that races but happened to give the right output on the
        # hardware would hold the lead for the whole search)
        fast = [p.edits for p, f in zip(people, fits)
                if p.edits and _valid(f, tolerance) and f.runtime < state.baseline]
        if fast:
            _queue_repairs(mutator, state, evaluator.screen(fast, tolerance), size)
            fits = [evaluator.cache.get(p.key, f) for p, f in zip(people, fits)]
        state.evaluated += len(fits)
        state.valid += sum(_valid(f, tolerance) for f in fits)
        for person, fit in zip(people, fits):
            person.fitness = fit
        bad = [p for p in people if not _valid(p.fitness, tolerance)]
        if not bad:
            break
        for person in bad:
            keep = list(person.edits[:max(0, len(person.edits) - 2)])
            edit = mutator.mutate(keep, state.rng, state.tag())
            person.edits = tuple(keep + ([edit] if edit is not None else []))
    for person in people:
        if not _valid(person.fitness, tolerance):
            person.edits, person.fitness = (), evaluator.cache[dumps(())]
    return people


def _generation(mutator, evaluator, state, size, cx_rate, mu_rate, tolerance) -> None:
    rng = state.rng
    old = state.population
    points = [p.objectives for p in old]
    parents = [old[i] for i in tournament(points, size, rng)]
    children = [Individual(p.edits) for p in parents]
    fallback: list[Individual | None] = list(parents)
    batch = evaluator.batch()
    # pair by pair: crossover, mutation, then submission, so workers evaluate while the rest
    # of the generation is made
    for i in range(0, len(children), 2):
        pair = children[i:i + 2]
        if len(pair) == 2 and rng.random() < cx_rate:
            crossed = crossover(list(pair[0].edits), list(pair[1].edits), rng)
            if crossed is not None:
                pair[0].edits, pair[1].edits = tuple(crossed[0]), tuple(crossed[1])
        for child in pair:
            if rng.random() < mu_rate:
                _mutate(mutator, child, rng, state)
            # a child that repeats an edit list already evaluated teaches nothing (its fitness
            # is cached): a population collapsed onto a few lists, as after a start where few
            # edits were valid, would otherwise spend its generations re-reading the cache
            for _ in range(3):
                if not batch.seen(child.key):
                    break
                _mutate(mutator, child, rng, state)
            batch.add(child.edits)
    # the repairs of last generation's racing variants join as extra children (no parent to
    # fall back to: one that fails is dropped)
    for edits in state.repairs:
        if not batch.seen(dumps(edits)):
            children.append(Individual(edits))
            fallback.append(None)
            batch.add(edits)
    state.repairs = []
    # a child that claims to be faster than its parent must not race (hardware runs miss
    # races): the interpreter checks it before it can enter the population, starting as soon
    # as its evaluation is back, while the rest of the generation is evaluated
    screen = evaluator.screener(tolerance)

    leading = min(points)[0]

    def claims_speed(position: int, fit: Fitness) -> None:
        child, parent = children[position], fallback[position]
        # a repair is screened whatever its speed: it was made to fix a race
        bar = parent.objectives[0] if parent is not None else math.inf
        if child.edits and _valid(fit, tolerance) and fit.runtime < bar:
            screen.add(child.edits, leader=fit.runtime < leading)

    fits = batch.results(claims_speed if screen is not None else None)
    if screen is not None:
        screen.finish()
        fits = [evaluator.cache.get(c.key, f) for c, f in zip(children, fits)]
        _queue_repairs(mutator, state, screen, size)
    offspring = []
    for child, fit, parent in zip(children, fits, fallback):
        child.fitness = fit
        if _valid(fit, tolerance) or parent is not None:
            offspring.append(child if _valid(fit, tolerance) else parent)
    elite_count = max(1, size // 64)
    elite = [old[i] for i in nsga2_select(points, elite_count)]
    pool = elite + offspring
    state.population = [pool[i] for i in nsga2_select([p.objectives for p in pool], size)]
    state.generation += 1
    state.evaluated += len(children)
    state.valid += sum(_valid(f, tolerance) for f in fits)


def _queue_repairs(mutator, state, screen: "_Screen | None", size: int) -> None:
    """Queue for the next generation the barrier repairs (`Mutator.race_repairs`) of the
    fastest variants that `screen` found racing, at most REPAIRED_SHARE of `size`."""
    if screen is None:
        return
    # a repair that still races is not repaired again: its race is the one it failed to fix
    races = [r for r in screen.races if r[1] and not r[1][-1].tag.startswith(REPAIR_TAG)]
    for _, edits, race in sorted(races, key=lambda r: r[0])[:max(1, int(size * REPAIRED_SHARE))]:
        state.repairs.extend(tuple(edits) + (edit,) for edit in mutator.race_repairs(
            edits, race, functools.partial(state.tag, REPAIR_TAG)))


def _mutate(mutator, person: Individual, rng, state) -> None:
    edit = mutator.mutate(list(person.edits), rng, state.tag())
    if edit is not None:
        person.edits = person.edits + (edit,)


class _State:
    """Everything a run needs to resume: population, RNG states, history, fitness cache."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.generation = 0
        self.population: list[Individual] = []
        self.history: list[dict] = []
        self.baseline = math.inf
        self.tags = 0
        self.evaluated = 0
        self.valid = 0
        self.cache: dict[str, Fitness] = {}
        self.screened: set[str] = set()
        self.repairs: list[tuple[Edit, ...]] = []   # edit lists the next generation evaluates
        self.evaluator_rng = None
        self.elapsed_before = 0.0

    def tag(self, prefix: str = "e") -> str:
        self.tags += 1
        return f"{prefix}{self.tags}"

    def record(self, generation: int, evaluator, started: float) -> None:
        runtimes = [p.fitness.runtime for p in self.population if p.fitness and p.fitness.valid]
        session = time.perf_counter() - started   # a resumed run's budget counts from here
        elapsed = self.elapsed_before + session
        self.history.append({
            "generation": generation, "best_runtime": min(runtimes, default=math.inf),
            "median_runtime": float(np.median(runtimes)) if runtimes else math.inf,
            "baseline": self.baseline, "evaluations": evaluator.count,
            "valid_fraction": self.valid / self.evaluated if self.evaluated else 1.0,
            "elapsed": elapsed, "session_elapsed": session,
            "evals_per_second": evaluator.count / max(session, 1e-9),
            "best_edits": min(self.population, key=lambda p: p.objectives).key,
            "front": [list(p.objectives) for p in self.population],
        })

    def save(self, path, kernel, evaluator) -> None:
        if not path:
            return
        data = {
            "kernel": kernel.__name__, "generation": self.generation,
            "rng": self.rng.bit_generator.state,
            "evaluator_rng": evaluator.rng.bit_generator.state,
            "tags": self.tags, "baseline": self.baseline, "evaluated": self.evaluated,
            "valid": self.valid, "history": self.history,
            "elapsed": self.history[-1]["elapsed"] if self.history else 0.0,
            "population": [{"edits": json.loads(p.key), "fitness": asdict(p.fitness)}
                           for p in self.population],
            "cache": {k: asdict(f) for k, f in evaluator.cache.items()},
            "screened": sorted(evaluator.screened),
            "repairs": [json.loads(dumps(edits)) for edits in self.repairs],
        }
        tmp = Path(f"{path}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)   # a crash mid-write leaves the previous checkpoint

    @classmethod
    def load(cls, path, kernel) -> "_State":
        try:
            return cls._read(path, kernel)
        except (ValueError, KeyError, TypeError) as error:
            if isinstance(error, ValueError) and "is a checkpoint of" in str(error):
                raise
            raise ValueError(f"{path} is not a zm.evolve checkpoint ({type(error).__name__}: "
                             f"{error}): name another file, or delete it to start "
                             f"afresh") from error

    @classmethod
    def _read(cls, path, kernel) -> "_State":
        data = json.loads(Path(path).read_text())
        if data["kernel"] != kernel.__name__:
            raise ValueError(f"{path} is a checkpoint of {data['kernel']}, not of "
                             f"{kernel.__name__}")
        rng = np.random.default_rng()
        rng.bit_generator.state = data["rng"]
        state = cls(rng)
        state.generation, state.tags = data["generation"], data["tags"]
        state.baseline, state.history = data["baseline"], data["history"]
        state.evaluated, state.valid = data["evaluated"], data["valid"]
        state.elapsed_before = data["elapsed"]
        state.population = [Individual(tuple(loads(json.dumps(p["edits"]))),
                                       _fitness(p["fitness"])) for p in data["population"]]
        state.cache = {k: _fitness(f) for k, f in data["cache"].items()}
        state.screened = set(data.get("screened", ()))
        state.repairs = [tuple(loads(json.dumps(e))) for e in data.get("repairs", ())]
        state.evaluator_rng = data["evaluator_rng"]
        return state


def _fitness(saved: dict) -> Fitness:
    return Fitness(**{**saved, "race": tuple(saved.get("race", ()))})


def _printer(progress):
    if not progress:
        return lambda *a: None
    stream = progress if hasattr(progress, "write") else sys.stderr

    def say(entry, generations, budget):
        if isinstance(entry, str):
            print(entry, file=stream)
            return
        spent = entry.get("session_elapsed", entry["elapsed"])
        left = f", {max(0.0, budget - spent):.0f} s left" if budget else ""
        # the search's own timings (fresh inputs, beside the other workers): a ratio to the
        # original's, not a time to quote; the final line times both side by side
        best, original = entry["best_runtime"], entry["baseline"]
        ratio = f"{original / best:.2f}x" if math.isfinite(best) and best > 0 else "no"
        print(f"generation {entry['generation']}/{generations}: best {ratio} the original "
              f"in the search's timings, {entry['valid_fraction']:.0%} valid, "
              f"{entry['evals_per_second']:.1f} eval/s{left}", file=stream, flush=True)
    return say


@dataclass
class EvolveResult:
    kernel: Kernel
    launch: object
    inputs: object
    check: object
    tolerance: float
    backend: str
    evaluator: Evaluator
    state: _State
    holdout: object
    seed: int
    race_check: object = None
    best: VariantKernel | None = None
    speedup: float = 1.0
    runtimes: tuple[float, float] = (math.inf, math.inf)
    holdout_rejected: list = field(default_factory=list)
    not_faster: tuple | None = None   # (edits, speedup) of a chosen variant slower side by side

    @property
    def edits(self) -> list[Edit]:
        return list(self.best.edits) if self.best is not None else []

    @property
    def history(self) -> list[dict]:
        return self.state.history

    def _choose_best(self, candidates: int = 32, most: int = 256) -> None:
        """The fastest variant within tolerance that also passes the held-out input (checked
        the fastest alone, then `candidates` at a time, up to `most`), timed against the
        original side by side. The fastest often share one edit that only the held-out input
        refutes (a bounds check deleted where the search's size is a multiple of the block): a
        valid variant can rank far below them."""
        # from every variant the search found valid, not only the last population: a
        # population that has converged on a variant that fails the held-out input would
        # otherwise leave nothing to report
        found = {p.key: p for p in self.state.population}
        found.update({key: Individual(tuple(loads(key)), fitness)
                      for key, fitness in self.evaluator.cache.items() if key not in found})
        ranked = sorted((p for p in found.values()
                         if _valid(p.fitness, self.tolerance) and p.edits),
                        key=lambda p: p.fitness.runtime)[:most]
        chosen = ()
        # the fastest alone first (it mostly holds, and a slow original's run on a large
        # held-out input then happens once, not once per worker), then `candidates` at a time
        cuts = [1] + list(range(1 + candidates, len(ranked), candidates))
        bounds = [0] + [c for c in cuts if c < len(ranked)] + [len(ranked)]
        for start, stop in zip(bounds, bounds[1:]):
            chosen = self._first_holding(ranked[start:stop])
            if chosen:
                break
        if not chosen:    # nothing to report: the original against itself is 1.0, not noise
            original = self.side_by_side(())[0]
            self.runtimes, self.speedup = (original, original), 1.0
            self.best = VariantKernel(self.kernel, (), self.kernel.backend)
            return
        self.runtimes = self.side_by_side(chosen)
        self.speedup = self.runtimes[0] / self.runtimes[1]
        if chosen and self.speedup < 1.0:
            # faster in the search's noisy timings, not side by side: the original stands
            self.not_faster = (chosen, self.speedup)
            chosen = ()
            self.runtimes = (self.runtimes[0], self.runtimes[0])
            self.speedup = 1.0
        self.best = VariantKernel(self.kernel, chosen, self.kernel.backend)

    def _first_holding(self, ranked: list) -> tuple:
        """The edits of the first of `ranked` that passes the held-out input and the race
        check (all submitted at once), or ()."""
        inputs, launch = self.holdout if isinstance(self.holdout, tuple) else \
            (self.holdout, None)
        # one held-out input for every candidate (the original runs on it once per worker)
        checks = self.evaluator.batch(False, inputs=inputs, launch=launch, time_it=False,
                                      seed=self.evaluator.holdout_seed)
        # the race check's small inputs take the search's launch, not the held-out one
        races = self.evaluator.batch(False, interpreted, inputs=self.race_check, time_it=False,
                                     seed=self.evaluator.race_seed) \
            if self.race_check is not None else None
        with _patient(self.evaluator.executor, HOLDOUT_TIMEOUT):
            for person in ranked:
                checks.add(person.edits)
                if races is not None:
                    races.add(person.edits)
            held = checks.results()
            interp = races.results() if races is not None else held
        for person, check, race in zip(ranked, held, interp):
            if _valid(check, self.tolerance) and _valid(race, self.tolerance):
                return person.edits
            self.holdout_rejected.append(
                (person.edits, check.reason or check.error if not _valid(check, self.tolerance)
                 else race.reason or race.error))
        return ()

    def side_by_side(self, edits) -> tuple[float, float]:
        future = self.evaluator.executor.submit(
            time_side_by_side, self.kernel, tuple(edits), self.inputs, self.launch,
            self.seed + 7, self.backend, 7, self.evaluator.repeats)
        return future.result()

    def minimize(self, threshold: float = 0.01, executor=None, **options):
        """GEVO's edit minimization and epistasis analysis (see `analysis.minimize`)."""
        from .analysis import minimize
        return minimize(self, threshold, executor, **options)

    def report(self, path=None, analysis=None) -> str:
        from .report import report
        return report(self, path, analysis)
