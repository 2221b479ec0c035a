"""What `zm.evolve` returns: the best variant found that also passes the held-out input and
the race check, timed against the original side by side, and the search behind it."""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

from ...genome import loads
from ...genome.edits import Edit
from ..kernel import Kernel
from .checkpoint import Individual, State
from .evaluator import Evaluator
from .guards import GUARDS, with_size
from .screening import interpreted
from .timing import time_side_by_side
from .validation import within
from .variant import VariantKernel

# the final checks' time limit, at least: a worker's first held-out check builds the large
# held-out input and runs the original on it, often behind the other workers' turns on the GPU,
# and the side-by-side timing runs both kernels for several rounds (the search's limit, tens
# of times one small evaluation, rejected sound variants as hangs and failed whole searches
# on a slow host)
FINAL_TIMEOUT = 120.0


@contextlib.contextmanager
def patient(executor, seconds: float):
    """`executor`'s time limit per task raised to at least `seconds` (where it has one)."""
    saved = getattr(executor, "timeout", None)
    if saved is not None:
        executor.timeout = max(saved, seconds)
    try:
        yield
    finally:
        if saved is not None:
            executor.timeout = saved


@dataclass
class EvolveResult:
    kernel: Kernel
    launch: object
    inputs: object
    check: object
    tolerance: float
    backend: str
    evaluator: Evaluator
    state: State
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
        found.update({key: Individual(tuple(loads(key)), fitness, key)
                      for key, fitness in self.evaluator.cache.items() if key not in found})
        ranked = sorted((p for p in found.values()
                         if within(p.fitness, self.tolerance) and p.edits),
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
                                      seed=self.evaluator.holdout_seed,
                                      label="held-out input" if inputs is not None else "")
        # every held-out size (`inputs(rng, size)`), on the search's launch function
        sized = [self.evaluator.batch(False, inputs=with_size(self.inputs, size),
                                      time_it=False, seed=self.evaluator.holdout_seed,
                                      label=f"held-out size {size}")
                 for size in self.evaluator.sizes]
        # the race check's small inputs take the search's launch, not the held-out one
        races = [self.evaluator.batch(False, interpreted, inputs=self.race_check, time_it=False,
                                      seed=self.evaluator.race_seed)] \
            if self.race_check is not None else []
        with patient(self.evaluator.executor, FINAL_TIMEOUT):
            for person in ranked:
                for batch in [checks, *sized, *races]:
                    batch.add(person.edits)
            verdicts = [batch.results() for batch in [checks, *sized, *races]]
        for person, *found in zip(ranked, *verdicts):
            failed = [v for v in found if not within(v, self.tolerance)]
            if not failed:
                return person.edits
            self.holdout_rejected.append((person.edits, failed[0].reason or failed[0].error))
        return ()

    @property
    def guards(self) -> dict[str, int]:
        """guard -> how many variants (edit lists) it rejected in the search and the final
        checks (see `guards.GUARDS`)."""
        return {guard: self.evaluator.guard_counts.get(guard, 0) for guard in GUARDS}

    def side_by_side(self, edits) -> tuple[float, float]:
        """(original, variant) seconds, interleaved over 7 rounds in one worker."""
        with patient(self.evaluator.executor, FINAL_TIMEOUT):
            future = self.evaluator.executor.submit(
                time_side_by_side, self.kernel, tuple(edits), self.inputs, self.launch,
                self.seed + 7, self.backend, 7, self.evaluator.repeats)
            return future.result()      # the limit is set when a worker takes the task

    def minimize(self, threshold: float = 0.01, executor=None, **options):
        """GEVO's edit minimization and epistasis analysis (see `analysis.minimize`)."""
        from .analysis import minimize
        return minimize(self, threshold, executor, **options)

    def report(self, path=None, analysis=None) -> str:
        from .report import report
        return report(self, path, analysis)
