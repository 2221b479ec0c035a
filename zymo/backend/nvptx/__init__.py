"""The NVPTX backend: PTX for NVIDIA GPUs through llvmlite's NVPTX target (no nvcc or NVVM).

    kernel = zymo.backend.nvptx.compile(module, arch="sm_90")
    kernel.ptx, kernel.kernel_name, kernel.params     # what the CUDA runtime loads and packs

The `.entry` ABI is `KERNEL_ABI_DOC`; `ptxas.assemble` checks PTX with NVIDIA's assembler and
reports registers and spills.
"""
from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass, field

import llvmlite.binding as llvm
from llvmlite import ir

from ...ir.module import Module
from ..llvm import BoundsSite, lower_module
from .abi import KERNEL_ABI_DOC, PTXParam, entry_params
from .libdevice import LibdeviceNotFoundError
from . import machine
from .machine import DEFAULT_ARCH
from .target import NVPTXTarget

__all__ = ["KERNEL_ABI_DOC", "LibdeviceNotFoundError", "PTXKernel", "PTXParam", "compile"]


@dataclass(frozen=True)
class PTXKernel:
    """One kernel compiled to PTX, with what launching it needs."""

    ptx: str
    kernel_name: str                 # the `.entry` symbol
    llvm_ir: str                     # the optimized LLVM IR the PTX was emitted from
    arch: str                        # "sm_90"
    ptx_version: str                 # the PTX ISA of `.version`, "7.8"
    params: list[PTXParam]           # the `.entry` parameters in order (KERNEL_ABI_DOC)
    uses_libdevice: bool
    static_shared_bytes: int         # the kernel's fixed-size shared arrays together
    fastmath: bool = False
    boundscheck: bool = False
    bounds_sites: tuple[BoundsSite, ...] = ()   # indexed by the error buffer's word 1
    timings: dict[str, float] = field(default_factory=dict, compare=False)


def compile(module: Module, arch: str = DEFAULT_ARCH, fastmath: bool = False,
            boundscheck: bool = False, ptx_version: int | None = None,
            max_ptx_version: int | None = None, contract: bool = True,
            max_registers: int | None = None, noalias: bool = True) -> PTXKernel:
    """PTX for the kernel of `module` (and the device functions it calls) on `arch` (sm_70
    and newer). The PTX ISA is LLVM's default for the arch (the oldest that has it), or
    `ptx_version` (78 for 7.8), lowered to `max_ptx_version` (what the driver accepts).
    `fastmath` flushes f32 denormals and uses approximate division, sqrt and functions;
    `contract=False` keeps multiplies and adds apart (no FMA contraction); `max_registers`
    caps the registers per thread (`.maxnreg`: more resident warps, perhaps spills);
    `noalias=False` drops the `noalias` of private arrays (passes/alias.py), for launches
    whose arguments overlap."""
    kernel = module[module.entry]
    clock = _Clock()
    with machine.lock:     # llvmlite's LLVM context is shared by the whole process
        target = NVPTXTarget(arch, fastmath, boundscheck, ptx_version, max_ptx_version,
                             contract)
        lowering = lower_module(module, target, boundscheck=boundscheck, noalias=noalias)
        if max_registers is not None:
            fn = lowering.llvm.get_global(f"zymo.kernel.{kernel.attrs['sym_name']}")
            lowering.llvm.add_named_metadata("nvvm.annotations", [
                fn, "maxnreg", ir.Constant(ir.IntType(32), int(max_registers))])
        llvm_module = llvm.parse_assembly(str(lowering.llvm))
        entry = llvm_module.get_function(f"zymo.kernel.{kernel.attrs['sym_name']}")
        entry.name = _entry_symbol(kernel.attrs["sym_name"])
        llvm_module.verify()
        clock.lap("lower")
        target.optimize(llvm_module)
        clock.lap("optimize")
        ptx = machine.emit_ptx(llvm_module, target.machine)
        clock.lap("codegen")
        _warn_if_large(kernel.attrs["sym_name"], ptx, lowering.unrolled, clock.laps)
        version = re.search(r"^\.version (\S+)", ptx, re.MULTILINE)
        return PTXKernel(
            ptx=ptx, kernel_name=entry.name, llvm_ir=str(llvm_module), arch=arch,
            ptx_version=version.group(1) if version else "",
            params=entry_params(kernel, boundscheck), uses_libdevice=target.uses_libdevice,
            static_shared_bytes=_shared_bytes(llvm_module, target.machine),
            fastmath=fastmath, boundscheck=boundscheck, bounds_sites=tuple(lowering.sites),
            timings=clock.laps)


class _Clock:
    """Seconds spent in each stage."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self.last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.laps[stage], self.last = now - self.last, now


# PTX beyond this many lines takes ptxas / nvJitLink minutes (seen: 100k lines, 4 minutes)
LARGE_PTX_LINES = 40_000


def _warn_if_large(name: str, ptx: str, unrolled: list, laps: dict) -> None:
    """Say why a compile is slow before the link that takes longest: the size, and the fully
    unrolled loops that made it (largest first)."""
    lines = ptx.count("\n")
    if lines <= LARGE_PTX_LINES:
        return
    loops = sorted(unrolled, key=lambda item: -item[1] * item[2])[:3]
    where = "".join(f"\n  {op.loc}: a loop of {trips} iterations x {size} ops unrolled fully"
                    for op, trips, size in loops)
    warnings.warn(f"zymo: kernel {name} compiled to {lines:,} lines of PTX in "
                  f"{sum(laps.values()):.0f} s; assembling it may take minutes.{where}\n"
                  f"hint: loops with run-time bounds (or fewer unrolled iterations) keep the "
                  f"code small", RuntimeWarning, stacklevel=3)


def _entry_symbol(name: str) -> str:
    """The kernel's name as a PTX identifier (letters, digits, `_`, `$`)."""
    symbol = re.sub(r"[^A-Za-z0-9_$]", "_", name)
    return symbol if re.match(r"[A-Za-z_]", symbol) else f"_{symbol}"


def _shared_bytes(module: llvm.ModuleRef, machine: llvm.TargetMachine) -> int:
    """Bytes of the module's fixed-size `.shared` arrays, each 16-byte aligned."""
    total = 0
    for glob in module.global_variables:
        if "addrspace(3)" in str(glob.type) and not glob.is_declaration:
            size = machine.target_data.get_abi_size(glob.global_value_type)
            total = -(-total // 16) * 16 + size
    return total
