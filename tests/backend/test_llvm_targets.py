"""The shared LLVM lowering is target-neutral: a target that overrides only the hooks of
`backend/target.py` (here a minimal NVPTX one, as `backend/nvptx.py` will) lowers kernels
with shared memory, barriers, atomics, shuffles and math to IR that LLVM turns into PTX."""
from __future__ import annotations

import llvmlite.binding as llvm
import pytest
from llvmlite import ir as ll

from zymo.backend.llvm import lower_module
from zymo.backend.target import Target
from zymo.ir.types import Array, f32, i32, i64, u32
from zymo.ops import arith, atomic, memory, sync, thread, warp
from zymo.ops import math as zmath

from .cpu_ir import KernelIR, i32c

I32 = ll.IntType(32)
SPACES = {"global": 1, "shared": 3, "const": 4, "local": 5}


class ProbeTarget(Target):
    """Just enough of CUDA: special registers, barrier, shuffles, libdevice-style math."""

    name = "nvptx-probe"
    triple = "nvptx64-nvidia-cuda"

    def address_space(self, space):
        return SPACES[space]

    def special_register(self, ctx, register, axis):
        name = f"llvm.nvvm.read.ptx.sreg.{register}" + ("" if register == "laneid" else
                                                        f".{axis}")
        return ctx.builder.call(ctx.lowering.declare(name, I32, []), [])

    def barrier(self, ctx):
        ctx.builder.call(ctx.lowering.declare("llvm.nvvm.barrier0", ll.VoidType(), []), [])

    def shared_array(self, ctx, array):
        element = ctx.memory_type(array.dtype)
        glob = ll.GlobalVariable(ctx.lowering.llvm, ll.ArrayType(element, array.shape[0]),
                                 f"shared{len(ctx.lowering.llvm.globals)}", addrspace=3)
        glob.linkage = "internal"
        glob.initializer = ll.Constant(glob.value_type, ll.Undefined)
        return glob

    def warp_shuffle(self, ctx, op, mode, mask, value, lane):
        name = f"llvm.nvvm.shfl.sync.{mode}.{'f32' if value.type == ll.FloatType() else 'i32'}"
        clamp = ll.Constant(I32, 0 if mode == "up" else 31)
        fn = ctx.lowering.declare(name, value.type, [I32, value.type, I32, I32])
        return ctx.builder.call(fn, [mask, value, lane, clamp])

    def math_function(self, ctx, name, scalar, args):
        symbol = f"__nv_{name}" + ("f" if scalar.bits == 32 else "")
        return ctx.call_external(symbol, args[0].type, args)


def _kernel():
    k = KernelIR("probe", x=Array(f32, 1), out=Array(f32, 1), count=Array(i32, 1))
    shared = k.op(memory.SharedAlloc, shape=(128,), dtype=f32)
    tid, i = k.tid(), k.global_id()
    inside = k.cmp("lt", k.cast(i, i64), k.dim(k["x"]))
    (v,) = k.if_(inside, lambda: [k.op(zmath.Sin, k.load(k["x"], i))],
                 lambda: [k.const(0.0, f32)], [f32])
    v = k.op(arith.Add, v, k.op(warp.ShflDown, k.const(0xFFFFFFFF, u32), v, i32c(k, 1)))
    k.store(shared, tid, v)
    k.create(sync.Barrier)
    (total,) = k.for_(i32c(k, 0), k.special(thread.BlockDim), i32c(k, 1),
                      [k.const(0.0, f32)], lambda j, acc: [k.op(arith.Add, acc,
                                                                k.load(shared, j))])
    k.store(k["out"], i, total)
    k.op(atomic.AtomicAdd, k["count"], i32c(k, 0), i32c(k, 1))
    return k.finish()


def test_a_gpu_target_lowers_through_the_hooks_to_ptx():
    lowering = lower_module(_kernel(), ProbeTarget())
    text = str(lowering.llvm)
    assert "addrspace(3)" in text and "llvm.nvvm.barrier0" in text and "__nv_sinf" in text
    for name in ("initialize_all_targets", "initialize_all_asmprinters"):
        getattr(llvm, name)()
    try:
        machine = llvm.Target.from_triple(ProbeTarget.triple).create_target_machine(
            cpu="sm_80", features="+ptx75", opt=2)
    except RuntimeError as error:   # an llvmlite built without NVPTX
        pytest.skip(f"no NVPTX target: {error}")
    module = llvm.parse_assembly(text)
    module.verify()
    ptx = machine.emit_assembly(module)
    assert "shfl.sync.down" in ptx and "bar.sync" in ptx and "atom.global.add" in ptx
    assert ".entry" not in ptx   # kernel annotations are the NVPTX target's finish_module
