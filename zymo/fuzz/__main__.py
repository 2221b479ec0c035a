"""`python -m zymo.fuzz --count N --seed S [--backends interp,cpu,cuda] [--grad]
[--time-budget SEC] [--report out.md] [--shrink] [--regressions DIR]`: run a batch of random
programs, print (and write) a report of what ran and what was found."""
from __future__ import annotations

import argparse
import sys
import time

from .report import Batch


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zymo.fuzz", description=__doc__)
    parser.add_argument("--count", type=int, default=100, help="programs to generate")
    parser.add_argument("--seed", type=int, default=0, help="the first program's seed")
    parser.add_argument("--backends", default=None,
                        help="comma-separated, first is the reference (default: interp,cpu "
                             "and cuda where a GPU is present)")
    parser.add_argument("--grad", action="store_true",
                        help="generate the smooth float64 sub-grammar and check zm.grad / zm.jvp")
    parser.add_argument("--time-budget", type=float, default=None, help="seconds for the batch")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per program")
    parser.add_argument("--report", default=None, help="write the Markdown report here")
    parser.add_argument("--shrink", action="store_true", help="shrink each finding")
    parser.add_argument("--shrink-budget", type=float, default=120.0,
                        help="seconds to shrink one finding")
    parser.add_argument("--regressions", default=None,
                        help="write a pytest file per shrunk finding into this directory")
    parser.add_argument("--avoid-known", action="store_true",
                        help="leave out constructs with an open, known bug (generate.KNOWN_OPEN)")
    options = parser.parse_args(argv)
    backends = _backends(options.backends)
    start = time.perf_counter()
    batch = Batch(backends, options.grad, options.avoid_known)
    batch.run(range(options.seed, options.seed + options.count), options.timeout,
              options.time_budget, progress=sys.stderr)
    if options.shrink or options.regressions:
        batch.shrink_findings(options.shrink_budget, options.regressions)
    text = batch.report(time.perf_counter() - start)
    print(text)
    if options.report:
        with open(options.report, "w") as handle:
            handle.write(text)
    return 1 if batch.findings() else 0


def _backends(text: str | None) -> tuple[str, ...]:
    if text:
        return tuple(text.split(","))
    from .run import gpu_available
    return ("interp", "cpu", "cuda") if gpu_available() else ("interp", "cpu")


if __name__ == "__main__":
    sys.exit(main())
