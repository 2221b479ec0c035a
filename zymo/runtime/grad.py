"""`zm.grad(kernel)`: the reverse-mode derivative of a kernel, launched like the kernel.

Each argument carries an activity (`zm.Const`, `zm.Active`, `zm.Duplicated`,
`zm.DuplicatedNoNeed`; none means Const). The derivative kernel takes the primal arguments with
each shadow right after its array and, for each Active scalar, a one-element array receiving its
adjoint summed over all threads; the launch allocates those and returns their values.

Variants, compiled lazily per signature: plain (non-atomic) shadow updates assume that the launch
has one thread along every axis the kernel's indexing does not use (and, for periodic indices
`(i + c) % n`, at most n threads along that axis), and recomputing loads assumes that distinct
array arguments do not overlap; a launch that breaks either gets the conservative variant.
"""
from __future__ import annotations

import numpy as np

from ..ad import Activity, activity_of, derivation_switches, differentiate
from ..ad.gather import coarsening
from ..diagnostics import CompileError, Diagnostic, LaunchError
from ..frontend import Param
from ..ir.traits import Conditional, GridSync
from ..ir.types import Array, i32
from ..lang.derivatives import Gradient
from . import aliasing
from .compile import Job, compile, derived
from .autotune import Autotuner, capturing
from .derivative import DerivativeKernel, DerivativeSpecialization, run_specialization, \
    run_with_consumer
from .cuda.arguments import flatten_arg, is_composite
from .kernel import Kernel, Specialization, _backend_of, check_max_registers, \
    param_of_arg, param_of_spec, separate_view, with_max_registers
from .cuda.arrays import array_info, is_gpu_array


# The register cap of derivative kernels on the GPU unless the kernel or the call names one.
# 255 lets ptxas use what it needs: with no `.maxnreg` at all it aims at occupancy and gave
# the dense layer's derivative 56 registers (4.5x the kernel) and LBM's 128 (8.5x); with 255,
# 106 and 190 (3.4x, 4.9x). A cap of 128 once helped the dense layer (7.4x -> 4.1x) before its
# weight cotangents went through a shared tile; at 128 LBM runs at 6.3x, at 168 at 7.3x
# (bench/results/grad-overhead-h200.md). The float64 Euler flux prefers 128 (3.8x against
# 4.2x): `zm.grad(kernel, max_registers=128)`.
DERIVATIVE_REGISTERS = 255


class GradKernel(DerivativeKernel):
    """The reverse-mode derivative of a kernel; `dk[grid, block](*activities)` launches it."""

    mode = "grad"
    example = "zm.Active(zm.f32), zm.Duplicated(x, dx)"

    def __init__(self, kernel: Kernel, autotune: Autotuner | None = None):
        if isinstance(kernel, Kernel) and kernel.max_registers is None:
            kernel = with_max_registers(kernel, DERIVATIVE_REGISTERS)
        # max_registers="auto": the cap of each launch signature picked by timing (autotune.py)
        self.autotune = autotune
        super().__init__(kernel)
        # prepared CUDA launches by what decided them (GradLaunch._read), shared like the specs
        self.ready: dict = self.kernel._derived.setdefault(self.family() + ("launches",), {})

    def family(self) -> tuple:
        """Tuned derivatives ("auto") keep their preparations apart from a fixed cap's: a
        prepared launch runs the build its tuning chose."""
        return super().family() + (() if self.autotune is None else
                                   ("auto", self.autotune.candidates))

    def _view(self, kernel: Kernel) -> "GradKernel":
        return GradKernel(kernel, self.autotune)

    @property
    def tuning(self) -> dict:
        """What `max_registers="auto"` measured, by launch signature, grid and block: each an
        `autotune.Tuning` (caps built and their registers, those skipped, median ms of those
        timed, the cap chosen); empty for a fixed cap or before a GPU launch."""
        return dict(self.autotune.records) if self.autotune is not None else {}

    def retune(self) -> None:
        """Under max_registers="auto": forget the caps chosen for this kernel and the launches
        prepared with them, so that the next launch of each signature times them again (after
        the GPU's clocks or its other work changed)."""
        if self.autotune is not None:
            self.autotune.forget()
            self.ready.clear()

    def resolved(self, spec, backend: str, grid, block, args: list, shared: int, stream):
        """The specialization a launch of `spec` runs: `spec`, or under "auto" the build of
        the cap timed fastest for this launch shape (tuned at its first launch)."""
        if self.autotune is None:
            return spec
        spec = self.autotune.resolve(spec, backend, grid, block, args, shared, stream)
        self.last = spec
        return spec

    def _launcher(self, grid, block, shared, stream) -> "GradLaunch":
        return GradLaunch(self, grid, block, shared, stream)

    def specialize(self, *types_or_args, noalias: bool = True,
                   plain_updates: bool = True) -> "GradSpecialization":
        """The derivative for these argument activities (wrapping types or example values):
        `zm.grad(k).specialize(zm.Active(zm.f32), zm.Duplicated(xtype, xtype), ...)`."""
        kinds, params = [], []
        for item in types_or_args:
            activity = activity_of(item)
            kinds.append(activity.kind)
            params.extend(param_of_spec(v) for v in activity.values())
        if kinds and "active" in kinds:
            params = _active_params(kinds, params)
        return self.specialization(tuple(kinds), tuple(params), noalias, plain_updates)

    def specialization(self, kinds, params, noalias, plain_updates) -> "GradSpecialization":
        key = (kinds, tuple(p.key() for p in params), noalias, plain_updates,
               derivation_switches())
        return self._cached(key, lambda: GradSpecialization(self.kernel, kinds, params, noalias,
                                                            plain_updates))


