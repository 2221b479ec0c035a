"""A checkpointed zm.Tape against the full tape: the gradient of a D3Q19 lattice Boltzmann time
loop (bench/grad_overhead.py's stream-collide kernel, ping-pong buffers, float32) with respect to
its initial distributions, for several budgets of kept states.

    python bench/tape_checkpoint.py                         # the GPU if there is one, else the CPU
    python bench/tape_checkpoint.py --arrays numpy --shape 8 8 16 --steps 40
    python bench/tape_checkpoint.py --arrays device --shape 150 120 120 --steps 150 \\
        --checkpoints 2 5 10 20 --output bench/results/tape-checkpoint-h100.md

`--arrays`: numpy (the CPU backend), device (zm.DeviceArray) or cupy; on the GPU the defaults
are the issue's 120x120x150 box and 150 steps. Rows: record (the forward loop under the tape),
backward (replays and derivatives), the launches replayed, and the most bytes of copies of the
program's arrays the tape held at once (`tape.peak_nbytes`: its copies only; the distributions
and their shadows, the same for every row, are beside the table). On the CPU, the process's
peak of traced allocations during record + backward (tracemalloc, NumPy's included) too. Each
checkpointed gradient is compared with the full tape's (max |difference| / max |gradient|).
"""
from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import zymo as zm  # noqa: E402
from zymo.runtime.cuda import driver  # noqa: E402
from zymo.runtime.revolve import optimal_cost  # noqa: E402
from bench.grad_overhead import WQ, lbm_step  # noqa: E402

OMEGA = 1.2


def arrays_of(kind: str):
    """(to the arrays' kind, back to NumPy, zeros, wait for the device)."""
    if kind == "numpy":
        return np.array, np.asarray, np.zeros, lambda: None
    if kind == "device":
        return (zm.to_device, lambda a: a.copy_to_host(),
                lambda shape, dtype: zm.to_device(np.zeros(shape, dtype)), zm.synchronize)
    import cupy as cp
    return (cp.asarray, cp.asnumpy, cp.zeros, lambda: cp.cuda.Device().synchronize())


def run(kind: str, shape, steps: int, checkpoints, f0: np.ndarray, seed: np.ndarray):
    """One gradient of the loop under `zm.Tape(checkpoints=checkpoints)`: timings, memory and
    the gradient (NumPy)."""
    to, back, zeros, wait = arrays_of(kind)
    nz, ny, nx = shape
    grid, block = (1, ny, nz), (nx, 1, 1)
    launch = lbm_step.on("cpu")[grid, block] if kind == "numpy" else lbm_step[grid, block]
    a, b = to(f0), zeros(f0.shape, f0.dtype)
    first, w = a, to(seed)
    wait()
    traced = kind == "numpy"
    if traced:
        tracemalloc.start()
    start = time.perf_counter()
    with zm.Tape(checkpoints=checkpoints) as tape:
        for _ in range(steps):
            launch(a, b, OMEGA)
            a, b = b, a
    wait()
    recorded = time.perf_counter()
    tape.backward(a, w)
    wait()
    done = time.perf_counter()
    peak = tracemalloc.get_traced_memory()[1] if traced else None
    if traced:
        tracemalloc.stop()
    return dict(record=recorded - start, backward=done - recorded, replayed=tape.replayed,
                tape_bytes=tape.peak_nbytes, process_bytes=peak,
                gradient=back(tape.gradient(first)), state=tape.state_nbytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    gpu = driver.is_available()
    parser.add_argument("--arrays", choices=("numpy", "device", "cupy"),
                        default="device" if gpu else "numpy")
    parser.add_argument("--shape", type=int, nargs=3, metavar=("NZ", "NY", "NX"))
    parser.add_argument("--steps", type=int)
    parser.add_argument("--checkpoints", type=int, nargs="+", default=[1, 2, 5, 10, 20])
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args()
    on_gpu = args.arrays != "numpy"
    shape = tuple(args.shape or ((150, 120, 120) if on_gpu else (8, 8, 16)))
    steps = args.steps or (150 if on_gpu else 40)

    rng = np.random.default_rng(0)
    f0 = (WQ[:, None, None, None] * (1.0 + 0.05 * rng.standard_normal((19, *shape))))
    f0 = f0.astype(np.float32)
    seed = rng.standard_normal(f0.shape).astype(np.float32)
    run(args.arrays, shape, 2, None, f0, seed)          # compile the kernel and its derivative

    rows = [(None, run(args.arrays, shape, steps, None, f0, seed))]
    for k in args.checkpoints:
        if k == 1 and steps > 60:
            continue    # steps**2 / 2 replays: minutes, and nothing the table needs
        rows.append((k, run(args.arrays, shape, steps, k, f0, seed)))
    full = rows[0][1]
    scale = float(np.abs(full["gradient"]).max())

    where = ("CPU backend" if not on_gpu else
             f"GPU ({driver.current_device()!r}), {args.arrays} arrays")
    mib = 1 << 20
    lines = [f"### zm.Tape, D3Q19 LBM f32, {shape[2]}x{shape[1]}x{shape[0]}, {steps} steps, "
             f"{where}", "",
             f"One state (both distributions) is {full['state'] / mib:.1f} MiB; the arrays and "
             f"their shadows add {2 * full['state'] / mib:.1f} MiB to every row.", "",
             "| tape | record (s) | backward (s) | total vs full | launches replayed "
             "(optimum) | tape copies, peak (MiB) | vs full | process peak (MiB) "
             "| gradient vs full |",
             "|---|---|---|---|---|---|---|---|---|"]
    for k, r in rows:
        name = "full" if k is None else f"checkpoints={k}"
        optimum = 0 if k is None else optimal_cost(steps, k)
        total = (r["record"] + r["backward"]) / (full["record"] + full["backward"])
        process = "-" if r["process_bytes"] is None else f"{r['process_bytes'] / mib:.1f}"
        diff = float(np.abs(r["gradient"] - full["gradient"]).max()) / scale
        lines.append(f"| {name} | {r['record']:.3f} | {r['backward']:.3f} | {total:.2f}x "
                     f"| {r['replayed']} ({optimum}) | {r['tape_bytes'] / mib:.1f} "
                     f"| {r['tape_bytes'] / full['tape_bytes']:.3f} | {process} | {diff:.1e} |")
    text = "\n".join(lines)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")


if __name__ == "__main__":
    main()
