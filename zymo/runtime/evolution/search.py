"""`zm.evolve`: GEVO's search on zymo's IR.

Individuals are edit lists. Generation loop (GEVO's): binary tournaments on (front, crowding)
pick parents; pairs cross over with `crossover_rate`; each child gains one edit with
`mutation_rate`; children are evaluated (fresh inputs each time, in parallel); a child that fails
validation gives its place back to its parent; NSGA-II keeps `population` of the elite
(population/64, at least 1) and the children. A checkpoint is written after every generation, and
a run given an existing checkpoint resumes from it.
"""
from __future__ import annotations

import functools
import math
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

from ...genome import Mutator, crossover, dumps, nsga2_select, tournament
from ...genome.edits import Edit
from ...genome.mutate import REPAIR_TAG
from ..derivative import DerivativeKernel
from ..kernel import Kernel, param_of_arg
from . import heat
from .checkpoint import Individual, State
from .derivatives import as_kernel
from .evaluator import Evaluator, Screen
from .cluster import as_executor
from .collector import search_pace
from .evaluator import default_backend, default_executor
from .guards import require_varied, with_size
from .options import ExecutionOptions, SearchOptions, ValidationOptions, gather
from .progress import printer
from .result import EvolveResult
from .steady import run_steady
from .validation import Fitness, within
from .variant import base_ir
from .workers import leave_if_importing_main

# of the population: how many racing variants a generation repairs (the fastest first), each
# into up to four children of the next generation
REPAIRED_SHARE = 1 / 16


def evolve(kernel, launch, inputs, *, search: SearchOptions | None = None,
           validation: ValidationOptions | None = None,
           execution: ExecutionOptions | None = None, **options) -> EvolveResult:
    """Evolve `kernel` (see design.md, Evolution). `launch` is (grid, block) or a function of
    the argument list; `inputs(rng)` makes a fresh argument list. The options come in three
    groups (`SearchOptions`, `ValidationOptions`, `ExecutionOptions`), and each field of a group
    is also a keyword: `zm.evolve(k, launch, inputs, population=64, check=compare)`."""
    leave_if_importing_main()   # a worker importing a script that calls this at top level
    search, validation, execution = gather(
        {"search": search, "validation": validation, "execution": execution}, options)
    seed, checkpoint = search.seed, search.checkpoint
    if isinstance(kernel, DerivativeKernel):
        kernel, inputs, launch, holdout, race_check = as_kernel(
            kernel, inputs, launch, validation.holdout, validation.race_check, seed)
        validation = replace(validation, holdout=holdout, race_check=race_check)
    if not isinstance(kernel, Kernel):
        raise TypeError(f"zm.evolve takes a @zm.kernel, zm.grad(kernel) or zm.jvp(kernel), "
                        f"not {kernel!r}")
    kernel = getattr(kernel, "original", kernel)
    backend = execution.backend or kernel.backend or default_backend()
    example = list(inputs(np.random.default_rng(seed)))
    # the held-out and race-check inputs are made in workers at the end, where a failure would
    # only reject every candidate: a broken inputs function is the caller's error, now
    for name in ("holdout", "race_check"):
        made = getattr(validation, name)
        function = made[0] if isinstance(made, tuple) else made
        if function is not None:
            try:
                made_args = function(np.random.default_rng(seed))
            except Exception as error:
                raise RuntimeError(f"zm.evolve: the {name} inputs function failed: "
                                   f"{type(error).__name__}: {error}") from error
            if name == "race_check":
                _warn_single_block(launch, made_args, example)
    require_varied(inputs, seed)
    _check_sizes(validation.sizes, inputs, launch, seed)
    base = base_ir(kernel, tuple(param_of_arg(a) for a in example))
    # an executor made here (a pool, or the isolating wrapper of a dask client) is shut down here
    executor = as_executor(execution.executor, backend, execution.timeout or 60.0) \
        if execution.executor is not None else \
        default_executor(backend, execution.timeout or 60.0, execution.workers)
    owned = executor is not execution.executor
    say = printer(search.progress, search.generations, search.time_budget, search.population)
    mutator = Mutator(base, search.kinds, heat=_heat(search.profile, validation.race_check,
                                                     kernel, launch, inputs, seed, say))
    evaluator = Evaluator(kernel, launch, inputs, validation.check, backend, executor,
                          execution.repeats, seed)
    evaluator.race_check = validation.race_check
    evaluator.sizes = tuple(validation.sizes)
    evaluator.tolerance = validation.tolerance
    if owned and getattr(executor, "spare_count", 0):
        # a replacement worker's first task would otherwise compile the original and build
        # the inputs' caches: on a GPU, where every fault replaces a worker, most of the time
        executor.restart_spares(functools.partial(
            executor.warmup, task=evaluator.task((), time_it=False, seed=seed)))
    resumed = bool(checkpoint) and Path(checkpoint).exists()
    state = State.load(checkpoint, kernel) if resumed else State(np.random.default_rng(seed))
    started = time.perf_counter()
    say.attach(state, evaluator, started)
    with search_pace():
        _search(state, search, validation, execution, mutator, evaluator, started, say,
                resumed, kernel)
    evaluator.on_result = None
    result = EvolveResult(kernel, launch, inputs, validation.check, validation.tolerance, backend,
                          evaluator, state, validation.holdout, seed, validation.race_check)
    try:
        result._choose_best()
    finally:
        if owned:
            evaluator.pool_account = getattr(executor, "account", dict)()
            executor.shutdown(cancel_futures=True)
            evaluator.executor = None
    original, best = result.runtimes
    say(f"side by side: the original {original * 1e3:.4g} ms, the best variant "
        f"{best * 1e3:.4g} ms ({result.speedup:.2f}x, {len(result.edits)} edit(s))", 0, None)
    return result


