"""Evolve the workloads of bench/evolve (and print a table): `python -m bench.evolve.run
--workloads sw_v0,sw_v1,simcov,sgemm,hotspot,nbody`.

Each workload gets `--budget` seconds of search on this machine's GPU (or the CPU without one);
the best variant is validated on the held-out input (and the interpreter's race check) and timed
against the original side by side, then minimized. Results go to
bench/results/evolve-<device>.md.
"""
from __future__ import annotations

import argparse
import functools
import os
import platform
import sys
import time
from pathlib import Path

# one BLAS thread per process, set before NumPy loads it: the evaluation workers (a dozen per
# GPU) share the cores, and checks calling LAPACK (rodinia_gaussian's solve) with a thread
# per core in every worker ran past the 60 s task limit on a 16-core machine
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402

import zymo as zm  # noqa: E402

from . import smith_waterman as sw  # noqa: E402
from .workloads import load  # noqa: E402

RESULTS = Path(__file__).resolve().parent.parent / "results"


def device_name(backend: str) -> str:
    if backend != "cuda":
        return platform.processor() or platform.machine()
    from zymo.runtime.cuda import driver
    drv = driver.bindings()
    name = driver.call(drv.cuDeviceGetName, 100, 0)
    return name.decode().split("\x00")[0] if isinstance(name, bytes) else str(name)


def checkpoint_of(name: str, args) -> Path | None:
    if args.checkpoint_dir:
        folder = Path(args.checkpoint_dir)
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"evolve-{name}.checkpoint.json"
    return RESULTS / f"evolve-{name}.checkpoint.json" if args.keep_checkpoint else None


def evolve_one(name, workload, args, backend):
    inputs, holdout = workload.inputs, workload.holdout
    if name.startswith("sw_"):
        inputs = functools.partial(sw.sampled_inputs, n_pairs=args.pairs, pool=args.pool)
        holdout = functools.partial(sw.holdout_inputs, n_pairs=args.holdout)
    # what the inputs cache (pools on disk) is built here, once, before the workers start
    inputs(np.random.default_rng(0))
    holdout(np.random.default_rng(0))
    tolerance = workload.tolerance_on(backend)
    started = time.perf_counter()
    result = zm.evolve(workload.kernel, workload.launch, inputs, check=workload.check,
                       tolerance=tolerance, population=args.population,
                       generations=args.generations, time_budget=args.budget, seed=args.seed,
                       backend=backend,
                       checkpoint=checkpoint_of(name, args),
                       holdout=holdout, race_check=workload.race_check, workers=args.workers,
                       kinds=args.kinds.split(","), profile=not args.no_profile,
                       mode=getattr(args, "mode", "generational"),
                       **workload.options)
    elapsed = time.perf_counter() - started
    minimized = result.minimize(samples=2) if result.edits and args.minimize else None
    last = result.history[-1]
    return result, minimized, {
        "kernel": name, "speedup": result.speedup, "original_ms": result.runtimes[0] * 1e3,
        "best_ms": result.runtimes[1] * 1e3, "edits": len(result.edits),
        "minimized": len(minimized.edits) if minimized else 0,
        "generations": last["generation"], "evaluations": last["evaluations"],
        "eval_per_s": last["evaluations"] / elapsed, "valid": last["valid_fraction"],
        "tolerance": tolerance, "seconds": elapsed}


def build_parser(description=__doc__) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--workloads", default="sw_v0,sw_v1",
                        help="comma-separated, from: " + ", ".join(load()))
    parser.add_argument("--budget", type=float, default=120.0)
    parser.add_argument("--population", type=int, default=64)
    parser.add_argument("--generations", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=2000, help="Smith-Waterman pairs")
    parser.add_argument("--pool", type=int, default=sw.POOL,
                        help="fitness pairs are drawn from a pool of this many")
    parser.add_argument("--holdout", type=int, default=sw.HOLDOUT)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--kinds", default="delete,copy,move,replace,swap,operand")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--minimize", action="store_true")
    parser.add_argument("--keep-checkpoint", action="store_true",
                        help="write a checkpoint per generation (bench/results/evolve-NAME."
                             "checkpoint.json); a run finding one resumes from it")
    parser.add_argument("--checkpoint-dir", default=None,
                        help="the same, in this folder (e.g. one whose files come back from a "
                             "machine that may be taken away mid-run)")
    parser.add_argument("--backend", default=None)
    parser.add_argument("--no-profile", action="store_true",
                        help="edits pick ops uniformly (GEVO), not by the original's profile")
    parser.add_argument("--output", default=None)
    parser.add_argument("--mode", default="generational", choices=["generational", "steady"],
                        help="steady: no generation waits for its slowest evaluation")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    from zymo.runtime.cuda import driver
    backend = args.backend or ("cuda" if driver.is_available() else "cpu")
    rows, sections = [], []
    for name, workload in load(args.workloads.split(",")).items():
        result, minimized, row = evolve_one(name, workload, args, backend)
        rows.append(row)
        sections.append(f"## {name}\n\n{workload.describe}; tolerance "
                        f"{row['tolerance']:.3g}\n\n" + result.report(None, minimized))
    device = device_name(backend)
    head = ["| kernel | original ms | best ms | speedup | edits | minimized | generations | "
            "evaluations | eval/s | valid | seconds |", "|---" * 11 + "|"]
    body = [f"| {r['kernel']} | {r['original_ms']:.3f} | {r['best_ms']:.3f} | "
            f"{r['speedup']:.2f}x | {r['edits']} | {r['minimized']} | {r['generations']} | "
            f"{r['evaluations']} | {r['eval_per_s']:.1f} | {r['valid']:.0%} | "
            f"{r['seconds']:.0f} |" for r in rows]
    table = "\n".join(head + body)
    print(table)
    text = (f"# Evolving kernels on {device} ({backend})\n\n"
            f"Fresh inputs every evaluation"
            + (f" (Smith-Waterman: {args.pairs} pairs drawn from a pool of {args.pool}, held "
               f"out: {args.holdout} other pairs)" if any(name.startswith("sw_") for name in
                                                         args.workloads.split(",")) else "")
            + "; every reported variant "
            f"passes the held-out input and the interpreter's race check; "
            f"population {args.population}; {args.budget:.0f} s per workload; seed {args.seed}; "
            f"edit kinds {args.kinds}.\nReproduce: `python -m bench.evolve.run "
            f"{reproduce(sys.argv[1:])}`"
            f"\n\n{table}\n\n"
            + "\n\n".join(sections))
    slug = device.lower().replace(" ", "-")
    out = Path(args.output) if args.output else RESULTS / f"evolve-{slug}.md"
    out.write_text(text)
    print(f"wrote {out}")


def reproduce(argv: list[str]) -> str:
    """The command line's options, less those that only say where files go."""
    kept, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in ("--output", "--checkpoint-dir"):
            skip = True
        elif not word.startswith(("--output=", "--checkpoint-dir=")):
            kept.append(word)
    return " ".join(kept)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
