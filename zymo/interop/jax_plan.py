"""What one XLA custom call of a zymo kernel runs, planned when JAX lowers it.

A call's operands are the arrays the kernel (or its derivative) reads, and the first values of
the arrays it writes; its results are the written arrays (each aliased to its operand: XLA
gives the handler one buffer, already holding the first values) and scratch arrays the launch
needs (a derivative's tapes). Shapes are static in XLA, so the launches are planned once per
signature on stand-in NumPy arrays (never touched: their pages are never allocated) through
the same code a launch with NumPy arrays takes: the derivative's variant and tapes
(`GradLaunch.prepare`), the build with or without `noalias`, the argument block. The plan then
says which word of each launch holds which buffer's address, and `xla_ffi.build_handler`
compiles that.
"""
from __future__ import annotations

import ctypes
import hashlib
from dataclasses import dataclass

import numpy as np

from ..ad import Const, Duplicated
from ..backend.cpu.args import LAUNCH_WORDS, words_of
from ..diagnostics import LaunchError
from ..ir.types import Array
from ..runtime.cuda.arguments import param_of_arg
from ..runtime.grad import GradLaunch
from ..runtime.kernel import _pass_args, normalize_dims
from . import xla_ffi

PRIMAL, TANGENT, COTANGENT = "primal", "tangent", "cotangent"


@dataclass(frozen=True)
class Signature:
    """One custom call: the function, what it launches (`mode`), the kernel's scalars,
    which array arguments carry tangents (TANGENT) or want cotangents (COTANGENT), and the
    per-element shapes and dtypes of its operands."""
    fn: object
    mode: str
    scalars: tuple
    active: tuple          # positions (in fn.arrays) with tangents / wanting cotangents
    operands: tuple        # ((shape, dtype name), ...) of one batch element


@dataclass
class _Launch:
    spec: object
    grid: tuple
    block: tuple
    shared: int
    args: list             # the call's arguments: stand-ins, tapes, scalars


@dataclass
class Plan:
    launches: list
    written: tuple         # operand positions the launches write, in result order
    scratch: list          # stand-ins of the scratch results (tapes), after the written ones
    stand_ins: list        # one per operand

    def scratch_avals(self) -> list:
        return [(a.shape, a.dtype) for a in self.scratch]


_plans: dict = {}


def plan(sig: Signature) -> Plan:
    """The launches of `sig`, made once (this compiles the kernel or its derivative)."""
    found = _plans.get(sig)
    if found is None:
        found = _plans[sig] = _make_plan(sig)
    return found


def _make_plan(sig: Signature) -> Plan:
    fn = sig.fn
    stand_ins = [np.empty(shape, np.dtype(dtype)) for shape, dtype in sig.operands]
    operands = iter(stand_ins)
    arrays = [next(operands) for _ in fn.arrays]
    extra = list(operands)
    first = len(fn.arrays)
    if sig.mode == TANGENT:    # the input tangents come before what the kernel writes
        tangents, extra = dict(zip(sig.active, extra[:len(sig.active)])), \
            extra[len(sig.active):]
        first += len(sig.active)
    outs = len(fn.outputs)
    inits, rest = extra[:outs], extra[outs:]
    arguments = fn.arguments_with(arrays, sig.scalars)
    grid, block, shared = fn.configuration(arguments)
    written = tuple(range(first, len(stand_ins)))
    if sig.mode == PRIMAL:
        call = fn.kernel_call(arguments, inits)
        spec = fn.kernel.specialization(tuple(param_of_arg(a) for a in call))
        launches = [_Launch(spec, grid, block, shared, call)]
    elif sig.mode == TANGENT:
        call = fn.kernel_call(arguments, [Duplicated(i, t) for i, t in zip(inits, rest)],
                              {fn.arrays[p]: Duplicated(arrays[p], t)
                               for p, t in tangents.items()})
        launches = [_jvp_launch(fn, call, grid, block, shared)]
    else:
        cotangents, shadows = rest[:outs], rest[outs:]
        call = fn.kernel_call(arguments, [Duplicated(i, c) for i, c in zip(inits, cotangents)],
                              {fn.arrays[p]: Duplicated(arrays[p], s)
                               for p, s in zip(sig.active, shadows)})
        activities = [a if isinstance(a, (Duplicated, Const)) else Const(a) for a in call]
        prepared = GradLaunch(fn.grad_kernel, grid, block, shared, None).prepare(activities)
        launches = [_Launch(prepared.spec, grid, block, shared, prepared.call_args)]
        consume = prepared.spec.consume
        if consume is not None:   # zeroes the output cotangents (zymo.ad.gather)
            consumed_grid, consumed = consume.configured(grid, prepared.call_args)
            launches.append(_Launch(consume, consumed_grid, block, shared, consumed))
    known = {id(a) for a in stand_ins}
    scratch = []
    for launch in launches:
        for value in launch.args:
            if isinstance(value, np.ndarray) and id(value) not in known:
                known.add(id(value))
                scratch.append(value)
    made = Plan(launches, written, scratch, stand_ins)
    _check_writes(sig, made)
    return made


