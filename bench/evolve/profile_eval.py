"""Where an evaluation's time goes: `python -m bench.evolve.profile_eval` (prints the top of a
cProfile of evaluating random single-edit variants of sw_v1 in this process)."""
import cProfile
import functools
import pstats
import time

import numpy as np

from zymo.evolve import Mutator
from zymo.runtime.evolution.evaluate import Task, evaluate
from zymo.runtime.evolution.variant import base_ir
from zymo.runtime.kernel import param_of_arg

from . import smith_waterman as sw

if __name__ == "__main__":
    backend = "cuda"
    inputs = functools.partial(sw.sampled_inputs, n_pairs=2000)
    args = inputs(np.random.default_rng(0))
    mutator = Mutator(base_ir(sw.sw_v1, [param_of_arg(a) for a in args]))
    rng = np.random.default_rng(1)
    evaluate(Task(sw.sw_v1, (), inputs, sw.check, sw.launch_config, 0, backend))
    edits = [mutator.mutate([], rng, f"e{k}") for k in range(6)]
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    for k, edit in enumerate(edits):
        print(evaluate(Task(sw.sw_v1, (edit,), inputs, sw.check, sw.launch_config, k, backend)))
    profile.disable()
    print("seconds per evaluation", (time.perf_counter() - start) / len(edits))
    pstats.Stats(profile).sort_stats("cumulative").print_stats(35)
