"""Where a derivative kernel's time goes: the primal and `zm.grad` launches of a few benchmark
kernels, each derivative also as its conservative variant (every shadow update atomic), one
launch each, for a profiler:

    ncu --metrics gpu__time_duration.sum,dram__bytes.sum,... python tools/grad_probe.py
    python tools/grad_probe.py --reps 20          # CUDA-event times, no profiler

Launch order (what the profiler lists): for each kernel: primal, grad (plain updates where
proven), grad (atomics only).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import zymo as zm  # noqa: E402
from grad_overhead import cases  # noqa: E402
from zymo.runtime.derivative import run_specialization  # noqa: E402
from zymo.runtime.kernel import normalize_dims, param_of_arg  # noqa: E402

PROBED = ("2-D stencil", "dense layer", "LBM", "per-thread dynamic loop")


def main() -> int:
    import cupy as cp
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--only", default="", help="kernels whose name starts with this")
    parser.add_argument("--max-registers", type=int, default=None,
                        help="compile the kernels (and so their derivatives) with this cap")
    options = parser.parse_args()
    reps = options.reps
    for name, kernel, _, _, big, _, (grid, block) in cases():
        if not name.startswith(PROBED) or not name.startswith(options.only):
            continue
        grid, block = normalize_dims(grid, "grid"), normalize_dims(block, "block")
        if options.max_registers:
            kernel = zm.kernel(max_registers=options.max_registers)(kernel.py_func)
        args = big()
        dev, flat = [], []
        for a in args:
            if isinstance(a, zm.Duplicated):
                a = zm.Duplicated(cp.asarray(a.value), cp.ones_like(cp.asarray(a.shadow)))
            elif isinstance(a, np.ndarray):
                a = cp.asarray(a)
            dev.append(a)
        primal = [a.value if isinstance(a, (zm.Duplicated, zm.Active)) else a for a in dev]
        dk = zm.grad(kernel)
        dk[grid, block](*dev)
        plain = dk.last
        for a in dev:
            flat.extend(a.values() if hasattr(a, "values") else [a])
            if isinstance(a, zm.Active):
                flat.append(cp.zeros(1, np.asarray(a.value).dtype))
        atomic = dk.specialization(plain.kinds, tuple(param_of_arg(v) for v in flat),
                                   plain.noalias, False)
        from zymo.runtime.grad import _tapes
        atomic_flat = flat + _tapes(atomic, "cuda", grid, block, primal)
        flat = flat + _tapes(plain, "cuda", grid, block, primal)
        runs = [("primal", lambda: kernel[grid, block](*primal)),
                ("grad", lambda: [run_specialization(plain, "cuda", grid, block, flat, 0, None),
                                  plain.consume and plain.consume.run("cuda", grid, block, flat,
                                                                      0, None)]),
                ("grad-atomic",
                 lambda: run_specialization(atomic, "cuda", grid, block, atomic_flat, 0,
                                            None))]
        from zymo.backend.nvptx import ptxas
        arch = f"sm_{cp.cuda.Device().compute_capability}"
        report = ptxas.assemble(plain.ptx(arch), arch)
        print(f"{name[:28]:28s} grad registers/spill stores {report.registers}/"
              f"{report.spill_stores} (cap {options.max_registers})", flush=True)
        for label, run in runs:
            run()                                   # compile, warm
            cp.cuda.Device().synchronize()
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            for _ in range(reps):
                run()
            stop.record()
            stop.synchronize()
            ms = cp.cuda.get_elapsed_time(start, stop) / reps
            print(f"{name[:28]:28s} {label:12s} {ms:8.3f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
