"""Where a search's time goes: `python -m bench.evolve.profile_search [--budget 30]` runs a short
zm.evolve of sw_v0 with every evaluation in this process (no worker isolation: a variant that
hangs hangs this run, and a GPU fault ends it) under cProfile, and prints the top of the
profile and the outcome tally."""
import argparse
import cProfile
import functools
import pstats
from concurrent.futures import Executor, Future

import zymo as zm

from . import smith_waterman as sw


class InlineExecutor(Executor):
    """Runs each task at submission, in this process."""

    timeout = 0.0

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:   # noqa: BLE001 - reported through the future
            future.set_exception(error)
        return future


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--budget", type=float, default=30.0)
    parser.add_argument("--kinds", default="delete,copy,move,replace,swap")
    options = parser.parse_args()
    inputs = functools.partial(sw.sampled_inputs, n_pairs=2000)
    profile = cProfile.Profile()
    profile.enable()
    try:
        result = zm.evolve(sw.sw_v0, sw.launch_config, inputs, check=sw.check, population=16,
                           time_budget=options.budget, executor=InlineExecutor(),
                           kinds=options.kinds.split(","), holdout=inputs)
        print(result.evaluator.outcomes)
    except Exception as error:   # noqa: BLE001 - a GPU fault poisons this process's context
        print(f"the run ended early: {type(error).__name__}")
    finally:
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(45)