def _active_params(kinds, params):
    """An Active scalar's adjoint travels in a one-element array of its type."""
    out, position = [], 0
    for kind in kinds:
        count = 2 if kind in ("dup", "dup_noneed") else 1
        group = list(params[position:position + count])
        position += count
        out.extend(group)
        if kind == "active":
            out.append(Param("array", Array(group[0].type, 1, "global", "C")))
    return out


# The block-private shadow copy and tile of a derivative (zymo/ad/private.py) take 34 KB of
# shared memory per block; left to itself the driver sizes the shared part of the unified L1 /
# shared memory for the most resident blocks, which left the dense layer's derivative about
# 60 KB of L1 for its threads' rows and accumulators (hit rate 45%, the primal's 95%).
# Preferring at most this percentage of the maximum shared memory for derivatives whose only
# shared memory is theirs keeps L1 for the kernel's data at one block fewer: dense layer
# 2.84x -> 2.43x on an H100, 2.65x -> 2.55x on an H200 (sweep in grad-overhead-h100.md;
# measured on that kernel, the only benchmark with private shadows).
PRIVATE_CARVEOUT = 64


class GradSpecialization(DerivativeSpecialization):
    """One derivative signature: activities (a shadow or an adjoint array after each argument
    but a Const), argument types and the variant's assumptions."""

    steps = derived("reverse")

    def __init__(self, kernel: Kernel, kinds, params, noalias: bool, plain_updates: bool):
        super().__init__(kernel, kinds, params, lambda kind: 0 if kind == "const" else 1)
        self.noalias, self.plain_updates = noalias, plain_updates
        compile(self, "derive")   # now: a launch reads the assumptions and tapes it records

    def derive(self, primal_ir):
        _check_grid_syncs(primal_ir)
        shadows = [extra[0].type if extra else None for extra in self.extras]
        made = differentiate(primal_ir.clone(), list(self.kinds), shadows, self.noalias,
                             self.plain_updates)
        self.assumptions, self.tapes = made.assumptions, made.tapes
        self.local_tape_bytes = made.local_tape_bytes
        self.interleaved = made.interleaved   # loops reversed iteration by iteration
        # see PRIVATE_CARVEOUT; None: the driver's choice
        self.shared_carveout = PRIVATE_CARVEOUT if made.private_shared_only else None
        # global tapes follow the other arguments; the launch allocates them
        self.params = tuple(self.params) + tuple(
            Param("array", Array(t.dtype, 1, "global", "C")) for t in self.tapes)
        self.consume = None if made.consume is None else \
            _Consume(self.kernel, self.params, made.consume)
        return made.module


