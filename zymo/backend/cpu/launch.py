"""Compiled CPU kernels and their launches: argument packing, block scheduling, errors.

Blocks are split into contiguous ranges, one per core, run by a small thread pool (the
ctypes call releases the GIL); small grids run on the calling thread. Array parameters are
`noalias` in the compiled code where the codegen stage proved them private to a thread
(passes/alias.py); a launch whose arrays overlap in memory, or whose shape breaks that proof,
uses a second build without the promise, compiled the first time it is needed.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm
import numpy as np

from ...diagnostics import BoundsError, Diagnostic, LaunchError, StepLimitError
from ...ir.module import Module
from ...ops.control import spin_error
from ...ops.foreign import linked_sources
from ...ops.raising import raises
from ..llvm.context import (ERROR_CODE, ERROR_INDEX, ERROR_NDIM, ERROR_SHAPE, ERROR_SITE,
                            ERROR_WORDS, RAISED, raised_exception)
from ..llvm.control import SPIN_WAIT
from ..llvm.module import BoundsSite, lower_module
from ..target import MAX_BLOCK_THREADS
from . import args, jit
from .target import CPUTarget

ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64,
                              ctypes.c_void_p)
# Below this many thread iterations a launch stays on the calling thread: handing work to
# the pool costs tens of microseconds.
PARALLEL_THRESHOLD = 1 << 15
WORKERS = int(os.environ.get("ZYMO_CPU_THREADS", "0")) or (os.cpu_count() or 1)

_names = itertools.count()
_pool: ThreadPoolExecutor | None = None


@dataclass
class _Build:
    entry: Any                 # the ctypes function
    llvm_ir: str               # as lowered
    module: llvm.ModuleRef     # optimized, owned by the engine
    sites: list[BoundsSite]
    seconds: dict[str, float]
    by_rows: bool              # the entry point counts block rows, not blocks
    exchange_xy: bool          # the kernel runs with the launch's x and y exchanged
    reports: bool = False      # may write the error buffer without bounds checks (spin-waits)


def _build(module: Module, boundscheck: bool, noalias: bool) -> _Build:
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    target = CPUTarget(boundscheck)
    target.entry_name = f"zymo_entry_{next(_names)}"
    target.foreign_sources = linked_sources(module)
    lowering = lower_module(module, target, boundscheck=boundscheck, noalias=noalias,
                            name=module.entry)
    text = str(lowering.llvm)
    seconds["lower"] = time.perf_counter() - start
    start = time.perf_counter()
    ref = llvm.parse_assembly(text)
    ref.verify()   # a lowering bug is an exception here, not a crash in the optimizer
    target.optimize(ref)
    seconds["optimize"] = time.perf_counter() - start
    start = time.perf_counter()
    address = jit.load(ref, target.entry_name)
    seconds["codegen"] = time.perf_counter() - start
    return _Build(ENTRY_TYPE(address), text, ref, lowering.sites, seconds, target.by_rows,
                  target.exchange_xy, reports=bool(lowering.sites))


class CPUKernel:
    """A kernel compiled for the host. `launch(grid, block, args)` runs it on NumPy arrays
    (mutated in place) and NumPy scalars."""

    def __init__(self, module: Module, boundscheck: bool = False):
        self.module = module
        self.boundscheck = boundscheck
        func = module.kernel
        names = list(func.attrs.get("arg_names") or ())
        types = list(func.attrs["function_type"].inputs)
        self.param_names = [names[k] if k < len(names) else f"arg{k}" for k in range(len(types))]
        self.param_types = types
        self._struct, self._packers = args.layout(list(zip(self.param_names, types)))
        self._fast = _build(module, boundscheck, noalias=True)
        self._safe: _Build | None = None
        self._no_errors = np.zeros(ERROR_WORDS, np.int64)   # never written without checks
        self._no_errors_address = self._no_errors.ctypes.data

    @property
    def llvm_ir(self) -> str:
        """The LLVM IR as lowered, before optimization."""
        return self._fast.llvm_ir

    @property
    def optimized_llvm_ir(self) -> str:
        return str(self._fast.module)

    @property
    def compile_seconds(self) -> dict[str, float]:
        return dict(self._fast.seconds)

    def launch(self, grid: Sequence[int] | int, block: Sequence[int] | int,
               arguments: Sequence[Any], shared_bytes: int = 0) -> None:
        build, blob, units, work = self.packed(grid, block, arguments, shared_bytes)
        if not self.boundscheck and not build.reports:
            if units:
                _run(build.entry, blob, self._no_errors_address, units, work)
            return
        errors = np.zeros(ERROR_WORDS, np.int64)
        if units:
            _run(build.entry, blob, errors.ctypes.data, units, work)
        if errors[0]:
            raise self._bounds_error(build, errors)

    def packed(self, grid: Sequence[int] | int, block: Sequence[int] | int,
               arguments: Sequence[Any], shared_bytes: int = 0) -> tuple:
        """What a launch runs: (the build, its argument block, the units its entry point
        counts (blocks or block rows), the thread iterations); compiles the build without
        `noalias` where the arguments need it. Also how code that calls the entry point
        itself (an XLA FFI handler, zymo/interop/xla_ffi.py) learns the block's words."""
        grid3, block3 = _dims(grid, "grid"), _dims(block, "block")
        threads = block3[0] * block3[1] * block3[2]
        if threads > MAX_BLOCK_THREADS:
            raise LaunchError(f"a block has at most {MAX_BLOCK_THREADS} threads, not {threads}")
        if len(arguments) != len(self._packers):
            raise LaunchError(f"kernel `{self.module.entry}` takes {len(self._packers)} "
                              f"arguments, got {len(arguments)}")
        build = self._fast
        private = self.module.kernel.attrs.get("private_arrays")
        aliasing = private is not None and not private.holds(grid3, block3)
        if build.exchange_xy:
            grid3 = (grid3[1], grid3[0], grid3[2])
            block3 = (block3[1], block3[0], block3[2])
        words: list = [*grid3, *block3, shared_bytes]
        arrays: list[tuple[int, int]] = []   # byte spans of the array arguments
        for pack, argument in zip(self._packers, arguments):
            pack(argument, words, arrays)
        blob = args.pack_block(self._struct, words, self.param_names, self.param_types)
        if aliasing or len(arrays) > 1 and args.overlapping(arrays):
            build = self._aliasing_build()
        units = grid3[0] * grid3[1] * grid3[2]
        if build.by_rows:
            units *= block3[1] * block3[2]
        return build, blob, units, grid3[0] * grid3[1] * grid3[2] * threads

    def _aliasing_build(self) -> _Build:
        if self._safe is None:
            self._safe = _build(self.module, self.boundscheck, noalias=False)
        return self._safe

    def _bounds_error(self, build: _Build, errors: np.ndarray) -> BaseException:
        if errors[ERROR_CODE] == RAISED:   # the kernel's own exception (ops/raising.py)
            return raised_exception(raises(self.module), errors)
        site = build.sites[int(errors[ERROR_SITE])]
        if errors[ERROR_CODE] == SPIN_WAIT:
            return StepLimitError(spin_error(site.loc))
        ndim = int(errors[ERROR_NDIM])
        index = tuple(int(i) for i in errors[ERROR_INDEX:ERROR_INDEX + ndim])
        shape = tuple(int(n) for n in errors[ERROR_SHAPE:ERROR_SHAPE + ndim])
        shown = index[0] if ndim == 1 else index
        message = (f"index {shown} is out of bounds for array `{site.array}` with shape "
                   f"{shape}")
        error = BoundsError(Diagnostic(site.loc, message).format())
        error.array, error.index, error.shape, error.loc = site.array, index, shape, site.loc
        return error


