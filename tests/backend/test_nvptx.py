"""The NVPTX backend: every corpus kernel becomes PTX that ptxas accepts for sm_80 and sm_90,
and the PTX holds what CUDA C would: the kernel ABI, `ld.global.nc`, `bar.sync`, `shfl.sync`,
native atomics, inlined libdevice. The ptxas tests are skipped only where ptxas is absent."""
from __future__ import annotations

import math
import re
from functools import cache

import numpy as np
import pytest

import zymo as zm
from corpus import ALL_CASES
from zymo.backend import nvptx
from zymo.backend.llvm import lower_module
from zymo.backend.nvptx import libdevice, ptxas
from zymo.backend.nvptx.target import NVPTXTarget
from zymo.ir import Module

from . import nvptx_kernels as K
from .helpers import KernelBuilder, array

ARCHES = ("sm_80", "sm_90")
CASES = {case.name: case for case in ALL_CASES}
needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")


@cache
def corpus_module(name: str):
    case = CASES[name]
    # the codegen stage's IR, which the backends lower (it says which arrays are private)
    return case.kernel.specialize(*case.make_args(np.random.default_rng(0))).codegen


@cache
def corpus_ptx(name: str, arch: str = "sm_90", **options) -> nvptx.PTXKernel:
    return nvptx.compile(corpus_module(name), arch=arch, **options)


def instructions(ptx: str) -> list[str]:
    """The PTX instructions' opcodes, in order."""
    return re.findall(r"^\s+([a-z][\w.]*)", ptx, re.MULTILINE)


def entry_params(ptx: str) -> list[str]:
    """The `.entry` parameter declarations as `.param .<type>` (ignoring pointer notes)."""
    header = re.search(r"\.entry\s+\w+\((.*?)\)", ptx, re.DOTALL)
    assert header is not None
    return re.findall(r"\.param (\.\w+)", header.group(1))


# ---- the corpus through ptxas --------------------------------------------------------------
@needs_ptxas
@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_kernel_assembles(name, arch):
    compiled = corpus_ptx(name, arch)
    report = ptxas.assemble(compiled.ptx, arch)
    assert report.function == compiled.kernel_name and report.registers > 0


@needs_ptxas
@pytest.mark.parametrize("options", [{"fastmath": True}, {"boundscheck": True},
                                     {"arch": "sm_90a", "ptx_version": 85}],
                         ids=["fastmath", "boundscheck", "sm_90a-ptx85"])
@pytest.mark.parametrize("name", ["unary_math_f32", "matmul_tiled_64x48x32", "warp_shuffles",
                                  "minmax_atomic", "solve4_local_f64", "softmax_rows"])
def test_options_assemble(name, options):
    compiled = corpus_ptx(name, **options)
    ptxas.assemble(compiled.ptx, options.get("arch", "sm_90"))


# ---- every atomic and shuffle on every type ------------------------------------------------
@needs_ptxas
@pytest.mark.parametrize("dtype", K.ATOMIC_TYPES + K.NARROW_TYPES, ids=str)
def test_atomics_of_every_type_assemble(dtype):
    for kernel in (K.global_atomics, K.shared_atomics(dtype)):
        spec = kernel.specialize(zm.Array(dtype, 1), dtype, *([zm.Array(dtype, 1)]
                                                              if kernel is K.global_atomics
                                                              else []))
        ptxas.assemble(nvptx.compile(spec.optimized).ptx)


@needs_ptxas
@pytest.mark.parametrize("dtype", K.SHUFFLE_TYPES, ids=str)
def test_shuffles_of_every_type_assemble(dtype):
    spec = K.shuffles.specialize(zm.Array(dtype, 1), zm.Array(dtype, 2))
    ptx = nvptx.compile(spec.optimized).ptx
    ptxas.assemble(ptx)
    halves = 2 if dtype.bits == 64 else 1
    for mode in ("idx", "down", "up", "bfly"):
        assert instructions(ptx).count(f"shfl.sync.{mode}.b32") == halves


