"""Evolution's throughput on 1 and N GPUs, zymo's default pool and a dask cluster (issue 30,
item 1): `python -m bench.evolve.scaling --workload sw_v1 --budget 90 --gpus 1,2`.

Each configuration is one search in its own process (so that `CUDA_VISIBLE_DEVICES` decides how
many GPUs it sees), with the same workload, seed, population and time budget. Reported:
evaluations per second over the whole call and in the steady state (from the end of the first
generation, when every worker has started, to the end), and what the parent process costs per
evaluation (its CPU seconds, all threads, divided by the evaluations: mutation, selection,
submitting, bookkeeping; the part that does not shrink with more GPUs) and how busy it was (CPU
seconds per second: near 1, it holds the run back); with dask, the CPU its scheduler (a process
of its own, as `zm.gpu_cluster` starts it) spends per evaluation. Then, per GPU, where its
workers' time went (`zymo.runtime.evolution.spent`): compiling, making inputs, waiting for the
GPU's lock, holding it (launches, copies, timings), checking outputs, the interpreter's race
check; and how much of the search's wall time the GPU's lock was held ("GPU busy": near 100 %,
the GPU is the limit and another one adds its throughput; well below, its workers wait on
compiles, on the parent or on a generation's last evaluation). `--device cpu` (or a machine
without a GPU) runs the same on the CPU backend, where the "GPU" is the host and there is no
lock. `--instant` measures the parent alone: every evaluation is answered at once by a stand-in
in the workers (a fitness that is a function of the edit list), so the search runs as fast as
its parent can breed, submit and select (`--generations` then bounds it rather than the time
budget). Writes bench/results/evolve-scaling-<device>.md.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "results"


def instant(fn, *args):
    """`--instant`'s stand-in for `fn(*args)` in a worker: an evaluation's fitness from a hash
    of its edit list (60 % valid, runtimes within 20 % of the original's), a screen passed, the
    final side-by-side timing even."""
    import hashlib
    import math

    from zymo.genome import dumps
    from zymo.runtime.evolution.validation import Fitness
    if fn.__name__ == "time_side_by_side":
        return (1e-3, 1e-3)
    if fn.__name__ != "evaluate":
        return Fitness(True, math.inf, 0.0)
    edits = args[0].edits
    digest = int.from_bytes(hashlib.blake2b(dumps(edits).encode(), digest_size=8).digest(),
                            "little")
    if edits and digest % 10 >= 6:
        return Fitness(False, reason="outputs differ")
    return Fitness(True, 1e-3 * (0.8 + 0.4 * (digest >> 8) % 1000 / 1000) if edits else 1e-3,
                   0.0)


class Instant:
    """An executor whose tasks run `instant` in `inner`'s workers instead."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):          # workers, timeout, ... are the inner executor's
        return getattr(self.inner, name)

    def submit(self, fn, /, *args):
        return self.inner.submit(instant, fn, *args)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.inner.shutdown(wait, cancel_futures=cancel_futures)


def child(args) -> dict:
    """One search in this process; the GPUs are those CUDA_VISIBLE_DEVICES shows."""
    import numpy as np

    import zymo as zm
    from zymo.runtime.evolution.evaluator import default_backend

    from . import smith_waterman as sw
    from .run import device_name
    from .workloads import load
    workload = load([args.workload])[args.workload]
    inputs = workload.inputs
    if args.workload.startswith("sw_"):
        inputs = functools.partial(sw.sampled_inputs, n_pairs=args.pairs, pool=sw.POOL)
    inputs(np.random.default_rng(0))
    backend = "cpu" if args.device == "cpu" else default_backend()
    cluster = client = None
    executor = None
    if args.executor == "dask":
        import distributed
        # on the CPU, as many dask workers as the GPUs asked for (each evaluating on the host)
        cluster = zm.gpu_cluster() if backend == "cuda" else \
            zm.gpu_cluster(devices=range(args.gpus), threads_per_gpu=1)
        client = executor = distributed.Client(cluster)
    if args.instant:
        from zymo.runtime.evolution import DaskExecutor
        from zymo.runtime.evolution.evaluator import default_executor

        # by its module's name, not __main__'s, so that workers (and their pools) find it
        from . import scaling
        executor = scaling.Instant(DaskExecutor(client, backend) if client else
                                   default_executor(backend, 60.0))
    # the scheduler's CPU, in its own process: what dask costs beside the parent
    scheduler_cpu = client.run_on_scheduler(time.process_time) if client else 0.0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = zm.evolve(workload.kernel, workload.launch, inputs, check=workload.check,
                       tolerance=workload.tolerance_on(backend), population=args.population,
                       generations=args.generations, time_budget=args.budget,
                       seed=args.seed, backend=backend, executor=executor, progress=False,
                       mode=args.mode, timeout=args.timeout, **workload.options)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    spent = result.evaluator.spent
    # the locks' own account of the GPUs' time (a killed worker's included) and what the
    # pool replaced: hangs and faults hold a GPU until their worker is gone
    replaced = dict(result.evaluator.pool_account)
    held = replaced.pop("lock_held_s", [])
    outcomes = {kind: count for kind, (count, _) in result.evaluator.outcomes.items()}
    scheduler_cpu = client.run_on_scheduler(time.process_time) - scheduler_cpu if client \
        else None
    history = result.history
    first, last = history[0], history[-1]
    steady = (last["evaluations"] - first["evaluations"]) / max(
        last["session_elapsed"] - first["session_elapsed"], 1e-9)
    # after generation 0: the parent's cost per evaluation without the one-off work of a
    # search (the original's IR and profile, the baseline, the final checks)
    later = last["evaluations"] - first["evaluations"]
    steady_parent = 1e3 * (last["parent_cpu"] - first["parent_cpu"]) / later if later else None
    if args.instant:
        executor.shutdown()
    if client is not None:
        client.close()
        cluster.close()
    return {"executor": args.executor, "mode": args.mode, "gpus": args.gpus,
            "device": device_name(backend),
            "evaluations": last["evaluations"], "generations": last["generation"],
            "seconds": wall, "eval_per_s": last["evaluations"] / wall,
            "steady_eval_per_s": steady, "parent_cpu_s": cpu,
            "parent_ms_per_eval": 1e3 * cpu / max(last["evaluations"], 1),
            "parent_busy": cpu / wall, "steady_parent_ms_per_eval": steady_parent,
            "scheduler_ms_per_eval": None if scheduler_cpu is None else
            1e3 * scheduler_cpu / max(last["evaluations"], 1),
            "speedup": result.speedup, "spent": spent, "lock_held_s": held,
            "replaced": replaced, "outcomes": outcomes}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", default="sw_v1")
    parser.add_argument("--budget", type=float, default=90.0)
    parser.add_argument("--population", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gpus", default="1,2", help="GPU counts to compare")
    parser.add_argument("--executors", default="pool,dask")
    parser.add_argument("--modes", default="generational",
                        help="search modes to compare (generational, steady)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu"),
                        help="cpu: the CPU backend even where there is a GPU")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds per evaluation (default: the search's own limit)")
    parser.add_argument("--instant", action="store_true",
                        help="evaluations answered at once by a stand-in: the parent alone")
    parser.add_argument("--generations", type=int, default=10**6)
    parser.add_argument("--output", default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--executor", default="pool", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="generational", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        args.gpus = int(args.gpus)
        print("RESULT " + json.dumps(child(args)), flush=True)
        return 0
    rows = []
    configurations = [(e, m, int(g)) for m in args.modes.split(",")
                      for e in args.executors.split(",") for g in args.gpus.split(",")]
    for executor, mode, gpus in configurations:
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(map(str, range(gpus))))
        command = [sys.executable, "-m", "bench.evolve.scaling", "--child", "--executor",
                   executor, "--mode", mode, "--gpus", str(gpus), "--workload", args.workload,
                   "--budget", str(args.budget), "--population", str(args.population),
                   "--pairs", str(args.pairs), "--seed", str(args.seed),
                   "--device", args.device, "--generations", str(args.generations)] + \
            (["--timeout", str(args.timeout)] if args.timeout else []) + \
            (["--instant"] if args.instant else [])
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parents[2])
        found = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if not found:
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
            rows.append({"executor": executor, "mode": mode, "gpus": gpus,
                         "failed": done.returncode})
            continue
        rows.append(json.loads(found[-1][7:]))
        print(rows[-1], flush=True)
    text = table(rows, args)
    print(text)
    device = next((r["device"] for r in rows if "device" in r), "unknown")
    output = Path(args.output) if args.output else \
        RESULTS / f"evolve-scaling-{device.lower().replace(' ', '-')}.md"
    output.write_text(text)
    print(f"written: {output}")
    return 0 if all("failed" not in r for r in rows) else 1


def table(rows, args) -> str:
    lines = [f"# Evolution throughput by GPU count and executor ({args.workload})", "",
             f"`python -m bench.evolve.scaling --workload {args.workload} --budget {args.budget:g}"
             f" --gpus {args.gpus} --executors {args.executors} --modes {args.modes}"
             f"{' --device cpu' if args.device == 'cpu' else ''}"
             f"{' --instant --generations %d' % args.generations if args.instant else ''}`; "
             f"population "
             f"{args.population}, seed {args.seed}; device: "
             f"{next((r['device'] for r in rows if 'device' in r), '?')}.", "",
             "| executor | search | GPUs | evaluations | eval/s (whole call) | eval/s (after "
             "generation 0) | vs 1 GPU | parent ms/eval | parent ms/eval (after generation 0) "
             "| dask scheduler ms/eval | speedup found |", "|---" * 11 + "|"]
    one = {(r["executor"], r["mode"]): r["steady_eval_per_s"] for r in rows
           if r.get("gpus") == 1 and "failed" not in r}
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['executor']} | {r['mode']} | {r['gpus']} | failed (exit "
                         f"{r['failed']}) | | | | | | | |")
            continue
        base = one.get((r["executor"], r["mode"]))
        ratio = f"{r['steady_eval_per_s'] / base:.2f}x" if base else "-"
        lines.append(f"| {r['executor']} | {r['mode']} | {r['gpus']} | {r['evaluations']} | "
                     f"{r['eval_per_s']:.1f} | {r['steady_eval_per_s']:.1f} | {ratio} | "
                     f"{r['parent_ms_per_eval']:.2f} | {_ms(r.get('steady_parent_ms_per_eval'))} | "
                     f"{_ms(r.get('scheduler_ms_per_eval'))} | {r['speedup']:.2f}x |")
    return "\n".join(lines + [""] + split_table(rows) + [""] + lock_table(rows)) + "\n"