def _search(state: State, search: SearchOptions, validation: ValidationOptions,
            execution: ExecutionOptions, mutator, evaluator: Evaluator, started: float, say,
            resumed: bool, kernel) -> None:
    """The search from a new start or a resumed `state` until its generations or its time
    budget; an interruption (Ctrl-C) checkpoints the last finished generation."""
    checkpoint = search.checkpoint
    try:
        if not resumed:
            _start(state, search, validation, execution, mutator, evaluator, started, say)
        else:
            evaluator.cache.update(state.cache)
            evaluator.screened |= state.screened
            for guard, keys in state.rejected.items():
                evaluator.rejected.setdefault(guard, set()).update(keys)
            evaluator.rng.bit_generator.state = state.evaluator_rng
        if search.mode == "steady":
            run_steady(mutator, evaluator, state, search, validation.tolerance, started, say,
                       kernel)
        while search.mode == "generational" and state.generation < search.generations:
            if search.time_budget is not None and \
                    time.perf_counter() - started > search.time_budget:
                break
            _generation(mutator, evaluator, state, search.population, search.crossover_rate,
                        search.mutation_rate, validation.tolerance)
            state.record(state.generation, evaluator, started)
            say(state.history[-1], search.generations, search.time_budget)
            state.save(checkpoint, kernel, evaluator)
    except KeyboardInterrupt:
        state.save(checkpoint, kernel, evaluator)
        say("interrupted: the checkpoint holds the last finished generation", 0, None)


def _start(state: State, search: SearchOptions, validation: ValidationOptions,
           execution: ExecutionOptions, mutator, evaluator: Evaluator, started: float,
           say) -> None:
    """A new search: the original's baseline (which sets an owned pool's time limit), then the
    first population, recorded and checkpointed as generation 0."""
    executor = evaluator.executor
    baseline = evaluator.measure((), samples=max(3, getattr(executor, "workers", 1)))
    if executor is not execution.executor and execution.timeout is None:
        # a variant that hangs costs this much, not GEVO's fixed 30 s: twice the original's
        # compile (every variant compiles; a large kernel's compile is most of an evaluation,
        # and a limit below it rejected sound variants as hangs) plus, on the CPU, 10 times
        # the rest of its evaluation, at least 2 s (each worker has its core, so an
        # evaluation's time varies little); on a GPU 20 times, at least 10 s, which covers
        # waiting for the device lock behind the other workers. A GPU worker catches its own
        # hangs sooner (its waits time out at 20 times the original's kernel time): this
        # limit is the backstop. A worker's start-up is outside the limit
        factor, floor = (20, 10.0) if evaluator.backend == "cuda" else (10, 2.0)
        executor.timeout = time_limit(evaluator.compiled_seconds, evaluator.cached_seconds,
                                      factor, floor)
    if not baseline.valid:
        raise RuntimeError(f"the original kernel fails its own validation: {baseline.reason}")
    state.baseline = baseline.runtime
    evaluator.cache[dumps(())] = baseline
    state.population = _initial(mutator, evaluator, state, search.population,
                                search.initial_edits, validation.tolerance)
    state.record(0, evaluator, started)
    say(state.history[-1], search.generations, search.time_budget)
    state.save(search.checkpoint, evaluator.kernel, evaluator)


