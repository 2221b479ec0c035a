"""Kernel time on one GPU (zymo vs CUDA C through NVRTC vs numba-cuda): the suite lives in
zymo/bench/gpu_kernels.py, so that `zymo bench` has it when installed; this script runs it.

    python bench/gpu_kernels.py [--quick] [--output bench/results/gpu-kernels-<gpu>.md]
"""
import runpy

if __name__ == "__main__":
    runpy.run_module("zymo.bench.gpu_kernels", run_name="__main__", alter_sys=True)