def _ms(value) -> str:
    return "-" if value is None else f"{value:.2f}"


PHASES = ("compile", "inputs", "lock wait", "on device", "checking", "interpreter", "other")


def split_table(rows) -> list[str]:
    """Per configuration and GPU: its workers' time by phase (shares of their evaluation
    time), how long the GPU was held per evaluation, and the share of the search's wall time
    its lock was held; and the parent's CPU per second of wall time."""
    lines = ["Where the time went, per GPU: its workers' evaluation time by phase (% of it), "
             "the time the GPU was held per evaluation, and the share of the call's wall time "
             "it was held (GPU busy); the parent's CPU seconds per wall second (parent busy).",
             "", "| executor | search | GPUs | device | evaluations | " +
             " | ".join(PHASES) + " | held ms/eval | GPU busy | parent busy |",
             "|---" * (8 + len(PHASES)) + "|"]
    for r in rows:
        for device, split in sorted(r.get("spent", {}).items()):
            total = sum(split.get(p, 0.0) for p in PHASES) or 1e-9
            shares = " | ".join(f"{100 * split.get(p, 0.0) / total:.0f} %" for p in PHASES)
            held = split.get("on device", 0.0)
            lines.append(f"| {r['executor']} | {r['mode']} | {r['gpus']} | {device} | "
                         f"{split['evaluations']} | {shares} | "
                         f"{1e3 * held / max(split['evaluations'], 1):.1f} | "
                         f"{100 * held / r['seconds']:.0f} % | {r['parent_busy']:.2f} |")
    return lines


