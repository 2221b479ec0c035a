"""The generational and the steady-state search side by side on one workload and budget:
evaluations per second and the best speedup (in the search's own timings) over time.
`python -m bench.evolve.modes --workloads sw_v0 --budget 600` (the GPU run of issue 30);
`--backend cpu` tries it on the CPU. The options are those of `bench.evolve.run`.
"""
from __future__ import annotations

import math

import numpy as np

from .run import build_parser, evolve_one
from .workloads import load

# the curve's sample points, as fractions of the budget
POINTS = (0.1, 0.25, 0.5, 0.75, 1.0)


def best_at(history: list[dict], seconds: float) -> float:
    """The best speedup the search had found `seconds` into its run (1.0 before any)."""
    found = [h["baseline"] / h["best_runtime"] for h in history
             if h["elapsed"] <= seconds and math.isfinite(h["best_runtime"])]
    return max(found, default=1.0)


def main(argv=None):
    args = build_parser(__doc__).parse_args(argv)
    from zymo.runtime.cuda import driver
    backend = args.backend or ("cuda" if driver.is_available() else "cpu")
    lines = ["| workload | mode | evaluations | eval/s | " +
             " | ".join(f"best at {p:.0%}" for p in POINTS) + " | reported speedup |",
             "|---" * (5 + len(POINTS)) + "|"]
    for name, workload in load(args.workloads.split(",")).items():
        for mode in ("generational", "steady"):
            args.mode = mode
            result, _, row = evolve_one(name, workload, args, backend)
            history = result.history
            spent = history[-1]["elapsed"] if history else 0.0
            rate = history[-1]["evals_per_second"] if history else 0.0
            curve = [f"{best_at(history, p * spent):.2f}x" for p in POINTS]
            lines.append(f"| {name} | {mode} | {row['evaluations']} | {rate:.2f} | "
                         + " | ".join(curve) + f" | {row['speedup']:.2f}x |")
            print(lines[-1], flush=True)
    print("\n".join(lines))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
