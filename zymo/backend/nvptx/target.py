"""NVIDIA GPUs as a target: the hooks of `backend/target.py` that differ for NVPTX.

Arrays live in PTX state spaces (global 1, shared 3, const 4, local 5); thread geometry is
the special registers; barriers, shuffles and votes are NVVM intrinsics; atomics are LLVM's
with CUDA's device scope; math is libdevice (`__nv_sinf`), linked in `optimize`. The kernel
is one function per thread with the `ptx_kernel` calling convention.
"""
from __future__ import annotations


from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir as ll
from llvmlite.ir.instructions import CallInstr, FastMathFlags

from ...ir.operation import Operation
from ...ir.types import Array, Scalar
from ...switches import switch
from ..llvm.control import loop_hint
from ..llvm.types import I8, I32, VOID
from ..target import ATOMIC_OPS, FLOAT_EXTREMA, Target, generic, printf_arg
from . import abi, intrinsics, libdevice, machine

SPACES = {"global": 1, "shared": 3, "const": 4, "local": 5}
FENCE_SCOPES = {"block": "block", "device": "device", "system": None}   # LLVM syncscopes
SHARED_ALIGN = 16                          # lets LLVM use ld.shared.v4
DYNAMIC_SHARED = "zymo_dynamic_shared"     # every zm.shared.array(0, dtype) starts here
LOCAL_ALIGN = 16                           # as the default hook's stack slots

# Math with an LLVM intrinsic NVPTX lowers to one instruction (sqrt.rn, abs, cvt.rmi, ...);
# the rest are libdevice calls. With fastmath, f32 functions that have a fast (approximate)
# libdevice variant use it, as nvcc -use_fast_math does.
INTRINSIC_MATH = frozenset({"sqrt", "fabs", "floor", "ceil", "trunc", "copysign"})
FAST_F32 = frozenset({"sin", "cos", "tan", "exp", "exp10", "log", "log2", "log10", "pow"})

# Fast-math flags on float instructions: FMA contraction always (as nvcc and NVVM do by
# default); fastmath adds approximate functions and reciprocals (div.approx, sqrt.approx),
# reassociation and ignoring the sign of zero. NaNs and infinities keep their meaning.
CONTRACT = ("contract",)
FAST = ("contract", "afn", "arcp", "reassoc", "nsz")
FLOAT_OPCODES = frozenset({"fadd", "fsub", "fmul", "fdiv", "frem", "fneg"})
FLUSH_DENORMALS = '"denormal-fp-math-f32"="preserve-sign,preserve-sign"'


# Range loops with a constant trip count up to this are unrolled fully, as nvcc does: on a GPU
# the independent iterations are what hides latency (LLVM's default cost model stops earlier).
# Unless the copies would hold more than FULL_UNROLL_OPS IR ops (inner loops unrolled too):
# a 30 x 30 nest unrolled whole is 900 bodies, and PTX that nvJitLink takes minutes over.
FULL_UNROLL_TRIPS = 32
FULL_UNROLL_OPS = 4096
# A derivative's reverse-sweep loops get less: each iteration recomputes the forward body and
# runs its adjoint, in the kernel that holds the forward sweep's copies too. RSBench's reverse
# Faddeeva series (10 x 147 ops) unrolled made an 8,300-instruction kernel that stalled on
# instruction fetch (29 % of samples) and spilled 996 B at 128 registers; its forward copies
# (10 x 57) stay unrolled.
REVERSE_UNROLL_OPS = 1024
# The primal loops the reverse sweep runs again to recompute values (sweep="recompute") get
# less still: RSBench's Faddeeva series (10 x 57 ops) is recomputed twice inside its reverse
# pole loop; kept as loops there, its gradient ran in 2132 ms instead of 2479 ms (H100, 128
# registers), the other Enzyme-suite gradients unchanged (their recomputed loops are
# smaller). The whole reverse sweep at 512 would slow DG's by 6 %.
RECOMPUTE_UNROLL_OPS = 512