def lock_table(rows) -> list[str]:
    """Per configuration: each GPU's lock held by its own account (every holder, a worker
    killed for a hang or a fault included, up to its release) beside the workers' on-device
    time, what the pool replaced, and the evaluations' outcomes."""
    lines = ["The GPUs' locks by their own account (seconds held; share of the call's wall "
             "time) beside the evaluations' on-device seconds; workers the pool replaced "
             "(timeouts, crashes, all replacements); outcomes of the evaluations.", "",
             "| executor | search | GPUs | lock held s (share) | on device s | replaced | "
             "outcomes |", "|---" * 7 + "|"]
    for r in rows:
        if "failed" in r:
            continue
        held = ", ".join(f"{s:.1f} ({100 * s / r['seconds']:.0f} %)"
                         for s in r.get("lock_held_s", [])) or "-"
        device = sum(split.get("on device", 0.0) for split in r.get("spent", {}).values())
        replaced = ", ".join(f"{k} {v}" for k, v in r.get("replaced", {}).items()) or "-"
        outcomes = ", ".join(f"{k}: {v}" for k, v in sorted(
            r.get("outcomes", {}).items(), key=lambda kv: -kv[1])) or "-"
        lines.append(f"| {r['executor']} | {r['mode']} | {r['gpus']} | {held} | "
                     f"{device:.1f} | {replaced} | {outcomes} |")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