def _dims(value: Sequence[int] | int, what: str) -> tuple[int, int, int]:
    if type(value) is tuple and len(value) == 3:   # the common case: three positive ints
        x, y, z = value
        if type(x) is int and type(y) is int and type(z) is int and min(x, y, z) > 0:
            return x, y, z
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3:
        raise LaunchError(f"{what} must have 1 to 3 dimensions, not {len(dims)}")
    x, y, z = (*(int(d) for d in dims), 1, 1)[:3]
    if min(x, y, z) < 0 or (what == "block" and min(x, y, z) == 0):
        raise LaunchError(f"bad {what} dimensions {(x, y, z)}")
    return x, y, z


def _run(entry: Any, blob: bytes, buffer: int, blocks: int, work: int) -> None:
    """Run `blocks` units (blocks or block rows) in contiguous ranges, one per worker."""
    chunks = min(WORKERS, blocks) if work >= PARALLEL_THRESHOLD else 1
    if chunks <= 1:
        entry(blob, 0, blocks, buffer)
        return
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="zymo-cpu")
    bounds = [blocks * k // chunks for k in range(chunks + 1)]
    futures = [_pool.submit(entry, blob, bounds[k], bounds[k + 1], buffer)
               for k in range(1, chunks)]
    entry(blob, bounds[0], bounds[1], buffer)
    for future in futures:
        future.result()