def test_native_atomics_and_cas_loops():
    def ops(dtype):
        spec = K.global_atomics.specialize(zm.Array(dtype, 1), dtype, zm.Array(dtype, 1))
        return instructions(nvptx.compile(spec.optimized).ptx)

    f32 = ops(zm.f32)
    assert "atom.global.add.f32" in f32 and "atom.global.exch.b32" in f32
    assert f32.count("atom.relaxed.gpu.global.cas.b32") == 2      # min and max: CAS loops
    assert "atom.global.add.f64" in ops(zm.f64)
    assert {"atom.global.min.s64", "atom.global.max.s64"} <= set(ops(zm.i64))
    assert {"atom.global.min.u32", "atom.global.max.u32"} <= set(ops(zm.u32))
    cas = K.compare_and_swap.specialize(zm.Array(zm.i64, 1), zm.i64, zm.i64, zm.Array(zm.i64, 1))
    assert "atom.relaxed.gpu.global.cas.b64" in instructions(nvptx.compile(cas.optimized).ptx)


# ---- what the PTX holds --------------------------------------------------------------------
def test_entry_takes_the_documented_abi():
    compiled = corpus_ptx("saxpy")      # saxpy(a: f64 (weak float), x: f32[:], y: f32[:])
    assert compiled.kernel_name == "saxpy"
    assert f".visible .entry {compiled.kernel_name}(" in compiled.ptx
    assert entry_params(compiled.ptx) == [".f64"] + [".u64"] * 6
    assert [(p.name, p.role, p.dtype) for p in compiled.params] == [
        ("a", "value", np.float64), ("x", "data", np.uint64), ("x.shape[0]", "shape", np.int64),
        ("x.strides[0]", "strides", np.int64), ("y", "data", np.uint64),
        ("y.shape[0]", "shape", np.int64), ("y.strides[0]", "strides", np.int64)]
    assert "strides" in nvptx.KERNEL_ABI_DOC


def test_bool_scalars_are_bytes_and_boundscheck_adds_the_error_buffer():
    spec = K.negate_unless.specialize(zm.bool_, zm.Array(zm.f32, 1), zm.Array(zm.f32, 1))
    compiled = nvptx.compile(spec.optimized)
    assert compiled.params[0].dtype == np.uint8 and entry_params(compiled.ptx)[0] == ".u8"
    compiled = corpus_ptx("saxpy", boundscheck=True)
    assert compiled.params[-1].role == "errbuf" and len(compiled.bounds_sites) == 3
    assert entry_params(compiled.ptx) == [".f64"] + [".u64"] * 7


def test_read_only_arrays_load_through_the_nc_cache():
    ops = instructions(corpus_ptx("saxpy").ptx)
    assert ops.count("ld.global.nc.b32") == 1      # x
    assert ops.count("ld.global.b32") == 1         # y, which is written
    assert "readonly" in corpus_ptx("saxpy").llvm_ir


def test_shared_memory_and_barriers():
    compiled = corpus_ptx("matmul_tiled_64x48x32")
    ops = instructions(compiled.ptx)
    assert ops.count("bar.sync") == 2 and "st.shared.b32" in ops
    assert "ld.shared.v4.b32" in ops and "fma.rn.f32" in ops
    assert compiled.static_shared_bytes == 2 * 16 * 16 * 4
    assert re.search(r"\.shared \.align 16 \.b8 zymo_shared_sA\[1024\]", compiled.ptx)


def test_dynamic_shared_memory_is_extern():
    spec = K.dynamic_shared.specialize(zm.Array(zm.f32, 1), zm.Array(zm.f32, 1))
    compiled = nvptx.compile(spec.optimized)
    assert ".extern .shared .align 16 .b8 zymo_dynamic_shared[]" in compiled.ptx
    assert compiled.static_shared_bytes == 0