def _blocks(launch, args) -> int:
    grid = (launch(list(args)) if callable(launch) else launch)[0]
    return int(np.prod(grid))


def _warn_single_block(launch, race_args, example) -> None:
    """A race-check input that launches one block where the search's launch many: an edit can
    make a race that only other blocks run (a loop whose trip count came to depend on the block
    index), and the interpreter never sees it."""
    if callable(launch) and _blocks(launch, race_args) == 1 < _blocks(launch, example):
        warnings.warn("zm.evolve: the race_check inputs launch one block: a variant whose "
                      "race shows only in other blocks passes the race check; make them "
                      "large enough for two blocks or more", stacklevel=3)


def time_limit(compiled: float, cached: float, factor: float, floor: float) -> float:
    """Seconds a variant's evaluation may take, from the original's evaluation with its
    compile (`compiled`) and without (`cached`; equal to `compiled` when no worker ran the
    original twice, and then the factor covers the compile)."""
    return max(floor, 2.0 * (compiled - cached) + factor * cached)


def _check_sizes(sizes, inputs, launch, seed) -> None:
    """Held-out sizes need `inputs(rng, size)` and a launch that follows the arguments."""
    if not sizes:
        return
    if not callable(launch):
        raise ValueError(f"zm.evolve: held-out sizes {tuple(sizes)} need launch to be a "
                         f"function of the arguments (args -> (grid, block)), not the fixed "
                         f"{launch!r}")
    for size in sizes:
        try:
            with_size(inputs, size)(np.random.default_rng(seed))
        except Exception as error:
            raise ValueError(f"zm.evolve: held-out size {size!r}: inputs(rng, size={size!r}) "
                             f"failed ({type(error).__name__}: {error}); with sizes=, write "
                             f"the inputs function as `def inputs(rng, size=N):`") from error


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
                if p.edits and within(f, tolerance) and f.runtime < state.baseline]
        if fast:
            _queue_repairs(mutator, state, evaluator.screen(fast, tolerance), size)
            fits = [evaluator.cache.get(p.key, f) for p, f in zip(people, fits)]
        state.evaluated += len(fits)
        state.valid += sum(within(f, tolerance) for f in fits)
        for person, fit in zip(people, fits):
            person.fitness = fit
        bad = [p for p in people if not within(p.fitness, tolerance)]
        if not bad:
            break
        for person in bad:
            keep = list(person.edits[:max(0, len(person.edits) - 2)])
            edit = mutator.mutate(keep, state.rng, state.tag())
            person.edits = tuple(keep + ([edit] if edit is not None else []))
    for person in people:
        if not within(person.fitness, tolerance):
            person.edits, person.fitness = (), evaluator.cache[dumps(())]
    return people


def _generation(mutator, evaluator, state, size, cx_rate, mu_rate, tolerance) -> None:
    rng = state.rng
    old = state.population
    points = [p.objectives for p in old]
    parents = [old[i] for i in tournament(points, size, rng)]
    children = [Individual(p.edits, key=p.key) for p in parents]
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
            batch.add(child.edits, key=child.key)
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
        if child.edits and within(fit, tolerance) and fit.runtime < bar:
            screen.add(child.edits, leader=fit.runtime < leading)

    fits = batch.results(claims_speed if screen is not None else None)
    if screen is not None:
        screen.finish()
        fits = [evaluator.cache.get(c.key, f) for c, f in zip(children, fits)]
        _queue_repairs(mutator, state, screen, size)
    offspring = []
    for child, fit, parent in zip(children, fits, fallback):
        child.fitness = fit
        if within(fit, tolerance) or parent is not None:
            offspring.append(child if within(fit, tolerance) else parent)
    elite_count = max(1, size // 64)
    elite = [old[i] for i in nsga2_select(points, elite_count)]
    pool = elite + offspring
    state.population = [pool[i] for i in nsga2_select([p.objectives for p in pool], size)]
    state.generation += 1
    state.evaluated += len(children)
    state.valid += sum(within(f, tolerance) for f in fits)


def _queue_repairs(mutator, state, screen: Screen | None, size: int) -> None:
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
