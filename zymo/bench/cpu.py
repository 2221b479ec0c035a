"""The CPU suite of `zymo bench`: the CPU backend against NumPy on the same data (kernels.py),
and the compiler itself (cold and cached), for machines without a CUDA GPU."""
from __future__ import annotations

import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from . import kernels as k

INTERP_THREADS = 1 << 20   # the interpreter's row: saxpy with this many threads

def best_of(fn, repeat: int) -> float:
    """Median wall time of `fn()` in seconds over `repeat` runs, after one warm-up."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def cold_compile_ms() -> float:
    """Source -> runnable CPU code for saxpy, in a fresh process, imports excluded."""
    code = (
        "import time, numpy as np, zymo as zm, llvmlite.binding\n"
        "import zymo.backend.cpu, zymo.passes.pipeline\n"
        "from zymo.bench import kernels\n"
        "x = np.ones(16, np.float32); y = np.ones(16, np.float32)\n"
        "t = time.perf_counter(); kernels.saxpy[1, 16](2.0, x, y)\n"
        "print((time.perf_counter() - t) * 1e3)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def cases(quick: bool):
    rng = np.random.default_rng(0)
    n = 1 << (20 if quick else 24)
    x = rng.random(n, dtype=np.float32)
    y = rng.random(n, dtype=np.float32)
    yield ("saxpy", f"n={n}", lambda: k.saxpy[(n + 255) // 256, 256](2.0, x, y),
           lambda: np.add(np.float32(2.0) * x, y, out=y))
    side = 1024 if quick else 4096
    u = rng.random((side, side), dtype=np.float32)
    out = np.zeros_like(u)

    def numpy_stencil():
        out[1:-1, 1:-1] = np.float32(0.25) * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                              + u[1:-1, 2:]) - u[1:-1, 1:-1]
    yield ("stencil 2-D", f"{side}x{side}",
           lambda: k.stencil[(side // 16, side // 16), (16, 16)](u, out), numpy_stencil)
    partial = np.zeros(n // 256, np.float32)
    yield ("block reduction", f"n={n}", lambda: k.block_sum[n // 256, 256](x, partial),
           lambda: x.reshape(-1, 256).sum(axis=1))
    m = 256 if quick else 512
    a = rng.random((m, m), dtype=np.float32)
    b = rng.random((m, m), dtype=np.float32)
    c = np.zeros((m, m), np.float32)
    yield ("tiled matmul", f"{m}x{m}", lambda: k.matmul[(m // 16, m // 16), (16, 16)](a, b, c),
           lambda: np.matmul(a, b, out=c))
    values = rng.integers(0, 1 << 20, n, dtype=np.int32)
    bins = np.zeros(256, np.int32)
    yield ("histogram (atomics)", f"n={n}", lambda: k.histogram[n // 256, 256](values, bins),
           lambda: np.bincount(values % 256, minlength=256))


def run_suite(quick: bool = False, output: str | None = None) -> int:
    """Time each case (printing a line as each finishes), print the table and write it to
    `output` (a Markdown file) if given."""
    repeat = 5 if quick else 20
    started = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - started:5.1f} s] {message}", file=sys.stderr, flush=True)

    rows = []
    for name, size, ours, baseline in cases(quick):
        t_ours = best_of(ours, repeat)
        t_numpy = best_of(baseline, repeat)
        rows.append((name, size, t_ours * 1e3, t_numpy * 1e3, t_ours / t_numpy))
        progress(f"{name} ({size}): zymo {t_ours * 1e3:.3f} ms, NumPy {t_numpy * 1e3:.3f} ms")
    compile_ms = cold_compile_ms()
    progress(f"cold compile of saxpy: {compile_ms:.1f} ms")
    x = np.ones(16, np.float32)
    launch = k.saxpy[1, 16]
    cached_us = best_of(lambda: launch(2.0, x, x), 200) * 1e6
    progress(f"cached launch of saxpy: {cached_us:.1f} us")
    n_interp = INTERP_THREADS
    xi = np.ones(n_interp, np.float32)
    yi = np.ones(n_interp, np.float32)
    interp = k.saxpy.on("interp")
    interp[n_interp // 256, 256](2.0, xi, yi)
    start = time.perf_counter()
    interp[n_interp // 256, 256](2.0, xi, yi)
    interp_s = time.perf_counter() - start
    progress(f"interpreter, saxpy with {n_interp:,} threads: {interp_s:.2f} s")

    lines = [f"# zymo CPU benchmarks{' (quick)' if quick else ''}", "",
             f"Machine: {platform.machine()}, {platform.processor() or 'cpu'}, "
             f"Python {platform.python_version()}, NumPy {np.__version__}. "
             "Times are medians; ratio = zymo / NumPy (lower is better).", "",
             "| kernel | size | zymo CPU (ms) | NumPy (ms) | ratio |", "|---|---|---|---|---|"]
    lines += [f"| {n} | {s} | {a:.3f} | {b:.3f} | {r:.2f}x |" for n, s, a, b, r in rows]
    lines += ["", "| compiler | value |", "|---|---|",
              f"| saxpy source -> runnable CPU code, cold (fresh process) | {compile_ms:.1f} ms |",
              f"| cached launch of saxpy (16 elements) | {cached_us:.1f} us |",
              f"| interpreter, saxpy with {n_interp:,} threads | {interp_s:.2f} s |"]
    report = "\n".join(lines)
    print(report)
    if output:
        Path(output).write_text(report + "\n")
        print(f"\nreport written to {output}", file=sys.stderr)
    return 0