@needs_ptxas
def test_dynamic_shared_extent_reads_the_launchs_size():
    from frontend.test_kernel_language import dynamic_shared_views
    spec = dynamic_shared_views.specialize(zm.Array(zm.i64, 1))
    compiled = nvptx.compile(spec.optimized)
    assert "%dynamic_smem_size" in compiled.ptx
    ptxas.assemble(compiled.ptx, "sm_90")


def test_warp_ops():
    assert "shfl.sync.down.b32" in instructions(corpus_ptx("warp_sum_shfl_down").ptx)
    votes = instructions(corpus_ptx("warp_votes").ptx)
    assert {"vote.sync.ballot.b32", "vote.sync.all.pred", "vote.sync.any.pred"} <= set(votes)
    assert "activemask.b32" in instructions(corpus_ptx("partial_warp_activemask").ptx)


def test_constant_and_local_arrays_use_their_state_spaces():
    spec = K.table_lookup.specialize(zm.Array(zm.i32, 1), zm.Array(zm.f32, 1))
    ptx = nvptx.compile(spec.optimized).ptx
    assert "ld.const.b32" in instructions(ptx) and ".const .align 16 .b8" in ptx
    # the local array may be promoted to registers once its loops are unrolled; whatever
    # memory access remains must name its state space (no generic loads)
    ops = instructions(corpus_ptx("solve4_local_f64").ptx)
    spaces = ("ld.local", "ld.global", "ld.param", "ld.shared", "ld.const")
    assert all(op.startswith(spaces) for op in ops if op.startswith("ld."))


def test_libdevice_is_linked_only_when_used_and_inlined():
    assert not corpus_ptx("saxpy").uses_libdevice
    compiled = corpus_ptx("black_scholes")
    assert compiled.uses_libdevice
    assert "call" not in " ".join(instructions(compiled.ptx))
    assert "__nv_" not in compiled.ptx and "__nvvm_reflect" not in compiled.llvm_ir


def test_precise_math_by_default_fast_with_fastmath():
    spec = K.divide_sqrt_sin.specialize(zm.Array(zm.f32, 1), zm.Array(zm.f32, 1))
    precise = set(instructions(nvptx.compile(spec.optimized).ptx))
    assert {"div.rn.f32", "sqrt.rn.f32"} <= precise and not any("ftz" in op for op in precise)
    fast = set(instructions(nvptx.compile(spec.optimized, fastmath=True).ptx))
    assert {"div.approx.ftz.f32", "sqrt.approx.ftz.f32", "sin.approx.ftz.f32"} <= fast


@zm.kernel
def tanh_of(x, y):
    i = zm.grid(1)
    if i < x.size:
        y[i] = math.tanh(x[i])


@needs_ptxas
def test_fastmath_tanh_is_one_instruction_since_sm_75():
    spec = tanh_of.specialize(zm.Array(zm.f32, 1), zm.Array(zm.f32, 1))
    fast = nvptx.compile(spec.optimized, fastmath=True).ptx
    assert "tanh.approx.f32" in instructions(fast)
    assert "tanh.approx.f32" not in instructions(nvptx.compile(spec.optimized).ptx)
    assert "tanh.approx.f32" not in instructions(nvptx.compile(spec.optimized, arch="sm_70",
                                                               fastmath=True).ptx)
    ptxas.assemble(fast, "sm_90")


def test_fma_contraction_can_be_turned_off():
    assert "fma.rn.f32" in instructions(corpus_ptx("saxpy").ptx)
    assert "fma.rn.f32" not in instructions(corpus_ptx("saxpy", contract=False).ptx)


