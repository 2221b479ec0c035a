"""Where one fitness evaluation's time goes: `python -m bench.evolve.profile_eval --workload
sw_v1 --variants 20`.

Evaluates `--variants` random one-to-three-edit variants of a workload in this process (what one
worker of a search does, without the pool), after the original has been evaluated once, and
prints the compile stages' times per build (replay and re-optimization, LLVM -> PTX, PTX ->
cubin, module load) next to the whole evaluation's, then the profile's heaviest functions.
"""
from __future__ import annotations

import argparse
import cProfile
import functools
import pstats
import time
from collections import defaultdict

import numpy as np

from zymo.genome import Mutator
from zymo.runtime.evolution import evaluate as ev, validation, worker
from zymo.runtime.evolution.variant import base_ir
from zymo.runtime.kernel import param_of_arg

from . import smith_waterman as sw
from .workloads import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", default="sw_v1")
    parser.add_argument("--variants", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--pool", type=int, default=30000)
    parser.add_argument("--backend", default=None)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    from zymo.runtime.cuda import driver
    backend = args.backend or ("cuda" if driver.is_available() else "cpu")
    workload = load([args.workload])[args.workload]
    inputs = workload.inputs
    if args.workload.startswith("sw_"):
        inputs = functools.partial(sw.sampled_inputs, n_pairs=args.pairs, pool=args.pool)
    rng = np.random.default_rng(0)
    sample = inputs(rng)
    mutator = Mutator(base_ir(workload.kernel, [param_of_arg(a) for a in sample]))
    lists = []
    while len(lists) < args.variants:
        edits: list = []
        for k in range(int(rng.integers(1, 4))):
            edit = mutator.mutate(edits, rng, f"p{len(lists)}.{k}")
            if edit is not None:
                edits.append(edit)
        lists.append(tuple(edits))

    def task(edits, seed):
        return validation.Task(workload.kernel, edits, inputs, workload.check, workload.launch,
                               seed, backend)

    ev.evaluate(task((), 0))     # the worker's warm-up: the original compiled and loaded
    stages: dict[str, float] = defaultdict(float)
    outcomes: dict[str, int] = defaultdict(int)
    wall = 0.0
    profile = cProfile.Profile()
    for seed, edits in enumerate(lists, 1):
        start = time.perf_counter()
        profile.enable()
        fitness = ev.evaluate(task(edits, seed))
        profile.disable()
        wall += time.perf_counter() - start
        outcomes[validation.outcome(fitness)] += 1
        for checked in (True, False):
            variant = worker._variants.get((worker.identity(
                worker.original_on(workload.kernel, backend)), edits, checked, backend))
            spec = variant and next(iter(variant._specs.values()), None)
            for name, seconds in (getattr(spec, "timings", None) or {}).items():
                stages[f"{'checked' if checked else 'plain'} {name}"] += seconds
    n = len(lists)
    print(f"{args.workload} on {backend}: {n} variants, {dict(outcomes)}")
    print(f"evaluation: {wall / n * 1e3:.1f} ms per variant (wall, in this process)")
    for name, seconds in sorted(stages.items()):
        print(f"  {name:<32} {seconds / n * 1e3:8.1f} ms per variant")
    pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
