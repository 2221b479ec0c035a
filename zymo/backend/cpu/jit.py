"""LLVM for the host: one target machine, the optimization pipeline and one MCJIT engine.

Everything is created once per process (a target machine costs milliseconds) and guarded by
a lock; each compilation adds one module, with its own symbol names, to the shared engine.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading
from dataclasses import dataclass

import llvmlite.binding as llvm

# The pipeline: LLVM's default O3 with SLP vectorization. O2 costs about as much for small
# kernels and vectorizes less.
SPEED_LEVEL = 3
# LLVM's loop vectorizer is off: on the thread loops it miscompiles a masked index (LLVM 22:
# `tile[j, (i + n) % 4]` in a loop over n, with i the thread, read tile[j, i + n] past the
# row; tests/backend/test_cpu_vectorizer.py), one of a series of loop-vectorizer miscompiles
# of masked inductions that LLVM keeps fixing. Correct answers come first: `zymo bench --quick`'s
# tiled matmul ran 1.8 ms with it and 5.3 ms without, side by side on a 2-core host (the
# saxpy, stencil, reduction and histogram rows within noise).
LOOP_VECTORIZATION = False

_lock = threading.RLock()


@dataclass
class _Host:
    machine: llvm.TargetMachine
    engine: llvm.ExecutionEngine
    triple: str
    data_layout: str


_host: _Host | None = None


def host() -> _Host:
    global _host
    with _lock:
        if _host is None:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _load_libm()
            triple = llvm.get_process_triple()
            target = llvm.Target.from_triple(triple)
            features = llvm.get_host_cpu_features().flatten()
            make = lambda: target.create_target_machine(
                cpu=llvm.get_host_cpu_name(), features=features, opt=3, jit=True)
            machine = make()
            owner = llvm.parse_assembly("")
            owner.triple = triple
            engine = llvm.create_mcjit_compiler(owner, make())   # the engine owns its machine
            _host = _Host(machine, engine, triple, str(machine.target_data))
        return _host


def _load_libm() -> None:
    """Make libm's functions (erf, atan2, hypot, ...) visible to JIT-compiled code."""
    name = ctypes.util.find_library("m")
    if name:
        try:
            llvm.load_library_permanently(name)
        except RuntimeError:
            pass


def optimize(module: llvm.ModuleRef) -> None:
    machine = host().machine
    with _lock:
        options = llvm.create_pipeline_tuning_options(speed_level=SPEED_LEVEL)
        options.loop_vectorization = LOOP_VECTORIZATION
        options.slp_vectorization = True
        builder = llvm.create_pass_builder(machine, options)
        builder.getModulePassManager().run(module, builder)


def load(module: llvm.ModuleRef, symbol: str) -> int:
    """Machine code for `module` in the shared engine; the address of `symbol`."""
    state = host()
    with _lock:
        state.engine.add_module(module)
        state.engine.finalize_object()
        return state.engine.get_function_address(symbol)


_quick: list = []   # engines of quick_load, kept for the process


def quick_load(module: llvm.ModuleRef, symbols: list[str]) -> list[int]:
    """Machine code for `module` without optimization, from an engine of its own at codegen
    level 0: for small glue code that is compiled at run time and whose compile time matters
    more than its speed (a third of the shared engine's). The addresses of `symbols`."""
    state = host()
    with _lock:
        module.triple = state.triple
        target = llvm.Target.from_triple(state.triple)
        machine = target.create_target_machine(cpu=llvm.get_host_cpu_name(), opt=0, jit=True)
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        _quick.append(engine)
        return [engine.get_function_address(name) for name in symbols]
