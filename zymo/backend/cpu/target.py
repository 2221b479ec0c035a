"""The host as a target: CUDA semantics on the CPU.

Thread geometry comes from the thread loops (or, in device functions, hidden parameters);
a barrier is where a thread loop ends; warp ops read the other lanes' slots; shared arrays
are stack memory of the block function; math is LLVM intrinsics or the process's libm.
"""
from __future__ import annotations

from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir as ll

from ...diagnostics import CompileError, Diagnostic
from ...ir.operation import Operation
from ..llvm.types import I32, PTR
from .. import host_c
from ..target import Target
from . import blockmode, jit, warps
from .blockmode import BlockContext
from .kernel import KernelBuilder, build_entry
from .threads import ThreadContext

EXCHANGED = {"x": "y", "y": "x"}
GEOMETRY = tuple(f"{register}.{axis}" for register in ("tid", "ctaid", "ntid", "nctaid")
                 for axis in ("x", "y", "z"))


class CPUTarget(Target):
    name = "cpu"
    # a block's threads run one after another: a thread spinning for another may wait forever
    # (other blocks run on other cores, so waits for them get this long to end)
    spin_limit = 1 << 28

    def __init__(self, boundscheck: bool = False):
        host = jit.host()
        self.triple = host.triple
        self.data_layout = host.data_layout
        self.boundscheck = boundscheck
        self.entry_name = "zymo_entry"   # unique per compilation: modules share one engine
        self.by_rows = False             # how the entry point counts (set by lower_kernel)
        self.exchange_xy = False         # the launch's x and y trade places (idem)
        self.foreign_sources: tuple = ()  # CUDA C the module calls (ops/foreign.py)

    def foreign_symbol(self, ctx: Any, callee: Any) -> str:
        """The callee compiled for the host with the module's other sources; named after its
        library, since the JIT's symbols are shared by every module."""
        library = host_c.library(self.foreign_sources, ctx.op.loc if ctx.op else None)
        name = f"zymo_foreign_{library.digest}_{callee.symbol}"
        llvm.add_symbol(name, library.address(callee.symbol, ctx.op.loc if ctx.op else None))
        return name

    def implicit_params(self) -> tuple[tuple[str, ll.Type], ...]:
        """Device functions see the calling thread's geometry and the error buffer."""
        return tuple((name, I32) for name in GEOMETRY + ("laneid",)) + (("errbuf", PTR),)

    def float_truncate(self, ctx: Any, x: ll.Value, to: ll.Type) -> ll.Value:
        """double -> half without LLVM's libcall (__truncdfhf2, which the JIT does not find:
        a call through address 0): round to float by rounding to odd (truncate, then set the
        last bit where bits were lost), then to half, which then rounds once, correctly, since
        float's 24 bits are at least twice half's 11 plus two."""
        if not (isinstance(x.type, ll.DoubleType) and isinstance(to, ll.HalfType)):
            return super().float_truncate(ctx, x, to)
        b, f32, i32 = ctx.builder, ll.FloatType(), ll.IntType(32)
        near = b.fptrunc(x, f32)
        back = b.fpext(near, x.type)
        magnitudes = [ctx.call_intrinsic("llvm.fabs", v.type, [v]) for v in (back, x)]
        bits = b.bitcast(near, i32)
        toward_zero = b.select(b.fcmp_ordered(">", *magnitudes),
                               b.sub(bits, ll.Constant(i32, 1)), bits)
        odd = b.select(b.fcmp_ordered("!=", back, x),
                       b.or_(toward_zero, ll.Constant(i32, 1)), bits)
        return b.fptrunc(b.bitcast(odd, f32), to)

    def dynamic_shared(self, ctx: Any, array) -> tuple[ll.Value, ll.Value]:
        b = ctx.builder
        size = b.zext(ctx.implicit["dynsmem"], ll.IntType(64))
        count = b.udiv(size, ll.Constant(ll.IntType(64), array.dtype.dtype.itemsize))
        return ctx.kernel.dynamic_shared_memory(), count

    def special_register(self, ctx: Any, register: str, axis: str) -> ll.Value:
        if register == "laneid":
            return ctx.implicit["laneid"]
        if self.exchange_xy:   # the kernel's y runs as the loops' x (see layout.py)
            axis = EXCHANGED.get(axis, axis)
        return ctx.implicit[f"{register}.{axis}"]

    def barrier(self, ctx: Any) -> None:
        """Nothing to emit: the thread loop before the barrier ends where it stands."""

    def barrier_vote(self, ctx: Any, op: Operation, mode: str, predicate: Any) -> ll.Value:
        """Once per block (the op runs in block mode, between the thread loops its barrier
        ends): the predicate's slot read for every thread that reaches it."""
        if not isinstance(ctx, BlockContext):
            raise CompileError(Diagnostic(op.loc, f"`{op.name}` in a device function that is "
                                          "not inlined cannot run on the CPU",
                                          "let zymo inline the device function (the default)"))
        return blockmode.vote(ctx, mode, predicate)

    def warp_shuffle(self, ctx: Any, op: Operation, mode: str, mask: ll.Value,
                     value: ll.Value, lane: ll.Value) -> ll.Value:
        return warps.shuffle(_thread_context(ctx, op), op, mode, value, lane)

    def warp_vote(self, ctx: Any, op: Operation, mode: str, mask: ll.Value,
                  predicate: ll.Value) -> ll.Value:
        return warps.vote(_thread_context(ctx, op), op, mode, mask)

    def active_mask(self, ctx: Any, op: Operation) -> ll.Value:
        return warps.active_mask(_thread_context(ctx, op))

    def warp_sync(self, ctx: Any, op: Operation, mask: ll.Value) -> None:
        """Nothing to emit: as a warp op it ends a thread loop, so every lane's writes before
        it are done before any lane goes on."""
        _thread_context(ctx, op)

    def warp_match(self, ctx: Any, op: Operation, mode: str, mask: ll.Value,
                   value: ll.Value) -> ll.Value | list[ll.Value]:
        return warps.match(_thread_context(ctx, op), op, mode, mask, value)

    def lower_kernel(self, lowering: Any, func: Operation) -> ll.Function:
        """A block function running every thread of a block, and the entry point."""
        builder = KernelBuilder(lowering, func)
        self.by_rows, self.exchange_xy = builder.by_rows, builder.exchange_xy
        return build_entry(lowering, func, builder.build(), self.boundscheck, self.entry_name,
                           builder.by_rows)

    def optimize(self, module: Any) -> None:
        jit.optimize(module)


def _thread_context(ctx: Any, op: Operation) -> ThreadContext:
    if not isinstance(ctx, ThreadContext):
        raise CompileError(Diagnostic(op.loc, f"`{op.name}` in a device function that is not "
                                      "inlined cannot run on the CPU",
                                      "let zymo inline the device function (the default)"))
    return ctx
