"""The CPU backend: CUDA kernels as host code (thread loops, barrier splitting, a thread pool).

    kernel = zymo.backend.cpu.compile(module, boundscheck=False)
    kernel.launch(grid, block, args)      # NumPy arrays are updated in place
"""
from __future__ import annotations

from ...diagnostics import CompileError, Diagnostic
from ...ir.module import Module
from ...ir.operation import Operation
from ...ir.traits import Allocates, Pure, ThreadVarying
from .launch import CPUKernel
from .phases import is_split_point

__all__ = ["CPUKernel", "compile"]


def compile(module: Module, boundscheck: bool = False) -> CPUKernel:
    """Compile `module` (its kernel and the device functions it calls) for the host."""
    problems = [Diagnostic(op.loc, f"`{op.name}` in device function `{name}`, which was not "
                           f"inlined: {why}", "leave device functions to be inlined")
                for name, func in module.functions.items() if func.attrs.get("kind") != "kernel"
                for op in func.walk() for why in _needs_the_kernel(op)]
    if problems:
        raise CompileError(problems)
    return CPUKernel(module, boundscheck)


def _needs_the_kernel(op: Operation) -> list[str]:
    """Why `op` cannot run in a called function on the CPU (nothing when it can)."""
    if is_split_point(op):
        return ["the CPU backend splits kernels at barriers and warp ops, not calls"]
    if op.has_trait(Allocates) and not op.has_trait(Pure) and not op.has_trait(ThreadVarying):
        return ["memory shared by a block is allocated by the kernel on the CPU"]
    return []
