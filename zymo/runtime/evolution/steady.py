"""The steady-state search (`mode="steady"`): no generation waits for its slowest evaluation.

The workers are kept busy with one evaluation each (and one queued): as soon as any comes back,
its child enters the population (NSGA-II replacement: the population and the child, less the
worst by front and crowding) and a new child is bred (a binary tournament picks parents from the
population as it is now, crossover and mutation at the search's rates) and submitted. A child
that claims to be faster than its parent is screened first (`screening.screened`: the race
check, confirmations, held-out sizes) and enters only if it passes, while other evaluations go
on. Every `population` finished children count as one generation: the history, the progress
line, `generations` and the checkpoint go by them.

Determinism: with one worker the run is a function of the seed (evaluations finish in the order
they were submitted). With several, which evaluation finishes first depends on timing, so the
order of insertions, and with it every later tournament and the edits they breed, differs from
run to run: the seed fixes the first population and each evaluation's inputs, not the path of
the search. A resumed run restarts the generation it was interrupted in.
"""
from __future__ import annotations

import functools
import math
import os
import time
from concurrent.futures import FIRST_COMPLETED, wait

from ...genome import crossover, nsga2_select, tournament
from ...genome.mutate import REPAIR_TAG
from .checkpoint import Individual
from .evaluate import evaluate
from .screening import screened
from .validation import Fitness, within


def run_steady(mutator, evaluator, state, search, tolerance: float, started: float, say,
               kernel) -> None:
    """Run the steady-state search from `state` until `search.generations` or its time
    budget; the population, history and checkpoint are `state`'s, as in the generational
    search."""
    Steady(mutator, evaluator, state, search, tolerance, started, say, kernel).run()


class Steady:
    def __init__(self, mutator, evaluator, state, search, tolerance, started, say, kernel):
        self.mutator, self.evaluator, self.state = mutator, evaluator, state
        self.search, self.tolerance, self.started = search, tolerance, started
        self.say, self.kernel = say, kernel
        executor = evaluator.executor
        workers = getattr(executor, "workers", None) or getattr(executor, "_max_workers", None) \
            or os.cpu_count() or 1
        self.in_flight = int(workers) + 1         # one queued: a worker never waits for breeding
        self.pending: dict = {}                   # future -> (child, parent, phase)
        self.keys: set[str] = set()               # edit lists on their way
        self.finished = 0                         # children inserted in this generation

    def run(self) -> None:
        self.top_up()
        while self.pending:
            done, _ = wait(list(self.pending), return_when=FIRST_COMPLETED)
            # those that finished together in the order they were submitted (a set's order
            # would differ from run to run)
            for future in [f for f in self.pending if f in done]:
                self.collect(future)
            self.top_up()

    def stopping(self) -> bool:
        budget = self.search.time_budget
        return self.state.generation >= self.search.generations or (
            budget is not None and time.perf_counter() - self.started > budget)

    def top_up(self) -> None:
        while len(self.pending) < self.in_flight and not self.stopping():
            child, parent = self.breed()
            if child.key in self.evaluator.cache:     # nothing new to learn: bred again later
                self.insert(child, parent, self.evaluator.cache[child.key])
                continue
            self.keys.add(child.key)
            future = self.evaluator.executor.submit(evaluate, self.evaluator.task(child.edits))
            self.pending[future] = (child, parent, "evaluate")

    def breed(self) -> tuple[Individual, Individual | None]:
        """A child and the parent it falls back to (None for a queued race repair)."""
        state = self.state
        if state.repairs:
            return Individual(state.repairs.pop(0)), None
        rng, population = state.rng, state.population
        first, second = (population[i] for i in tournament(
            [p.objectives for p in population], 2, rng))
        child = Individual(first.edits, key=first.key)
        if rng.random() < self.search.crossover_rate:
            crossed = crossover(list(first.edits), list(second.edits), rng)
            if crossed is not None:
                child.edits = tuple(crossed[0])
        if rng.random() < self.search.mutation_rate:
            self.mutate(child)
        # an edit list evaluated already, or on its way, teaches nothing
        for _ in range(3):
            if child.key not in self.evaluator.cache and child.key not in self.keys:
                break
            self.mutate(child)
        return child, first

    def mutate(self, person: Individual) -> None:
        edit = self.mutator.mutate(list(person.edits), self.state.rng, self.state.tag())
        if edit is not None:
            person.edits = person.edits + (edit,)

    def collect(self, future) -> None:
        child, parent, phase = self.pending.pop(future)
        evaluator, key = self.evaluator, child.key
        if phase == "evaluate":
            fitness = evaluator._result(future)
            evaluator.note(key, fitness)
            evaluator.cache[key] = fitness
            bar = parent.objectives[0] if parent is not None else math.inf
            if child.edits and within(fitness, self.tolerance) and fitness.runtime < bar and \
                    key not in evaluator.screened and evaluator.screener(self.tolerance):
                leading = min(p.objectives for p in self.state.population)[0]
                screen = evaluator.executor.submit(screened, *evaluator.screen_args(
                    child.edits, self.tolerance, leader=fitness.runtime < leading))
                self.pending[screen] = (child, parent, "screen")
                return
        else:
            verdict = evaluator._result(future, "screen: ")
            evaluator.note(key, verdict)
            fitness = evaluator.settle(key, verdict)
            if not verdict.valid:
                if verdict.race and not child.edits[-1].tag.startswith(REPAIR_TAG):
                    self.state.repairs.extend(tuple(child.edits) + (edit,) for edit in
                                              self.mutator.race_repairs(
                                                  child.edits, verdict.race,
                                                  functools.partial(self.state.tag,
                                                                    REPAIR_TAG)))
        self.keys.discard(key)
        self.insert(child, parent, fitness)

    def insert(self, child: Individual, parent, fitness: Fitness) -> None:
        """NSGA-II replacement: the child joins and the worst of the population leaves."""
        state = self.state
        child.fitness = fitness
        state.evaluated += 1
        if within(fitness, self.tolerance) and child.key not in \
                {p.key for p in state.population}:
            pool = state.population + [child]
            state.population = [pool[i] for i in nsga2_select([p.objectives for p in pool],
                                                              len(state.population))]
        state.valid += within(fitness, self.tolerance)
        self.finished += 1
        if self.finished >= len(state.population):
            self.finished = 0
            state.generation += 1
            state.record(state.generation, self.evaluator, self.started)
            self.say(state.history[-1], self.search.generations, self.search.time_budget)
            state.save(self.search.checkpoint, self.kernel, self.evaluator)
