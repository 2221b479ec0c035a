"""LLVM's NVPTX target: target machines (one per arch and PTX version), O3 and PTX emission.

Target machines cost milliseconds and are not thread-safe, so they are created once per
(arch, PTX version) and used under one lock. The optimization pipeline is LLVM's default O3
built on the NVPTX machine, which adds NVPTX's own passes (NVVMReflect resolves libdevice's
`__nvvm_reflect` queries from the module flag `nvvm-reflect-ftz`, the arch and the option
set in `_nvptx`; NVVMIntrRange bounds the special registers).
"""
from __future__ import annotations

import functools
import re
import threading

import llvmlite.binding as llvm

TRIPLE = "nvptx64-nvidia-cuda"
DEFAULT_ARCH = "sm_90"
OLDEST_SM = 70                                  # Volta: `shfl.sync`, `vote.sync`, f64 atomics
ARCH_PATTERN = re.compile(r"sm_(\d{2,3})([af]?)")
SPEED_LEVEL = 3

lock = threading.RLock()   # LLVM's context and the machines are not thread-safe


def check_arch(arch: str) -> str:
    """`arch` if it names a supported GPU architecture (sm_70 and newer, with an optional
    `a`/`f` suffix), else a ValueError saying what to pass."""
    match = ARCH_PATTERN.fullmatch(arch)
    if match is None or int(match.group(1)) < OLDEST_SM:
        raise ValueError(f"unsupported GPU architecture {arch!r}: pass 'sm_XY' with XY >= "
                         f"{OLDEST_SM}, e.g. 'sm_80', 'sm_90' or 'sm_90a'")
    return arch


def sm_number(arch: str) -> int:
    """The compute capability of `arch` as a number: 90 for "sm_90a"."""
    return int(ARCH_PATTERN.fullmatch(check_arch(arch)).group(1))


@functools.cache
def _nvptx() -> llvm.Target:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    # libdevice asks `__nvvm_reflect("__CUDA_PREC_SQRT")` whether f32 square roots inside its
    # functions (hypotf, normf, ...) round correctly; NVVM answers 1 unless told otherwise,
    # LLVM's NVVMReflect 0 (sqrt.approx, two ulps off) unless this option says 1. It is
    # process-wide, so fastmath builds get the correctly rounded root too.
    llvm.set_option("zymo", "-nvvm-reflect-add=__CUDA_PREC_SQRT=1")
    try:
        return llvm.Target.from_triple(TRIPLE)
    except RuntimeError as error:
        raise RuntimeError(f"this llvmlite was built without the NVPTX target ({error}); "
                           "install llvmlite from PyPI or conda-forge") from None


@functools.cache
def target_machine(arch: str, ptx_version: int | None = None) -> llvm.TargetMachine:
    """The machine for `arch` emitting PTX ISA `ptx_version` (78 for 7.8), by default
    LLVM's: the oldest ISA that has the arch."""
    features = f"+ptx{ptx_version}" if ptx_version else ""
    with lock:
        return _nvptx().create_target_machine(cpu=check_arch(arch), features=features,
                                              opt=SPEED_LEVEL)


@functools.cache
def oldest_ptx_version(arch: str) -> int:
    """The oldest PTX ISA that has `arch` (LLVM's default for it), as 78 for 7.8."""
    empty = llvm.parse_assembly(f'target triple = "{TRIPLE}"')
    ptx = emit_ptx(empty, target_machine(arch))
    match = re.search(r"^\.version (\d+)\.(\d+)", ptx, re.MULTILINE)
    assert match is not None, ptx
    return int(match.group(1)) * 10 + int(match.group(2))


def ptx_version_for(arch: str, requested: int | None, cap: int | None) -> int | None:
    """The PTX ISA to emit: `requested`, else LLVM's default, lowered to `cap` (what the
    driver accepts). A ValueError when that is older than `arch` allows (LLVM would abort)."""
    oldest = oldest_ptx_version(arch)
    version = min(requested or oldest, cap or 10**6)
    if version < oldest:
        capped = version != requested
        raise ValueError(f"{arch} needs PTX ISA {oldest // 10}.{oldest % 10} or newer, but "
                         + (f"the driver accepts at most {version // 10}.{version % 10}: "
                            "update the NVIDIA driver" if capped else
                            f"{version // 10}.{version % 10} was requested"))
    return None if version == oldest else version


@functools.cache
def data_layout() -> str:
    """NVPTX's data layout (the same for every arch)."""
    return str(target_machine(DEFAULT_ARCH).target_data)


def run_passes(module: llvm.ModuleRef, machine: llvm.TargetMachine,
               passes: tuple[str, ...]) -> None:
    """Run the named module passes of llvmlite's pass manager (`global_dead_code_eliminate`)."""
    with lock:
        builder = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options())
        manager = llvm.create_new_module_pass_manager()
        for name in passes:
            getattr(manager, f"add_{name}_pass")()
        manager.run(module, builder)


def optimize(module: llvm.ModuleRef, machine: llvm.TargetMachine) -> None:
    """LLVM's O3 for the NVPTX machine, SLP vectorization on (it forms ld/st.v2 and .v4).
    The loop vectorizer is off, as on the CPU (zymo/backend/cpu/jit.py: it miscompiles
    masked indices): on NVPTX it changed none of the corpus's 95 kernels' PTX."""
    with lock:
        options = llvm.create_pipeline_tuning_options(speed_level=SPEED_LEVEL)
        options.slp_vectorization = True
        options.loop_vectorization = False
        builder = llvm.create_pass_builder(machine, options)
        builder.getModulePassManager().run(module, builder)


def emit_ptx(module: llvm.ModuleRef, machine: llvm.TargetMachine) -> str:
    with lock:
        return machine.emit_assembly(module)