def test_functions_with_barriers_are_convergent():
    module = Module("caller")
    device = KernelBuilder("sync_then_store", [("out", array(zm.f32))], kind="device",
                           module=module)
    device.barrier()
    device.store(device["out"], device.const(0), device.const(1.0, zm.f32))
    device.finish()
    kernel = KernelBuilder("caller", [("out", array(zm.f32))], module=module)
    kernel.call("sync_then_store", [], kernel["out"])
    text = str(lower_module(kernel.finish(), NVPTXTarget()).llvm)
    convergent = re.findall(r"define .*?@\"?([\w.]+)\"?\(.*\) convergent", text)
    assert sorted(convergent) == ["zymo.kernel.caller", "zymo.sync_then_store"]


def test_arch_and_ptx_version():
    assert ".target sm_80" in corpus_ptx("saxpy", "sm_80").ptx
    compiled = corpus_ptx("saxpy", "sm_90a", ptx_version=85)
    assert compiled.ptx_version == "8.5" and ".target sm_90a" in compiled.ptx
    assert corpus_ptx("saxpy", "sm_90", max_ptx_version=88).ptx_version == "7.8"
    assert corpus_ptx("saxpy", "sm_90", ptx_version=85, max_ptx_version=80).ptx_version == "8.0"
    for bad in ("sm_60", "gfx90a", "90"):
        with pytest.raises(ValueError, match="unsupported GPU architecture"):
            nvptx.compile(corpus_module("saxpy"), arch=bad)
    with pytest.raises(ValueError, match="needs PTX ISA 7.8 or newer, but 7.0 was requested"):
        nvptx.compile(corpus_module("saxpy"), arch="sm_90", ptx_version=70)
    with pytest.raises(ValueError, match="update the NVIDIA driver"):
        nvptx.compile(corpus_module("saxpy"), arch="sm_90", max_ptx_version=75)


def test_missing_libdevice_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(libdevice, "_path", None)
    monkeypatch.setattr(libdevice, "_from_pathfinder", lambda: None)
    monkeypatch.setattr(libdevice, "candidates", lambda: [tmp_path / "libdevice.10.bc"])
    monkeypatch.delenv("ZYMO_LIBDEVICE", raising=False)
    with pytest.raises(libdevice.LibdeviceNotFoundError, match=r'pip install "zymo\[cuda\]"'):
        libdevice.find()


def test_specialization_gives_ptx():
    ptx = K.divide_sqrt_sin.specialize(zm.Array(zm.f32, 1), zm.Array(zm.f32, 1)).ptx("sm_80")
    assert ".target sm_80" in ptx and ".entry divide_sqrt_sin(" in ptx


@needs_ptxas
def test_ptxas_report_counts_registers_and_spills():
    report = ptxas.assemble(corpus_ptx("solve4_local_f64").ptx, "sm_90")
    assert report.registers > 0 and report.stack_frame >= 0 and report.spill_stores == 0
    with pytest.raises(ptxas.PtxasError, match="rejected"):
        ptxas.assemble(".version 7.8\n.target sm_90\n.address_size 64\nbogus;\n")


def test_max_registers_caps_the_kernel():
    """`@zm.kernel(max_registers=N)` (numba's option) gives PTX `.maxnreg N`, a separate cache
    entry, and survives `.on()` and pickling."""
    import pickle

    import zymo as zm
    from corpus.memory import stencil5
    capped = zm.kernel(max_registers=32)(stencil5.py_func)
    u = np.zeros((8, 8), np.float32)
    assert ".maxnreg 32" in capped.specialize(u, u, np.float32(0.1)).ptx("sm_90")
    assert ".maxnreg" not in stencil5.specialize(u, u, np.float32(0.1)).ptx("sm_90")
    assert capped.on("cpu").max_registers == 32
    assert pickle.loads(pickle.dumps(stencil5)).max_registers is None
    with pytest.raises(TypeError, match="max_registers must be an int from 16 to 255"):
        zm.kernel(max_registers=8)


