"""After the search: which edits matter (GEVO's edit minimization, Algorithm 1), which act
alone and which only together (Algorithm 2), and the best subset of the epistatic ones."""
from __future__ import annotations

import itertools
from contextlib import contextmanager
from dataclasses import dataclass, field

from .evaluator import default_executor


@dataclass
class EditEffect:
    edit: object
    alone: float | None          # speedup of the original with only this edit (None: invalid)
    removal: float | None        # slowdown of the minimized set without this edit
    independent: bool


@dataclass
class Minimized:
    edits: list                  # the minimized edit list
    dropped: list                # edits worth less than the threshold
    effects: list[EditEffect] = field(default_factory=list)
    baseline: float = 0.0
    runtime: float = 0.0
    best_subset: list | None = None      # from the exhaustive search over the epistatic edits
    subset_runtime: float | None = None

    @property
    def independent(self) -> list:
        return [e.edit for e in self.effects if e.independent]

    @property
    def epistatic(self) -> list:
        return [e.edit for e in self.effects if not e.independent]


@contextmanager
def _executor(result, executor):
    evaluator = result.evaluator
    saved = evaluator.executor
    owned = None
    if executor is not None:
        evaluator.executor = executor
    elif saved is None:
        owned = evaluator.executor = default_executor(result.backend, 30.0)
    try:
        yield evaluator
    finally:
        if owned is not None:
            owned.shutdown(cancel_futures=True)
        evaluator.executor = saved


def minimize(result, threshold: float = 0.01, executor=None, exhaustive_limit: int = 16,
             samples: int = 3) -> Minimized:
    edits = list(result.edits)
    with _executor(result, executor) as ev:
        # every edit list on the same inputs: where inputs vary in size from draw to draw, a
        # ratio of times on different draws measures the draws
        seeds = [int(ev.rng.integers(2**62)) for _ in range(samples)]

        def measure(edit_list):
            return ev.measure(edit_list, samples, seeds)

        baseline = measure(()).runtime
        current = measure(edits)
        kept, dropped = list(edits), []
        for edit in edits:                       # Algorithm 1: drop what is worth < threshold
            trial = [e for e in kept if e is not edit]
            without = measure(trial)
            if without.valid and without.error <= result.tolerance and \
                    current.runtime / without.runtime > 1 - threshold:
                kept, current = trial, without
                dropped.append(edit)
        out = Minimized(kept, dropped, baseline=baseline, runtime=current.runtime)
        for edit in kept:                         # Algorithm 2: alone vs removed
            alone = measure([edit])
            removed = measure([e for e in kept if e is not edit])
            ok_alone = alone.valid and alone.error <= result.tolerance
            ok_removed = removed.valid and removed.error <= result.tolerance
            gain = baseline - alone.runtime if ok_alone else None
            loss = removed.runtime - current.runtime if ok_removed else None
            independent = gain is not None and loss is not None and \
                abs(gain - loss) <= threshold * baseline
            out.effects.append(EditEffect(
                edit, baseline / alone.runtime if ok_alone else None,
                removed.runtime / current.runtime if ok_removed else None, independent))
        epistatic = out.epistatic
        if 1 < len(epistatic) <= exhaustive_limit:
            base = out.independent
            subsets = [list(c) for r in range(1, len(epistatic) + 1)
                       for c in itertools.combinations(epistatic, r)]
            order = {e.key(): i for i, e in enumerate(kept)}
            lists = [sorted(base + s, key=lambda e: order[e.key()]) for s in subsets]
            fits = ev.many(lists, cached=False, seed=seeds[0])
            valid = [(f.runtime, lst) for f, lst in zip(fits, lists)
                     if f.valid and f.error <= result.tolerance]
            if valid:
                out.subset_runtime, out.best_subset = min(valid, key=lambda v: v[0])
    return out
