"""Targets: the hooks through which one kind of device differs from another in the lowering.

The shared lowering (`backend/llvm`) is target-neutral. Only special registers, address
spaces, cache-hinted accesses, barriers, atomics, warp ops, math functions, the mapping of a
kernel's threads onto LLVM functions, and module finishing/optimization go through a `Target`.
Every hook has a one-line documented default; `backend/cpu/target.py` (and the NVPTX target)
override what differs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir as ll

from ..ir.types import Scalar, f32

if TYPE_CHECKING:
    from ..ir.operation import Operation
    from ..ir.types import Array, Scalar


# Math functions with an LLVM intrinsic that every target can lower (the others are calls).
# CUDA's limit on the threads of one block; every backend holds launches to it, so that a
# launch that runs on the CPU or the interpreter also runs on the GPU
MAX_BLOCK_THREADS = 1024

LLVM_MATH = frozenset({
    "sqrt", "exp", "exp2", "log", "log2", "log10", "sin", "cos", "pow", "fabs", "floor",
    "ceil", "trunc", "copysign", "rint",
})

# LLVM atomicrmw operation per (atomic kind, scalar kind "f" / "i" / "u").
ATOMIC_OPS = {
    ("add", "i"): "add", ("add", "u"): "add", ("add", "f"): "fadd",
    ("sub", "i"): "sub", ("sub", "u"): "sub", ("sub", "f"): "fsub",
    ("max", "i"): "max", ("max", "u"): "umax", ("max", "f"): "fmax",
    ("min", "i"): "min", ("min", "u"): "umin", ("min", "f"): "fmin",
    ("exch", "i"): "xchg", ("exch", "u"): "xchg", ("exch", "f"): "xchg",
    ("nanmax", "i"): "max", ("nanmax", "u"): "umax", ("nanmax", "f"): "fmax",
    ("nanmin", "i"): "min", ("nanmin", "u"): "umin", ("nanmin", "f"): "fmin",
    ("and", "i"): "and", ("and", "u"): "and",
    ("or", "i"): "or", ("or", "u"): "or",
    ("xor", "i"): "xor", ("xor", "u"): "xor",
    # CUDA's atomicInc / atomicDec: wrap to 0 past the operand, to it below 0
    ("inc", "u"): "uinc_wrap", ("dec", "u"): "udec_wrap",
}

# Float atomic min/max kinds that LLVM's fmin/fmax (NaN ignored on both sides) do not match,
# or that a target lacks: (llvm.minnum or maxnum, whether a NaN in memory stays).
FLOAT_EXTREMA = {"max": ("max", True), "min": ("min", True),
                 "nanmax": ("max", False), "nanmin": ("min", False)}


class Target:
    """Hooks with defaults; a subclass overrides only what its device does differently."""

    name = "generic"
    triple = ""          # LLVM target triple ("" leaves it to LLVM)
    data_layout = ""     # LLVM data layout string ("" leaves it to LLVM)

    # ---- memory -------------------------------------------------------------------------
    def address_space(self, space: str) -> int:
        """The LLVM address space holding arrays of `space` (global, shared, local, const)."""
        return 0

    def shared_array(self, ctx: Any, array: Array) -> ll.Value:
        """A pointer to one block's copy of a shared array (default: a stack slot)."""
        return ctx.entry_alloca(ctx.memory_type(array.dtype), _count(array), align=64)

    def float_truncate(self, ctx: Any, x: ll.Value, to: ll.Type) -> ll.Value:
        """`x` rounded to the narrower float type `to` (to nearest, ties to even)."""
        return ctx.builder.fptrunc(x, to)

    def dynamic_shared(self, ctx: Any, array: Array) -> tuple[ll.Value, ll.Value]:
        """The block's dynamic shared memory (every `shared.array(0, dtype)` starts there) as
        a pointer and the number of `array.dtype` elements it holds (i64)."""
        raise NotImplementedError(f"{self.name}: dynamic shared memory")

    def local_array(self, ctx: Any, array: Array) -> ll.Value:
        """A pointer to the current thread's copy of a local array (default: a stack slot)."""
        return ctx.entry_alloca(ctx.memory_type(array.dtype), _count(array), align=16)

    def cached_load(self, ctx: Any, array: Array, ptr: ll.Value, hint: str) -> ll.Value:
        """A load of global memory with a cache hint (`memory.cached_load`: ca, cg, cs, lu,
        cv); the hint places the element in a cache, so a target without one loads plainly."""
        return ctx.load(array, ptr)

    def cached_store(self, ctx: Any, array: Array, ptr: ll.Value, value: ll.Value,
                     hint: str) -> None:
        """A store to global memory with a cache hint (cg, cs, wb, wt; default: a plain
        store)."""
        ctx.store(array, ptr, value)

    def passes_strides(self, array: Array) -> bool:
        """Whether a kernel parameter of type `array` carries its strides (default: all but
        C-layout arrays, whose strides follow from the shape)."""
        return array.layout != "C"

    # ---- thread geometry and synchronization --------------------------------------------
    def implicit_params(self) -> tuple[tuple[str, ll.Type], ...]:
        """Hidden (name, type) parameters every device function takes after its own."""
        return ()

    def special_register(self, ctx: Any, register: str, axis: str) -> ll.Value:
        """An i32 special register: tid, ctaid, ntid, nctaid (axis x/y/z) or laneid."""
        raise NotImplementedError(f"{self.name}: special register {register}")

    def barrier(self, ctx: Any) -> None:
        """Block-wide barrier (syncthreads)."""
        raise NotImplementedError(f"{self.name}: barrier")

    def barrier_vote(self, ctx: Any, op: Operation, mode: str, predicate: Any) -> ll.Value:
        """A block-wide barrier handing back an i32 reduction of `predicate` over the block's
        threads: `popc` counts them, `and` / `or` give 1 or 0."""
        raise NotImplementedError(f"{self.name}: barrier with a vote")

    def print(self, ctx: Any, format: str, values: list) -> None:
        """`print` in a kernel: C's printf with `format`, integers widened to 64 bits and
        floats to double (`values`: (LLVM value, zymo type) pairs); then fflush, so that the
        line comes out before Python's next one."""
        b = ctx.builder
        module = ctx.lowering.llvm
        args = [generic(b, ctx.lowering.string_constant(format))] + \
            [printf_arg(ctx, v, t) for v, t in values]
        printf = module.globals.get("printf") or ll.Function(
            module, ll.FunctionType(ll.IntType(32), [ll.PointerType()], var_arg=True), "printf")
        b.call(printf, args)
        flush = module.globals.get("fflush") or ll.Function(
            module, ll.FunctionType(ll.IntType(32), [ll.PointerType()]), "fflush")
        b.call(flush, [ll.Constant(ll.PointerType(), None)])

    def foreign_symbol(self, ctx: Any, callee: Any) -> str:
        """The symbol a call of foreign device function `callee` names; default: its own
        (the link resolves it)."""
        return callee.symbol

    def grid_barrier(self, ctx: Any) -> None:
        """A barrier of every thread of a cooperative launch (`cg.this_grid().sync()`)."""
        raise NotImplementedError(f"{self.name}: grid barrier")

    def fence(self, ctx: Any, scope: str) -> None:
        """A memory fence for `scope` ("block", "device" or "system"); default: a sequentially
        consistent fence for the whole system, the strongest there is."""
        ctx.builder.fence("seq_cst")

    # ---- atomics ------------------------------------------------------------------------
    def atomic_rmw(self, ctx: Any, kind: str, ptr: ll.Value, value: ll.Value,
                   scalar: Scalar) -> ll.Value:
        """Atomic read-modify-write returning the old value (LLVM atomicrmw, relaxed order);
        float min/max keep a NaN already in memory (numba's), a compare-and-swap loop."""
        if scalar.is_float and kind in ("max", "min"):
            from .llvm.atomics import float_extremum   # backend/llvm imports this module
            which, keep_nan = FLOAT_EXTREMA[kind]
            return float_extremum(ctx, which, ptr, value, "monotonic", keep_nan)
        operation = ATOMIC_OPS[(kind, "f" if scalar.is_float else scalar.kind)]
        return ctx.builder.atomic_rmw(operation, ptr, value, "monotonic")

    def accumulate(self, ctx: Any, ptr: ll.Value, value: ll.Value, scalar: Scalar) -> None:
        """`*ptr += value` atomically, result unused (default: one atomicrmw per thread)."""
        self.atomic_rmw(ctx, "add", ptr, value, scalar)

    def accumulate_in_tile(self, ctx: Any, ptr: ll.Value, value: ll.Value, scalar: Scalar,
                           element: Any, **tile: Any) -> None:
        """`atomic.accumulate_in_tile` (default, no lockstep warps: `accumulate`)."""
        self.accumulate(ctx, ptr, value, scalar)

    def warp_converged(self, ctx: Any) -> ll.Value:
        """`warp.converged` (default: false, no lockstep warps)."""
        return ll.Constant(ll.IntType(1), 0)

    def owned_add(self, ctx: Any, array: Any, ptr: ll.Value, value: ll.Value,
                  chained: bool) -> None:
        """`*ptr += value` where no other thread touches `*ptr` (default: load, add, store)."""
        old = ctx.load(array, ptr)
        add = ctx.builder.fadd if array.dtype.is_float else ctx.builder.add
        ctx.store(array, ptr, add(old, value))

    def atomic_cas(self, ctx: Any, ptr: ll.Value, expected: ll.Value,
                   new: ll.Value) -> ll.Value:
        """Atomic compare-and-swap returning the old value (LLVM cmpxchg, relaxed order)."""
        pair = ctx.builder.cmpxchg(ptr, expected, new, "monotonic", "monotonic")
        return ctx.builder.extract_value(pair, 0)

    # ---- warps --------------------------------------------------------------------------
    def warp_shuffle(self, ctx: Any, op: Operation, mode: str, mask: ll.Value,
                     value: ll.Value, lane: ll.Value) -> ll.Value:
        """Shuffle of `value` in mode idx/down/up/xor; an out-of-warp source gives own value."""
        raise NotImplementedError(f"{self.name}: warp shuffle")

    def warp_vote(self, ctx: Any, op: Operation, mode: str, mask: ll.Value,
                  predicate: ll.Value) -> ll.Value:
        """Vote over the active lanes of the warp: ballot (u32), all or any (bool)."""
        raise NotImplementedError(f"{self.name}: warp vote")

    def active_mask(self, ctx: Any, op: Operation) -> ll.Value:
        """The u32 mask of the active lanes of the calling thread's warp."""
        raise NotImplementedError(f"{self.name}: activemask")

    def warp_sync(self, ctx: Any, op: Operation, mask: ll.Value) -> None:
        """The lanes of `mask` wait for each other and see each other's writes (syncwarp)."""
        raise NotImplementedError(f"{self.name}: syncwarp")

    def warp_match(self, ctx: Any, op: Operation, mode: str, mask: ll.Value,
                   value: ll.Value) -> ll.Value | list[ll.Value]:
        """The lanes of `mask` holding `value`'s bits: `any` gives their u32 mask, `all`
        [mask or 0, whether every lane of `mask` does]."""
        raise NotImplementedError(f"{self.name}: match")

    # ---- math ---------------------------------------------------------------------------
    def math_function(self, ctx: Any, name: str, scalar: Scalar,
                      args: list[ll.Value]) -> ll.Value:
        """C math function `name` (f64 spelling): an LLVM intrinsic where one exists, else a
        libm call (`sinf` for f32); f16 computes in f32."""
        if scalar.bits == 16:
            wide = [ctx.builder.fpext(a, ll.FloatType()) for a in args]
            narrow = self.math_function(ctx, name, f32, wide)
            return ctx.builder.fptrunc(narrow, ll.HalfType())
        llvm_type = args[0].type
        if name in LLVM_MATH:
            return ctx.call_intrinsic(f"llvm.{name}", llvm_type, args)
        symbol = name + ("f" if scalar.bits == 32 else "")
        return ctx.call_external(symbol, llvm_type, args)

    # ---- kernels and modules ------------------------------------------------------------
    def lower_kernel(self, lowering: Any, func: Operation) -> ll.Function:
        """Lower a kernel: by default one LLVM function run by every thread."""
        return lowering.lower_function(func)

    # iterations after which a loop waiting for other threads (While.waits_for_other_threads)
    # is reported and its thread stopped; None: the target runs threads concurrently
    spin_limit: int | None = None

    def unrolls_fully(self, trips: int | None, body_ops: int, sweep: str = "") -> bool:
        """Whether a `range` loop of `trips` iterations (None: not constant) whose body is
        `body_ops` ops (its own inner loops unrolled as this decides) is unrolled fully;
        `sweep` is the loop's (`control.For`): "reverse" or "recompute" in a derivative's
        reverse sweep."""
        return False

    def range_loop_hint(self, module: ll.Module, trips: int | None, body_ops: int,
                        sweep: str = "") -> Any:
        """Loop metadata for a `range` loop's back edge, given its trip count when constant,
        the size of its body and its sweep (default: none; LLVM's own unrolling heuristics
        decide)."""
        return None

    def finish_module(self, module: ll.Module) -> None:
        """Last touches to the llvmlite module before it is printed (metadata, annotations)."""

    def optimize(self, module: Any) -> None:
        """Optimize a parsed `llvm.ModuleRef` in place (default: leave it as lowered)."""


def _count(array: Array) -> int:
    count = 1
    for extent in array.shape or ():
        count *= extent
    return max(count, 1)


def printf_arg(ctx, value, t: Scalar):
    """A value as C's varargs take it: doubles, 64-bit integers, bools as "True"/"False"."""
    b = ctx.builder
    if t.is_bool:
        return b.select(value, generic(b, ctx.lowering.string_constant("True")),
                        generic(b, ctx.lowering.string_constant("False")))
    if t.is_float:
        return value if t.bits == 64 else b.fpext(value, ll.DoubleType())
    if t.bits == 64:
        return value
    return b.zext(value, ll.IntType(64)) if t.is_bool or not t.is_signed else \
        b.sext(value, ll.IntType(64))


def generic(b, pointer):
    """`pointer` as a generic byte pointer (i8* in the generic address space)."""
    byte = ll.IntType(8).as_pointer()
    if pointer.type.addrspace != 0:
        return b.addrspacecast(pointer, byte)
    return b.bitcast(pointer, byte)