def _check_grid_syncs(module) -> None:
    """A thread that skips a grid.sync() of the primal (an early return) has finished there,
    but not in the derivative, whose reverse sweep and reductions come after: it would leave
    the others waiting at the barrier. Refused until the transform can keep such threads."""
    for op in module.kernel.walk():
        if op.has_trait(GridSync):
            parent = op.parent_op
            while parent is not None and not parent.has_trait(Conditional):
                parent = parent.parent_op
            if parent is not None:
                raise CompileError(Diagnostic(
                    op.loc, "zm.grad of a kernel whose threads may skip this grid.sync() "
                    "(it is under an if, or after a return some threads take)",
                    "let every thread reach every grid.sync(): guard the work instead of "
                    "returning early (`if i < n:` around the loads and stores only)"))


class _Consume(Specialization):
    """The kernel a gathering derivative's launch runs right after it, with the same
    arguments: it zeroes the output cotangents (`zymo.ad.gather`)."""

    def __init__(self, kernel: Kernel, params, module):
        # C: see gather.coarsening; its IR is made: it starts at the optimizer
        Job.__init__(self, kernel, tuple(params) + (Param("value", i32),), {"frontend": module})

    def configured(self, grid, args) -> tuple:
        """(grid, arguments) of the launch after a derivative launched on `grid` with `args`:
        each thread does the work of C of the derivative's, C blocks along x apart."""
        c = coarsening(grid[0])
        return (grid[0] // c, *grid[1:]), [*args, np.int32(c)]

    def run(self, backend: str, grid, block, args, shared: int, stream) -> None:
        grid, args = self.configured(grid, args)
        run_specialization(self, backend, grid, block, args, shared, stream)


class GradLaunch:
    def __init__(self, grad: GradKernel, grid, block, shared: int, stream):
        self.grad, self.grid, self.block = grad, grid, block
        self.shared, self.stream = shared, stream

    def __call__(self, *args):
        activities = [activity_of(a) for a in args]
        kernel = self.grad.kernel
        if kernel.captured_arrays() or any(is_composite(a.value) for a in activities):
            # tuples and record arrays go as their leaves, each with the activity of the
            # whole (a record's shadow is a record array of the same dtype), captured GPU
            # arrays after them as constants: the derivative of the flattened kernel
            structure = tuple(param_of_arg(a.value) for a in activities)
            view = kernel.flattened(structure)
            flat = view.__dict__.get("_grad") or view.__dict__.setdefault("_grad",
                                                                        self.grad._view(view))
            return flat[self.grid, self.block, self.stream, self.shared](
                *[leaf for a in activities for leaf in _leaf_activities(a)],
                *kernel.captured_arrays())
        read = self._read(activities)
        if read is not None:
            key, words, arrays = read
            ready = self.grad.ready.get(key)
            if ready is None or not ready.apart(words):
                ready = self.grad.ready.get((key, tuple(words[p] for p, _ in arrays)))
            if ready is not None and ready.current():
                ready.plan.run(ready.state, words)
                self.grad.last = ready.spec
                return ()
        call = self.prepare(activities)
        result = call.run(self.grid, self.block, self.shared, self.stream)
        if read is not None and call.reusable() and not self._tuning_postponed():
            ready = self.grad.ready
            if len(ready) >= READY_LIMIT:
                ready.clear()
            if call.spec.noalias:
                # prepared for arrays apart: any launch of this layout whose arrays are apart
                # too decides the same (a tape's fresh copies, new tensors at each step)
                spans = tuple((p, *_relative_span(v)) for p, v in arrays)
                ready[key] = Ready(call, self.grid, self.block, self.shared, self.stream,
                                   spans)
            else:   # overlapping arrays: only these pointers
                ready[(key, tuple(words[p] for p, _ in arrays))] = Ready(
                    call, self.grid, self.block, self.shared, self.stream)
        return result

    def _tuning_postponed(self) -> bool:
        """Under max_registers="auto", a launch in a stream capture runs the largest cap
        untimed: the first launch outside a capture tunes, so this one is not kept."""
        return self.grad.autotune is not None and capturing(self.stream)

    def _read(self, activities) -> tuple | None:
        """(key, the launch's words, (position of the pointer word, array) per array) of a
        CUDA launch of GPU arrays; None for other launches. `prepare` decides from the grid,
        the block, the stream, the activities, the argument types, every word but those of
        float scalars and pointers (extents and strides for aliasing and shadows, integers
        for the launch conditions and tape sizes): the key; and from whether the arrays'
        bytes meet, which the pointers decide (`Ready.apart`)."""
        if self.grad.kernel.backend not in (None, "cuda"):
            return None
        from .cuda.launch import describe_args
        values = [v for a in activities for v in a.values()]
        described = describe_args(values)
        if described is None:
            return None
        types, words, starts = described
        ends = starts[1:] + [len(words)]
        identity, arrays = [], []
        for v, a, b in zip(values, starts, ends):
            if isinstance(v, (float, complex, np.floating, np.complexfloating)):
                identity.append(None)
            elif is_gpu_array(v):    # its words: the pointer, the extents, the strides
                identity.append(tuple(words[a + 1:b]))
                arrays.append((a, v))
            else:
                identity.append(tuple(words[a:b]))
        if not arrays:
            return None
        from .cuda.streams import as_stream
        key = (self.grid, self.block, self.shared, int(as_stream(self.stream)),
               tuple(a.kind for a in activities), tuple(types), tuple(identity),
               derivation_switches())
        return key, words, tuple(arrays)

    def prepare(self, activities: list, plain_updates: bool = True) -> "GradCall":
        """The derivative this launch runs for these (flat) activities: the variant its
        arguments allow (`plain_updates=False`: the one with every shadow update atomic and no
        block-private copies), with the adjoint arrays of Active scalars and the tapes
        allocated."""
        kinds = tuple(a.kind for a in activities)
        for index, activity in enumerate(activities):
            if activity.kind == "batch_dup":
                raise LaunchError("zm.BatchDuplicated is forward mode: use zm.jvp(kernel, "
                                  "width=W)")
            if activity.kind == "active" and not isinstance(activity.value, (float, np.floating)):
                raise LaunchError(f"argument {index}: zm.Active takes a float scalar, not "
                                  f"{type(activity.value).__name__}")
        flat = [v for a in activities for v in a.values()]
        kernel = self.grad.kernel
        backend = kernel.backend or _backend_of(flat)
        _check_shadows(activities)
        outs = []
        call_args = []
        for activity in activities:
            call_args.extend(activity.values())
            if activity.kind == "active":
                out = _zeros(backend, 1, param_of_arg(activity.value).type.dtype)
                outs.append(out)
                call_args.append(out)
        params = tuple(param_of_arg(v) for v in call_args)
        overlapping = aliasing.overlapping(flat)
        folded = any(aliasing.self_overlapping(v) for v in flat)
        if folded or overlapping:
            # shadows shared alike (one array passed twice with its shadow): every shadow
            # update atomic, as for an array folded onto itself; other sharing: LaunchError
            arguments = [(a.value, a.values()[1:] if a.kind in ("dup", "dup_noneed") else ())
                         for a in activities]
            folded |= aliasing.check_launch(kernel, arguments).shadows_shared
        noalias = not folded and not overlapping
        plain_updates = plain_updates and not folded
        spec = self.grad.specialization(kinds, params, noalias, plain_updates)
        primals = [a.value for a in activities]
        if plain_updates and not spec.assumptions.hold(self.grid, self.block,
                                                    lambda source: _on_host(source, primals)):
            spec = self.grad.specialization(kinds, params, noalias, False)
        call_args += _tapes(spec, backend, self.grid, self.block, primals)
        spec = self.grad.resolved(spec, backend, self.grid, self.block, call_args, self.shared,
                                  self.stream)
        return GradCall(spec, backend, call_args, outs)


class GradCall:
    """A derivative launch made ready: its specialization, backend and arguments (the
    activities' values, the Active scalars' adjoint arrays `outs`, then the tapes)."""

    def __init__(self, spec: GradSpecialization, backend: str, call_args: list, outs: list):
        self.spec, self.backend, self.call_args, self.outs = spec, backend, call_args, outs

    def reusable(self) -> bool:
        """Whether a launch with the same words can run the same program without `prepare`:
        on CUDA, one kernel, no arrays allocated per launch (tapes, Active adjoints)."""
        return self.backend == "cuda" and not self.outs and not self.spec.tapes and \
            self.spec.consume is None

    def run(self, grid, block, shared: int, stream) -> tuple:
        """Launch it (and the consuming kernel of a gathering derivative); the adjoints of the
        Active scalars."""
        run_with_consumer(self.spec, self.backend, grid, block, self.call_args, shared, stream)
        return tuple(host_scalar(out) for out in self.outs)


# prepared launches a derivative keeps (`GradKernel.ready`) before it forgets them all
READY_LIMIT = 64


class Ready:
    """A prepared CUDA derivative launch: the plan and configuration that the launches with
    the same key run, with their own words, where their arrays are apart as its were, or with
    the same pointers (warm `zm.grad` launches, e.g. each step of zm.Tape's backward, cost
    about what the kernel's own launch does).
    `spans`: (position of the pointer word, low, high byte offsets from it) per array, where
    the preparation assumed the arrays apart; None where it took these pointers only."""

    def __init__(self, call: GradCall, grid, block, shared: int, stream,
                 spans: tuple | None = None):
        from .cuda import driver
        from .cuda.launch import _three, plan_of
        grid, block = _three(grid), _three(block)
        self.spec = call.spec
        self.plan = plan_of(call.spec.compiled("cuda"), driver.current_device()).for_shape(
            grid, block)
        self.state = self.plan.configure(grid, block, shared, stream)
        self.spans = spans

    def apart(self, words) -> bool:
        """Whether a launch with these words may run this preparation: it was made for arrays
        apart, and these arrays are apart too (no two byte ranges meet, as
        `aliasing.overlapping` tests; the key fixed their extents, strides and types)."""
        if self.spans is None:
            return False
        ranges = sorted((words[p] + low, words[p] + high) for p, low, high in self.spans
                        if high > low)
        return all(later[0] >= earlier[1] for earlier, later in zip(ranges, ranges[1:]))

    def current(self) -> bool:
        """Whether the device it was prepared on is still the current one."""
        from .cuda import driver
        return self.plan.device is driver._current and \
            self.state[2].epoch == driver.DEVICE_EPOCH.value


def _relative_span(array) -> tuple[int, int]:
    """The bytes an array covers, [low, high), from its data pointer."""
    found = aliasing.layout(array)
    low, high = found.span
    return low - found.origin, high - found.origin


def host_scalar(out):
    """The value of a one-element array, on the host or the GPU."""
    host = out if isinstance(out, np.ndarray) else out.copy_to_host()
    return host[0]


def _zeros(backend: str, size: int, dtype):
    out = np.zeros(size, dtype)
    if backend == "cuda":
        from .cuda.arrays import to_device
        out = to_device(out)
    return out


def _check_shadows(activities: list[Activity]) -> None:
    for index, activity in enumerate(activities):
        if activity.kind not in ("dup", "dup_noneed"):
            continue
        primal, shadow = activity.value, activity.shadow
        p, s = _shape_dtype(primal), _shape_dtype(shadow)
        if p is None:
            raise LaunchError(f"argument {index}: zm.Duplicated takes an array and its shadow; "
                              f"for a scalar use zm.Active")
        if p != s:
            raise LaunchError(f"argument {index}: the shadow is {s[1]}{list(s[0])}, the array "
                              f"{p[1]}{list(p[0])}: give a shadow of the same shape and dtype")


def _shape_dtype(value):
    if isinstance(value, np.ndarray):
        return value.shape, value.dtype
    info = array_info(value) if is_gpu_array(value) else None
    return (tuple(info.shape), info.dtype) if info is not None else None


def tape_bytes_per_thread(spec, primals: list) -> int:
    """Bytes of tape each thread of a launch with these primal arguments writes: per-thread
    tapes plus its share of the global ones."""
    from ..ad.tape import host_value
    total = spec.local_tape_bytes
    for tape in spec.tapes:
        slots = host_value(tape.slots, lambda source: _on_host(source, primals))
        total += (slots or 0) * tape.dtype.bits // 8
    return total


def _tapes(spec, backend: str, grid, block, primals: list) -> list:
    """The global tapes of this launch: (iterations of the taped loop nest) x (threads)."""
    if not spec.tapes:
        return []
    from ..ad.tape import host_value
    threads = int(np.prod(grid)) * int(np.prod(block))
    out = []
    for tape in spec.tapes:
        slots = host_value(tape.slots, lambda source: _on_host(source, primals))
        if slots is None:
            raise LaunchError("a global tape's size could not be computed from the arguments")
        size = max(1, slots * threads)
        dtype = tape.dtype.dtype
        if backend == "cuda":
            from .cuda.arrays import device_array
            out.append(device_array(size, dtype))
        else:
            out.append(np.empty(size, dtype))
    return out


def _on_host(source: tuple, primals: list):
    """A kernel-invariant integer the derivative's launch conditions name (see
    `zymo.passes.indexing.Wrap`), from the primal arguments; None if it cannot be read."""
    kind = source[0]
    if kind == "const":
        return source[1]
    value = primals[source[1]]
    if kind == "arg":
        return int(value) if isinstance(value, (int, np.integer)) else None
    shape = _shape_dtype(value)
    return None if shape is None else int(shape[0][source[2]])


def grad(kernel, argnums=0, *, max_registers: int | str | None = None):
    """The reverse-mode derivative of a `@zm.kernel` (see `GradKernel`); `max_registers` caps
    the derivative kernel's registers per thread on the GPU (default: the kernel's own cap, else
    DERIVATIVE_REGISTERS); "auto" times the caps of `autotune.CANDIDATES` at the first GPU
    launch of each signature and launch shape, on scratch copies of the arrays it writes and
    on the launch's stream, and keeps the fastest (`dk.tuning` says what was measured; a
    launch inside a CUDA stream capture runs the largest cap untimed; nothing to tune on the
    CPU and the interpreter). Of a `@zm.func` device function returning one float:
    `zm.grad(f, argnums)(*args)` inside kernels gives d f / d args[argnums], like
    `jax.grad`."""
    if not isinstance(kernel, Kernel):
        if callable(kernel):
            return Gradient(kernel, argnums)
        raise TypeError(f"zm.grad takes a @zm.kernel or a @zm.func, not {kernel!r}")
    if argnums != 0:
        raise TypeError("zm.grad(kernel) takes no argnums: say what to differentiate with "
                        "zm.Active / zm.Duplicated at the launch")
    if isinstance(max_registers, str) and max_registers == "auto":
        # a view of its own (the flattened kernels of composite arguments hang on it), whose
        # specializations are those of the largest candidate's; the caps chosen are the
        # kernel's, so a later zm.grad(kernel, max_registers="auto") (each zm.Tape's) finds them
        tuner = Autotuner()
        view = separate_view(with_max_registers(kernel, tuner.candidates[0]))
        return GradKernel(view, view._derived.setdefault(("autotune", tuner.candidates), tuner))
    check_max_registers(max_registers, auto=True)
    return GradKernel(with_max_registers(kernel, max_registers))


grad.zymo_transform = "grad"


def _leaf_activities(activity) -> list:
    """The activities of a composite argument's leaves: the whole's, leaf by leaf."""
    if activity.kind == "const":
        return flatten_arg(activity.value)
    leaves = [flatten_arg(value) for value in activity.values()]
    if any(len(values) != len(leaves[0]) for values in leaves):
        raise LaunchError(f"{activity!r}: the shadow is not shaped like the value (a record "
                          f"array's shadow is a record array of the same dtype)")
    return [type(activity)(*values) for values in zip(*leaves)]