def warp_sum_switches() -> dict[str, bool]:
    """The environment switches of warp-aggregated atomics (`atomic.accumulate`), each default
    on ("0" turns it off, to measure it); those off are part of the PTX cache's key
    (`runtime/cuda/cache.py`).
    - ZYMO_PARTIAL_WARP_SUMS: also sum in a warp not all of whose lanes are active (the only
      warp of a 5 x 5 block, lanes masked by a branch), instead of one atomic per lane.
    - ZYMO_SEGMENTED_WARP_SUMS: sum each run of lanes that add to one address (a 16 x 16
      block's warp covers two rows, so two addresses), one atomic per run, instead of summing
      only where every lane's address is the same."""
    return {"partial": switch("ZYMO_PARTIAL_WARP_SUMS", True),
            "segmented": switch("ZYMO_SEGMENTED_WARP_SUMS", True)}


class NVPTXTarget(Target):
    name = "nvptx"
    triple = machine.TRIPLE

    def __init__(self, arch: str = machine.DEFAULT_ARCH, fastmath: bool = False,
                 boundscheck: bool = False, ptx_version: int | None = None,
                 max_ptx_version: int | None = None, contract: bool = True):
        self.arch = machine.check_arch(arch)
        version = machine.ptx_version_for(arch, ptx_version, max_ptx_version)
        self.machine = machine.target_machine(arch, version)
        self.data_layout = machine.data_layout()
        self.fastmath = fastmath
        self.boundscheck = boundscheck
        self.float_flags = FAST if fastmath else CONTRACT if contract else ()
        self.uses_libdevice = False        # set by optimize
        self.warp_sums = warp_sum_switches()

    # ---- memory -------------------------------------------------------------------------
    def address_space(self, space: str) -> int:
        return SPACES[space]

    def cached_load(self, ctx: Any, array: Array, ptr: ll.Value, hint: str) -> ll.Value:
        """`ld.global.<hint>.b<bits>` as inline PTX (LLVM has no cache-operator loads)."""
        return intrinsics.cached_load(ctx, ctx.memory_type(array.dtype), ptr, hint)

    def cached_store(self, ctx: Any, array: Array, ptr: ll.Value, value: ll.Value,
                     hint: str) -> None:
        intrinsics.cached_store(ctx, ptr, ctx.to_memory(array.dtype, value), hint)

    def passes_strides(self, array: Array) -> bool:
        """Always: the runtime packs every array alike (see abi.KERNEL_ABI_DOC)."""
        return True

    def shared_array(self, ctx: Any, array: Array) -> ll.Value:
        """A module-level `.shared` array per `memory.shared` op; size 0 is the dynamic
        shared memory of the launch."""
        module: ll.Module = ctx.lowering.llvm
        hint = ctx.op.result.name_hint if ctx.op is not None else ""
        name = module.get_unique_name(f"zymo_shared_{hint}" if hint else "zymo_shared")
        glob = ll.GlobalVariable(module, ll.ArrayType(ctx.memory_type(array.dtype),
                                                      _count(array)), name, addrspace=3)
        glob.linkage = "internal"
        glob.initializer = ll.Constant(glob.value_type, ll.Undefined)
        glob.align = SHARED_ALIGN
        return glob

    def dynamic_shared(self, ctx: Any, array: Array) -> tuple[ll.Value, ll.Value]:
        """The `extern .shared` array the launch sizes, and %dynamic_smem_size over the
        element size."""
        module: ll.Module = ctx.lowering.llvm
        glob = module.globals.get(DYNAMIC_SHARED)
        if glob is None:
            glob = ll.GlobalVariable(module, ll.ArrayType(I8, 0), DYNAMIC_SHARED, addrspace=3)
            glob.align = SHARED_ALIGN
        b = ctx.builder
        size = b.asm(ll.FunctionType(ll.IntType(32), []), "mov.u32 $0, %dynamic_smem_size;",
                     "=r", [], False)
        count = b.udiv(b.zext(size, ll.IntType(64)),
                       ll.Constant(ll.IntType(64), array.dtype.dtype.itemsize))
        return glob, count

    def local_array(self, ctx: Any, array: Array) -> ll.Value:
        """A stack slot, addressed in the local space (`ld.local`, not generic loads)."""
        if ctx.builder.block is ctx.function.entry_basic_block:
            # Already where static allocas go. `entry_alloca` would insert at the start of
            # the block this builder is in, which shifts this builder's insertion point.
            slot = ctx.builder.alloca(ctx.memory_type(array.dtype), _count(array))
            slot.align = LOCAL_ALIGN
        else:
            slot = super().local_array(ctx, array)
        return ctx.builder.addrspacecast(slot, ll.PointerType(addrspace=SPACES["local"]))

    # ---- thread geometry and synchronization --------------------------------------------
    def implicit_params(self) -> tuple[tuple[str, ll.Type], ...]:
        """With bounds checking, the error buffer (a global pointer, the last parameter)."""
        return (("errbuf", ll.PointerType(addrspace=SPACES["global"])),) \
            if self.boundscheck else ()

    def special_register(self, ctx: Any, register: str, axis: str) -> ll.Value:
        name = register if register == "laneid" else f"{register}.{axis}"
        return intrinsics.call(ctx, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])

    def barrier(self, ctx: Any) -> None:
        """`bar.sync 0` (LLVM 22 spells `llvm.nvvm.barrier0` this way)."""
        intrinsics.call(ctx, "llvm.nvvm.barrier.cta.sync.aligned.all", VOID,
                        [ll.Constant(I32, 0)])

    def barrier_vote(self, ctx: Any, op: Operation, mode: str, predicate: ll.Value) -> ll.Value:
        """`bar.red.popc.u32` / `bar.red.and.pred` / `bar.red.or.pred` on barrier 0."""
        return intrinsics.barrier_vote(ctx, mode, predicate)

    def print(self, ctx: Any, format: str, values: list) -> None:
        """CUDA's device printf: vprintf(format, a buffer of the arguments, each widened as
        C's varargs are and aligned to 8 bytes)."""
        intrinsics.vprintf(ctx, generic(ctx.builder, ctx.lowering.string_constant(format)),
                           [printf_arg(ctx, v, t) for v, t in values])

    def grid_barrier(self, ctx: Any) -> None:
        """numba's kernels call grid.sync() where some threads have exited (CUDA counts only
        live threads at `barrier.sync`): the block's barriers are the non-aligned form."""
        intrinsics.grid_barrier(ctx, lambda ctx: intrinsics.call(
            ctx, "llvm.nvvm.barrier.cta.sync.all", VOID, [ll.Constant(I32, 0)]))

    def fence(self, ctx: Any, scope: str) -> None:
        """`fence.sc.cta` / `.gpu` / `.sys` (CUDA's __threadfence_block, __threadfence,
        __threadfence_system) through LLVM's scoped fences."""
        ctx.builder.fence("seq_cst", FENCE_SCOPES[scope])

    # ---- atomics ------------------------------------------------------------------------
    def atomic_rmw(self, ctx: Any, kind: str, ptr: ll.Value, value: ll.Value,
                   scalar: Scalar) -> ll.Value:
        """Native `atom` where PTX has it; float min/max as a CAS loop; float sub as add."""
        if scalar.is_float and kind in FLOAT_EXTREMA:
            which, keep_nan = FLOAT_EXTREMA[kind]
            return intrinsics.float_extremum(ctx, which, ptr, value, keep_nan)
        if scalar.is_float and kind == "sub":
            kind, value = "add", ctx.builder.fneg(value)
        operation = ATOMIC_OPS[(kind, "f" if scalar.is_float else scalar.kind)]
        return ctx.builder.atomic_rmw(operation, ptr, value, intrinsics.DEVICE_RELAXED)

    def accumulate(self, ctx: Any, ptr: ll.Value, value: ll.Value, scalar: Scalar) -> None:
        """Warp-aggregated: one atomic per warp where all lanes add to one address."""
        if scalar.bits == 16:
            return super().accumulate(ctx, ptr, value, scalar)
        intrinsics.warp_aggregated_add(ctx, ptr, value,
                                       self.special_register(ctx, "laneid", "x"),
                                       **self.warp_sums)

    def accumulate_in_tile(self, ctx: Any, ptr: ll.Value, value: ll.Value, scalar: Scalar,
                           element: Any, **tile: Any) -> None:
        """Where the whole warp runs the loop: the lane sums deferred to the chunk's last
        iteration (`intrinsics.tile_add`); else the warp-aggregated atomic."""
        whole = tile["whole"]
        if scalar.bits == 16 or tile["index"] is None:
            return self.accumulate(ctx, ptr, value, scalar)
        with ctx.builder.if_else(whole) as (then, otherwise):
            with then:
                intrinsics.tile_add(ctx, value, element, self.special_register(
                    ctx, "laneid", "x"), tile["index"], tile["warp"], tile["slot"],
                                    tile["flush"])
            with otherwise:
                self.accumulate(ctx, ptr, value, scalar)

    def warp_converged(self, ctx: Any) -> ll.Value:
        return ctx.builder.icmp_unsigned("==", intrinsics.call(
            ctx, "llvm.nvvm.activemask", I32, []), ll.Constant(I32, intrinsics.FULL_MASK))

    def owned_add(self, ctx: Any, array: Any, ptr: ll.Value, value: ll.Value,
                  chained: bool) -> None:
        """In a loop of updates, a relaxed atomic add (`red`: nothing waits for it) instead of
        a load-add-store chain; the element is the thread's own, so either is exact."""
        scalar = array.dtype
        if chained and array.space == "global" and scalar.bits >= 32:
            self.atomic_rmw(ctx, "add", ptr, value, scalar)
        else:
            super().owned_add(ctx, array, ptr, value, chained)

    def atomic_cas(self, ctx: Any, ptr: ll.Value, expected: ll.Value,
                   new: ll.Value) -> ll.Value:
        pair = ctx.builder.cmpxchg(ptr, expected, new, intrinsics.DEVICE_RELAXED, "monotonic")
        return ctx.builder.extract_value(pair, 0)

    # ---- warps --------------------------------------------------------------------------
    def warp_shuffle(self, ctx: Any, op: Operation, mode: str, mask: ll.Value,
                     value: ll.Value, lane: ll.Value) -> ll.Value:
        return intrinsics.shuffle(ctx, mode, mask, value, lane)

    def warp_vote(self, ctx: Any, op: Operation, mode: str, mask: ll.Value,
                  predicate: ll.Value) -> ll.Value:
        return intrinsics.vote(ctx, mode, mask, predicate)

    def active_mask(self, ctx: Any, op: Operation) -> ll.Value:
        return intrinsics.call(ctx, "llvm.nvvm.activemask", I32, [])

    def warp_sync(self, ctx: Any, op: Operation, mask: ll.Value) -> None:
        intrinsics.call(ctx, "llvm.nvvm.bar.warp.sync", VOID, [mask])

    def warp_match(self, ctx: Any, op: Operation, mode: str, mask: ll.Value,
                   value: ll.Value) -> ll.Value | list[ll.Value]:
        return intrinsics.match(ctx, mode, mask, value)

    # ---- math ---------------------------------------------------------------------------
    def math_function(self, ctx: Any, name: str, scalar: Scalar,
                      args: list[ll.Value]) -> ll.Value:
        """libdevice's `__nv_<name>[f]`, an LLVM intrinsic for the one-instruction functions;
        f16 computes in f32 (the default's widening), except fma, one f16 instruction."""
        if scalar.bits == 16 and name == "fma":
            return ctx.call_intrinsic("llvm.fma", args[0].type, args)
        if scalar.bits == 16 or name in INTRINSIC_MATH:
            return super().math_function(ctx, name, scalar, args)
        single = scalar.bits == 32
        if single and self.fastmath and name == "tanh" and machine.sm_number(self.arch) >= 75:
            # one instruction since sm_75, as nvcc -use_fast_math (libdevice has no fast tanh)
            return ctx.builder.asm(ll.FunctionType(args[0].type, [args[0].type]),
                                   "tanh.approx.f32 $0, $1;", "=f,f", args, False)
        fast = "fast_" if single and self.fastmath and name in FAST_F32 else ""
        symbol = f"__nv_{fast}{name}" + ("f" if single else "")
        return ctx.call_external(symbol, args[0].type, args)

    # ---- kernels and modules ------------------------------------------------------------
    def lower_kernel(self, lowering: Any, func: Operation) -> ll.Function:
        """The kernel as a `ptx_kernel` function; arrays it only reads are `readonly` (with
        `noalias`, their loads become `ld.global.nc`); functions running barriers or warp
        ops are `convergent`."""
        fn = lowering.lower_function(func)
        fn.calling_convention = "ptx_kernel"
        read_only = abi.read_only_arrays(func)
        position = 0
        for index, t in enumerate(func.attrs["function_type"].inputs):
            if isinstance(t, Array):
                pointer = fn.args[position]
                pointer.attributes.align = t.element_align
                if index in read_only:
                    _add_unlisted(pointer.attributes, "readonly")
            position += len(lowering.param_types(t))
        kernel_name = func.attrs["sym_name"]
        for name in abi.convergent_functions(lowering.module):
            (fn if name == kernel_name else lowering.functions[name]).attributes.add(
                "convergent")
        return fn

    def unrolls_fully(self, trips: int | None, body_ops: int, sweep: str = "") -> bool:
        budget = {"reverse": REVERSE_UNROLL_OPS,
                  "recompute": RECOMPUTE_UNROLL_OPS}.get(sweep, FULL_UNROLL_OPS)
        return trips is not None and 1 < trips <= FULL_UNROLL_TRIPS \
            and trips * body_ops <= budget

    def range_loop_hint(self, module: ll.Module, trips: int | None, body_ops: int,
                        sweep: str = "") -> Any:
        if self.unrolls_fully(trips, body_ops, sweep):
            return loop_hint(module, "llvm.loop.unroll.full")
        return None

    def finish_module(self, module: ll.Module) -> None:
        """libdevice's flush-to-zero switch (`nvvm-reflect-ftz`, on with fastmath), the
        matching denormal mode, and fast-math flags on float instructions."""
        flag = module.add_metadata([ll.Constant(I32, 4), "nvvm-reflect-ftz",
                                    ll.Constant(I32, int(self.fastmath))])
        module.add_named_metadata("llvm.module.flags", flag)
        for fn in module.functions:
            if fn.blocks and self.fastmath:
                _add_unlisted(fn.attributes, FLUSH_DENORMALS)
            for block in fn.blocks:
                for instruction in block.instructions:
                    self._set_float_flags(instruction)

    def _set_float_flags(self, instruction: Any) -> None:
        if instruction.opname in FLOAT_OPCODES:
            instruction.flags = list(self.float_flags)
        elif isinstance(instruction, CallInstr) and _is_float(instruction.type):
            instruction.fastmath = FastMathFlags(self.float_flags)

    def optimize(self, module: Any) -> None:
        """Link the libdevice functions the module calls, then O3 for the arch."""
        assert isinstance(module, llvm.ModuleRef)
        self.uses_libdevice = libdevice.link(module, self.machine)
        machine.optimize(module, self.machine)


def _add_unlisted(attributes: set[str], text: str) -> None:
    """Add an attribute that llvmlite's allowlist lacks (`readonly` on a parameter, string
    attributes); llvmlite prints it verbatim."""
    set.add(attributes, text)


def _is_float(t: ll.Type) -> bool:
    return isinstance(t, (ll.HalfType, ll.FloatType, ll.DoubleType))


def _count(array: Array) -> int:
    count = 1
    for extent in array.shape or ():
        count *= extent
    return count