def test_derivative_kernels_have_their_own_register_cap():
    """zm.grad's kernels get DERIVATIVE_REGISTERS unless the kernel or the call names a cap;
    zm.jvp's only when asked; the primal kernel's PTX is unchanged."""
    import zymo as zm
    from corpus.memory import stencil5
    from zymo.runtime.grad import DERIVATIVE_REGISTERS
    u = np.zeros((8, 8), np.float32)

    def ptx(derivative):
        alpha = (zm.Active(np.float32(0.1)) if derivative.mode == "grad"
                 else zm.Duplicated(np.float32(0.1), np.float32(1.0)))
        return derivative.specialize(zm.Duplicated(u, np.zeros_like(u)),
                                     zm.Duplicated(u.copy(), np.ones_like(u)), alpha).ptx("sm_90")

    assert f".maxnreg {DERIVATIVE_REGISTERS}" in ptx(zm.grad(stencil5))
    assert ".maxnreg 64" in ptx(zm.grad(stencil5, max_registers=64))
    assert ".maxnreg 40" in ptx(zm.grad(zm.kernel(max_registers=40)(stencil5.py_func)))
    assert ".maxnreg" not in ptx(zm.jvp(stencil5))
    assert ".maxnreg 96" in ptx(zm.jvp(stencil5, max_registers=96))
    assert ".maxnreg" not in stencil5.specialize(u, u, np.float32(0.1)).ptx("sm_90")
    assert zm.grad(stencil5).kernel is zm.grad(stencil5).kernel    # one capped copy, reused
    with pytest.raises(TypeError, match="max_registers must be an int"):
        zm.grad(stencil5, max_registers=300)


def test_nested_loops_unroll_within_a_code_budget():
    """The inner loop of a 30 x 30 nest is unrolled fully, the outer one not: the tangent
    kernel compiles in seconds (it sat in nvJitLink for minutes when both were)."""
    import time
    x = zm.Array(zm.f64, 1)
    spec = zm.jvp(K.nest_30x30).specialize(zm.Duplicated(x, x), zm.Duplicated(x, x))
    start = time.perf_counter()
    compiled = nvptx.compile(spec.codegen)
    assert time.perf_counter() - start < 30
    assert compiled.ptx.count("\n") < 20_000     # 105,000 with both loops unrolled


def test_a_huge_kernel_says_why_before_it_is_assembled(monkeypatch):
    from zymo.backend import nvptx as backend
    monkeypatch.setattr(backend, "LARGE_PTX_LINES", 100)
    spec = K.nest_30x30.specialize(zm.Array(zm.f64, 1), zm.Array(zm.f64, 1))
    with pytest.warns(RuntimeWarning, match=r"lines of PTX.*\n.*nvptx_kernels.py:\d+.*"
                                            r"30 iterations"):
        nvptx.compile(spec.codegen)


