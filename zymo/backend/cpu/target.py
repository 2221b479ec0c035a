"""The host as a target: CUDA semantics on the CPU.

Thread geometry comes from the thread loops (or, in device functions, hidden parameters);
a barrier is where a thread loop ends; warp ops read the other lanes' slots; shared arrays
are stack memory of the block function; math is LLVM intrinsics or the process's libm.
"""
from __future__ import annotations

from typing import Any

from llvmlite import ir as ll

from ...diagnostics import CompileError, Diagnostic
from ...ir.operation import Operation
from ..llvm.types import I32, PTR
from ..target import Target
from . import jit, warps
from .kernel import KernelBuilder, build_entry
from .threads import ThreadContext

GEOMETRY = tuple(f"{register}.{axis}" for register in ("tid", "ctaid", "ntid", "nctaid")
                 for axis in ("x", "y", "z"))


class CPUTarget(Target):
    name = "cpu"

    def __init__(self, boundscheck: bool = False):
        host = jit.host()
        self.triple = host.triple
        self.data_layout = host.data_layout
        self.boundscheck = boundscheck
        self.entry_name = "zymo_entry"   # unique per compilation: modules share one engine

    def implicit_params(self) -> tuple[tuple[str, ll.Type], ...]:
        """Device functions see the calling thread's geometry and the error buffer."""
        return tuple((name, I32) for name in GEOMETRY + ("laneid",)) + (("errbuf", PTR),)

    def special_register(self, ctx: Any, register: str, axis: str) -> ll.Value:
        return ctx.implicit["laneid" if register == "laneid" else f"{register}.{axis}"]

    def barrier(self, ctx: Any) -> None:
        """Nothing to emit: the thread loop before the barrier ends where it stands."""

    def warp_shuffle(self, ctx: Any, op: Operation, mode: str, mask: ll.Value,
                     value: ll.Value, lane: ll.Value) -> ll.Value:
        return warps.shuffle(_thread_context(ctx, op), op, mode, value, lane)

    def warp_vote(self, ctx: Any, op: Operation, mode: str, mask: ll.Value,
                  predicate: ll.Value) -> ll.Value:
        return warps.vote(_thread_context(ctx, op), op, mode, mask)

    def active_mask(self, ctx: Any, op: Operation) -> ll.Value:
        return warps.active_mask(_thread_context(ctx, op))

    def lower_kernel(self, lowering: Any, func: Operation) -> ll.Function:
        """A block function running every thread of a block, and the entry point."""
        block_function = KernelBuilder(lowering, func).build()
        return build_entry(lowering, func, block_function, self.boundscheck, self.entry_name)

    def optimize(self, module: Any) -> None:
        jit.optimize(module)


def _thread_context(ctx: Any, op: Operation) -> ThreadContext:
    if not isinstance(ctx, ThreadContext):
        raise CompileError(Diagnostic(op.loc, f"`{op.name}` in a device function that is not "
                                      "inlined cannot run on the CPU",
                                      "let zymo inline the device function (the default)"))
    return ctx
