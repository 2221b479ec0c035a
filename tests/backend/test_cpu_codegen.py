"""CPU backend: the shape of the generated code (thread loops, phases, slots)."""
from __future__ import annotations

from zymo.backend import cpu
from zymo.ir.types import Array, f32, i64
from zymo.ops import arith, memory, sync
from zymo.passes.alias import AnnotatePrivateArrays

from .cpu_ir import KernelIR


def _saxpy():
    A = Array(f32, 1)
    k = KernelIR("saxpy", a=f32, x=A, y=A)
    i = k.global_id()

    def then():
        k.store(k["y"], i, k.op(arith.Add, k.op(arith.Mul, k["a"], k.load(k["x"], i)),
                                k.load(k["y"], i)))

    k.if_(k.cmp("lt", k.cast(i, i64), k.dim(k["x"])), then)
    return k.finish()


def test_thread_loop_has_noalias_arrays_and_no_loop_vectorizer():
    """x read and y owned: both noalias. LLVM's loop vectorizer is off (it miscompiled
    masked indices: test_cpu_vectorizer.py), so the thread loop stays scalar."""
    module = _saxpy()
    AnnotatePrivateArrays().run(module)   # what the codegen stage finds: x read, y owned
    kernel = cpu.compile(module)
    assert kernel.llvm_ir.count("noalias") == 2
    optimized = kernel.optimized_llvm_ir
    assert "vector.body" not in optimized and "x float>" not in optimized
    assert set(kernel.compile_seconds) == {"lower", "optimize", "codegen"}


def test_thread_ids_are_computed_again_after_a_barrier():
    """tid.x used across a barrier is recomputed, not kept in a slot (a per-thread stack
    array): the only allocation is the shared array, and the accesses after the barrier
    index by the thread loop's own counter (no gathers)."""
    k = KernelIR("copy", x=Array(f32, 1), y=Array(f32, 1))
    shared = k.op(memory.SharedAlloc, shape=(256,), dtype=f32)
    tid, i = k.tid(), k.global_id()
    k.store(shared, tid, k.load(k["x"], i))
    k.create(sync.Barrier)
    k.store(k["y"], i, k.op(arith.Mul, k.load(shared, tid), k.const(2.0, f32)))
    kernel = cpu.compile(k.finish())
    allocations = [line for line in kernel.llvm_ir.splitlines() if " alloca " in line]
    assert len(allocations) == 1 and "alloca float, i64 256" in allocations[0], allocations
    optimized = kernel.optimized_llvm_ir
    assert "gather" not in optimized and "scatter" not in optimized