@zm.kernel
def damped_series(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        z = x[i]
        total = 0.0
        for n in range(10):
            w = z * (n + 1.0)
            total += math.sin(w) / (1.0 + w * w) + math.cos(w * z) / (2.0 + z * z + n)
            total += math.exp(-w * w) / (3.0 + w) + math.atan(w / (1.0 + z * z))
            total += math.sqrt(1.0 + w * w) / (4.0 + math.sin(z + n))
            total += math.tanh(w / (5.0 + z * z)) * math.log(6.0 + w * w)
        out[i] = total


def _unroll_decisions(monkeypatch, trips: int) -> list:
    """(sweep, copied ops, unrolled) of each range loop of `trips` iterations the NVPTX
    target lowers from now on."""
    seen = []
    original = NVPTXTarget.range_loop_hint

    def spy(self, module, count, body_ops, sweep=""):
        hint = original(self, module, count, body_ops, sweep)
        if count == trips:
            seen.append((sweep, count * body_ops, hint is not None))
        return hint
    monkeypatch.setattr(NVPTXTarget, "range_loop_hint", spy)
    return seen


def test_a_derivative_s_reverse_loops_unroll_within_a_smaller_budget(monkeypatch):
    """A loop's reverse (its recomputation and adjoint, sweep="reverse") unrolls fully only
    within REVERSE_UNROLL_OPS, a primal loop the reverse sweep runs again to recompute values
    (sweep="recompute") within RECOMPUTE_UNROLL_OPS; the forward sweep's copy of the same
    loop, and the primal's, within FULL_UNROLL_OPS."""
    from zymo.backend.nvptx import target as nvptx_target
    seen = _unroll_decisions(monkeypatch, 10)
    x = np.ones(4)
    nvptx.compile(zm.grad(damped_series).specialize(
        zm.Duplicated(x, x), zm.Duplicated(x, x)).codegen)
    forward = [s for s in seen if s[0] == ""]
    reverse = [s for s in seen if s[0] == "reverse"]
    assert forward and all(unrolled for _, _, unrolled in forward), seen
    assert reverse and all(nvptx_target.REVERSE_UNROLL_OPS < size <= nvptx_target.FULL_UNROLL_OPS
                           and not unrolled for _, size, unrolled in reverse), seen
    assert nvptx_target.RECOMPUTE_UNROLL_OPS < nvptx_target.REVERSE_UNROLL_OPS


@zm.kernel
def recomputed_series(x, out):
    """The reverse sweep needs each iteration's `s` of the inner series again, so it runs
    the series once more inside the outer loop's reverse (a recomputed copy)."""
    i = zm.grid(1)
    if i < x.shape[0]:
        total = 0.0
        for m in range(x.shape[1]):
            z = x[i, m]
            s = 0.0
            for n in range(10):
                w = z * (n + 1.0) + s
                s = s * z + math.sin(w) / (1.0 + w * w) + math.cos(w * z) / (2.0 + z * z + n)
                s += math.exp(-w * w) / (3.0 + w) + math.atan(w / (1.0 + z * z))
                s += math.sqrt(1.0 + w * w) / (4.0 + math.sin(z + n))
                s += math.tanh(w / (5.0 + z * z)) * math.log(6.0 + w * w)
                s += math.sin(w * s) / (7.0 + math.cos(w + s) + z * z)
                s += math.exp(-s * s) * math.atan(s / (1.0 + w * w)) / (8.0 + w * w)
            total += s * s
        out[i] = total


def test_recomputed_loops_unroll_within_their_own_budget(monkeypatch):
    """The inner series: unrolled in the forward sweep (sweep=""), kept as a loop where the
    reverse sweep recomputes it once its copies exceed RECOMPUTE_UNROLL_OPS, unrolled there
    when the budget is raised; the gradient is right either way."""
    from zymo.backend.nvptx import target as nvptx_target
    seen = _unroll_decisions(monkeypatch, 10)
    x = np.full((4, 3), 0.3)
    args = (zm.Duplicated(x, x), zm.Duplicated(np.ones(4), np.ones(4)))
    nvptx.compile(zm.grad(recomputed_series).specialize(*args).codegen)
    recomputed = [s for s in seen if s[0] == "recompute"]
    assert recomputed and all(not unrolled for *_, unrolled in recomputed), seen
    assert all(size > nvptx_target.RECOMPUTE_UNROLL_OPS for _, size, _ in recomputed), seen
    assert any(unrolled for sweep, _, unrolled in seen if sweep == ""), seen
    seen.clear()
    monkeypatch.setattr(nvptx_target, "RECOMPUTE_UNROLL_OPS", nvptx_target.FULL_UNROLL_OPS)
    nvptx.compile(zm.grad(recomputed_series).specialize(*args).codegen)
    assert all(unrolled for sweep, _, unrolled in seen if sweep == "recompute"), seen
    rng = np.random.default_rng(7)
    report = zm.check_grad(recomputed_series, 1, 4,
                           zm.Duplicated(rng.uniform(-0.1, 0.1, (4, 3)), np.zeros((4, 3))),
                           zm.Duplicated(np.zeros(4), np.zeros(4)), backend="cpu")
    assert report.ok, str(report)