def _jvp_launch(fn, call, grid, block, shared) -> _Launch:
    kinds, args, params = [], [], []
    for value in call:
        if isinstance(value, Duplicated):
            kinds.append("dup")
            args += [value.value, value.shadow]
            params += [param_of_arg(value.value), param_of_arg(value.shadow)]
        else:
            kinds.append("const")
            args.append(value)
            params.append(param_of_arg(value))
    spec = fn.jvp_kernel.specialization(tuple(kinds), tuple(params))
    return _Launch(spec, grid, block, shared, args)


def _check_writes(sig: Signature, made: Plan) -> None:
    """A kernel may write only what the call returns: JAX arrays are immutable."""
    writable = {id(made.stand_ins[k]) for k in made.written} | {id(a) for a in made.scratch}
    reads = {id(made.stand_ins[p]): sig.fn.arrays[p] for p in range(len(sig.fn.arrays))}
    for launch in made.launches:
        for position in launch.spec.array_uses()[0]:
            value = launch.args[position]
            if id(value) not in writable and id(value) in reads:
                name = sig.fn.arguments[reads[id(value)]]
                raise LaunchError(f"{sig.fn.name}: the kernel writes `{name}`, which the JAX "
                                  f"function takes as an input, and JAX arrays are immutable: "
                                  f"name it in outputs (the function then returns it)")


# ---- handlers -------------------------------------------------------------------------------
def target_name(sig: Signature, batch: int, batched: tuple, platform: str) -> str:
    """The custom call target of `sig` on `platform`, its handler compiled and registered
    with XLA on first use. The name digests what the handler runs (the IR, the words), so a
    name always means one program."""
    made = plan(sig)
    launches = _host_launches(sig, made, batched) if platform == "cpu" else \
        _device_launches(sig, made, batched)
    digest = hashlib.sha256(repr((platform, batch, [
        (str(launch.spec.optimized), getattr(h, "words", None), getattr(h, "patches", None),
         getattr(h, "dims", None), getattr(h, "units", None))
        for launch, h in zip(made.launches, launches)])).encode()).hexdigest()[:16]
    name = f"zymo_{sig.fn.name}_{sig.mode}_{digest}"
    if name not in _registered:
        import jax.ffi
        device = _device_context() if platform != "cpu" else None
        address = xla_ffi.build_handler(launches, batch, device)
        jax.ffi.register_ffi_target(name, xla_ffi.capsule(address),
                                    platform="cpu" if platform == "cpu" else "CUDA")
        _registered[name] = address
    return name


_registered: dict = {}


def _patches(made: Plan, launch: _Launch, first_words: list[int], batched: tuple) -> tuple:
    """Where each buffer's address goes in `launch`'s words."""
    where = {id(a): (k, False) for k, a in enumerate(made.stand_ins)}
    for r, k in enumerate(made.written):   # written operands: their (aliased) result
        where[id(made.stand_ins[k])] = (r, True)
    for s, a in enumerate(made.scratch):
        where[id(a)] = (len(made.written) + s, True)
    patches = []
    for value, word in zip(launch.args, first_words):
        if word is None:
            continue
        index, ret = where[id(value)]
        operand = made.written[index] if ret and index < len(made.written) else \
            (None if ret else index)
        stride = made.stand_ins[operand].nbytes if operand is not None and batched[operand] \
            else 0
        patches.append(xla_ffi.Patch(word, index, ret, stride))
    return tuple(patches)


