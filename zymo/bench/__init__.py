"""The benchmark suite that `zymo bench` runs, shipped inside the package so that it runs from an
installed copy: with a CUDA GPU (and CuPy, for the CUDA C baseline) the GPU kernel suite
(`gpu_kernels`: zymo against CUDA C through NVRTC and against numba-cuda); otherwise, or with
ZYMO_BENCH_CPU=1, the CPU suite (`cpu`: the CPU backend against NumPy, and the compiler itself).

The repository's bench/ holds the GPU-session scripts (launch overhead, reverse-mode overhead,
the CFD and evolution benchmarks), which need a clone."""
from __future__ import annotations

import importlib.util
import os
import sys


def gpu_present() -> bool:
    """A CUDA GPU usable through zymo's runtime (driver, cuda-bindings and a device)."""
    try:
        from ..runtime.cuda import driver
        driver.current_device()
        return True
    except Exception:
        return False


def run(quick: bool = False, output: str | None = None) -> int:
    """Run the suite that fits this machine; print its table, write it to `output` if given."""
    if os.environ.get("ZYMO_BENCH_CPU") != "1" and gpu_present():
        if importlib.util.find_spec("cupy") is None:
            print("the GPU suite needs CuPy (for its CUDA C baseline); running the CPU suite",
                  file=sys.stderr)
        else:
            from . import gpu_kernels
            return gpu_kernels.run_suite(quick, output)
    from . import cpu
    return cpu.run_suite(quick, output)