def _host_launches(sig: Signature, made: Plan, batched: tuple) -> list:
    launches = []
    for launch in made.launches:
        compiled = launch.spec.compiled("cpu")
        passed = _pass_args(launch.args, launch.spec.params)
        build, blob, units, _ = compiled.packed(launch.grid, launch.block, passed, launch.shared)
        first, word = [], LAUNCH_WORDS
        for t in compiled.param_types:
            first.append(word if isinstance(t, Array) else None)
            word += words_of(t)
        words = tuple(int(w) for w in np.frombuffer(blob, "<u8"))
        entry = ctypes.cast(build.entry, ctypes.c_void_p).value
        failure = (f"zymo: {sig.fn.name} ({sig.mode}) failed inside the XLA call: an index out "
                   f"of bounds, an exception the kernel raised or a spin-wait past its limit; "
                   f"launch it on NumPy arrays outside jax.jit to see where")
        launches.append(xla_ffi.HostLaunch(entry, words, units,
                                           _patches(made, launch, first, batched), failure))
    return launches


def _device_launches(sig: Signature, made: Plan, batched: tuple) -> list:
    from ..runtime.cuda import driver
    from ..runtime.cuda.launch import describe_config, plan_of, slot_kinds
    device = driver.current_device()
    launches = []
    for launch in made.launches:
        program = launch.spec.compiled("cuda")
        grid, block = normalize_dims(launch.grid, "grid"), normalize_dims(launch.block, "block")
        cuda_plan = plan_of(program, device).for_shape(grid, block)
        if cuda_plan.bounds_sites is not None:
            raise LaunchError(f"{sig.fn.name}: a bounds-checked kernel (boundscheck=True, "
                              f"ZYMO_BOUNDSCHECK or ZYMO_DEBUG) reports its errors to the host "
                              f"after each launch, which a launch inside an XLA program on the "
                              f"GPU cannot do: check it with zymo arrays outside jax.jit, then "
                              f"trace it without bounds checks")
        if not cuda_plan.launch_address:
            raise LaunchError(f"{sig.fn.name}: the driver library (libcuda) cannot be opened by "
                              f"name here, so no compiled code can call cuLaunchKernel: make "
                              f"it loadable (LD_LIBRARY_PATH) to run zymo kernels inside XLA")
        cuda_plan.configure(grid, block, launch.shared, None)   # the limits, checked once
        passed = _pass_args(launch.args, launch.spec.params)
        words, first, slot = [], [], 0
        for value, param in zip(passed, launch.spec.params):
            if isinstance(param.type, Array):
                first.append(slot)
                words += [value.ctypes.data, *value.shape,
                          *[s // value.itemsize for s in value.strides]]
            else:
                first.append(None)
                words += [value.real, value.imag] if param.type.is_complex else [value]
            slot += len(slot_kinds([param]))
        slots = (ctypes.c_uint64 * max(cuda_plan.slot_count, 1))()
        cuda_plan.pack(slots, 0, *words)
        failure = (f"zymo: launching {describe_config(sig.fn.name, grid, block, launch.shared)} "
                   f"inside the XLA call failed: CUresult {{}}")
        launches.append(xla_ffi.DeviceLaunch(
            int(cuda_plan.function), cuda_plan.launch_address, (*grid, *block, launch.shared),
            tuple(slots[:cuda_plan.slot_count]), _patches(made, launch, first, batched),
            failure))
    return launches


def _device_context() -> xla_ffi.DeviceContext:
    import sys

    from ..runtime.cuda import driver
    device = driver.current_device()
    library = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
    set_current = ctypes.cast(library.cuCtxSetCurrent, ctypes.c_void_p).value
    return xla_ffi.DeviceContext(set_current, int(device.context), device.ordinal)
