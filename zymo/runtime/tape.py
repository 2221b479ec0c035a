"""Program-level reverse mode: record kernel launches, then run their derivatives backwards.

    with zm.Tape() as tape:
        for step in range(steps):
            stream_collide[grid, block](src, dst, omega)
            src, dst = dst, src
    tape.backward([(src, dloss)])      # or tape.backward(src, dloss)
    dsrc0 = tape.gradient(first_src)

Recording a launch first copies the arrays the kernel may write (its compiled IR says which):
the tape of the program, kept where the arrays live (host or GPU memory), as Enzyme's split mode
keeps what later launches overwrite. `backward` walks the launches in reverse and runs each
one's derivative (`zm.grad`, every float array Duplicated, everything else Const) on exactly the
inputs its launch saw, without copying them back: an array the launch only reads is passed as
the copy that holds its state then (the copy the tape made before the next launch that wrote
it), an array it updates in place as a scratch copy of its state before the launch, an array
it only writes as itself (the derivative writes it again). Ping-pong buffers cost no copy in
the reverse sweep. Shadows follow Enzyme's semantics across the whole program: a seeded
output's shadow is consumed by the launches that wrote it, and every array's shadow
accumulates d(seeded outputs)/d(its value before the first launch that touched it). The primal
arrays end as the recorded program left them (put back once, at the end).

Arrays are identified by their memory (address, shape, strides, dtype, host or GPU), not by
Python object: a fresh view of the same elements in each launch, or in a seed or a `gradient`
lookup, is the same array. Two arrays that share some memory but are not the same view of it
(`buf` and `buf[:8]`, or a float and an int view of the same bytes) would need their gradients
merged, which the tape does not do: recording them is a LaunchError naming both. Scalar
arguments are constants. NumPy arrays, `zm.DeviceArray`, CuPy arrays and PyTorch tensors are
recorded.

Checkpointed tapes. `zm.Tape(checkpoints=k)` bounds the copies to `k` states of the program (the
arrays some launch overwrites) for long time loops, where the full tape keeps one copy per
launch: recording keeps the launches (kernel, configuration, arguments) and each overwritten
array as it was before the first launch that wrote it: the initial state. `backward`, which knows
the number of launches, runs the binomial schedule of revolve (runtime/revolve.py): it replays
recorded launches from the initial state, keeps up to `k - 1` more states on the way, and
reverses each launch from a replay of it from the nearest kept state, running as few launches
again as `k` states allow (`tape.replayed` counts them). The step of the schedule is one launch,
so a time step made of several launches needs nothing more, and a state can be kept between two
of its launches. A kept state holds the arrays written both before and after it (one first
written later comes back from the initial state; one last written earlier is never put back);
with ping-pong buffers that is both of them.
The count is of states rather than bytes because how big a state is (which arrays the program
overwrites) is known only once it is recorded; `tape.state_nbytes` says it then. Replay assumes
what the full tape assumes of read-only arrays, for every array: that between recorded launches
the program changes recorded arrays only through kernels.
"""
from __future__ import annotations

import inspect
import sys
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from ..diagnostics import LaunchError
from ..ir.traits import OrderDependent
from .aliasing import Layout
from .kernel import RECORDING, check_max_registers
from .revolve import Advance, Drop, Keep, Restore, Reverse, schedule


def _refuse_order_dependent(spec, launch, index: int) -> None:
    """`backward` runs each launch's derivative again, from its inputs: a value that depends
    on how the threads interleave (an atomic's old value) would come out another way than in
    the recorded launch, whose outputs the later launches' cotangents are about."""
    found = getattr(spec, "_order_dependent", False)
    if found is False:
        found = spec._order_dependent = next(
            (op for op in spec.optimized.kernel.walk()
             if op.has_trait(OrderDependent) and any(r.has_uses for r in op.results)), None)
    if found is not None:
        raise LaunchError(f"{found.loc}: zm.Tape cannot record launch {index + 1} "
                          f"({launch.kernel.__name__}): `{found.name}` gives a value that "
                          f"depends on how threads interleave, and backward() runs the launch "
                          f"again, which may order them otherwise\nhint: differentiate this "
                          f"launch alone with zm.grad (its derivative keeps the values its own "
                          f"forward sweep got), or compute the slots without atomics (a prefix "
                          f"sum)")


class _Launch:
    """One recorded launch: the kernel, its configuration, its arguments, and copies of the
    arrays it may write as they were before it ran."""

    def __init__(self, launch, args, memories: tuple, written: tuple, before: dict,
                 reread: tuple = ()):
        self.launch, self.kernel = launch, launch.kernel
        self.memories = memories   # each argument's memory (None for a scalar)
        self.config = (launch.grid, launch.block, launch.stream, launch.shared)
        self.args = args
        self.written = written   # the memory of the arrays it may write
        self.before = before     # argument position -> copy (full tapes only)
        self.reread = reread     # positions in `before` whose memory the launch also reads

    def replay(self) -> None:
        self.launch(*self.args)


class _Buffer:
    """Memory some recorded launch took as an array: the first array object that showed it,
    which argument of which launch that was, and its shadow once made or seeded."""

    def __init__(self, array, memory: _Memory, where: str):
        self.array, self.memory, self.where = array, memory, where
        self.shadow = None


class Tape:
    """Records the kernel launches made inside `with zm.Tape() as tape:`; with `checkpoints=k`,
    keeps at most `k` states of the program and replays launches from them in `backward`.
    `max_registers`: the register cap of the derivatives `backward` launches, as
    `zm.grad(kernel, max_registers=...)` takes it ("auto": timed at the first launch of each,
    then kept for the kernel)."""

    def __init__(self, checkpoints: int | None = None, *,
                 max_registers: int | str | None = None):
        if checkpoints is not None and (not isinstance(checkpoints, int) or checkpoints < 1):
            raise ValueError(f"zm.Tape(checkpoints={checkpoints!r}): give the number of program "
                             f"states to keep, 1 or more (1 keeps only the initial state), or "
                             f"None to keep every launch's inputs")
        check_max_registers(max_registers, auto=True)
        self.checkpoints = checkpoints
        self.max_registers = max_registers
        self.launches: list[_Launch] = []
        self._buffers: dict[_Memory, _Buffer] = {}   # by memory, in order of first appearance
        self._initial: dict[_Memory, object] = {}    # checkpointed: before the first write
        self._writes: dict[_Memory, list[int]] = {}  # memory -> [first, last] launch writing it
        self._grads: dict = {}
        self.replayed = 0        # launches run again by the last backward (checkpointed)
        self.nbytes = 0          # bytes of the program's arrays the tape holds copies of now
        self.peak_nbytes = 0     # ... and the most it held at once (shadows not counted)

    # ---- recording ------------------------------------------------------------------------
    def __enter__(self) -> "Tape":
        RECORDING.append(self)
        return self

    def __exit__(self, *exc) -> None:
        RECORDING.remove(self)

    def record(self, launch, args: tuple) -> None:
        """Called by a launch made while recording, before it runs."""
        kernel = launch.kernel
        try:
            spec = kernel.specialization_for(args)
            written, read = spec.array_uses()
        except Exception:
            return   # the launch itself will report the problem
        _refuse_order_dependent(spec, launch, len(self.launches))
        at = tuple(_memory(a) if _is_array(a) else None for a in args)
        new = self._new_buffers(launch, args, at)     # checked before anything is recorded
        self._buffers.update((b.memory, b) for b in new)
        index, memories = len(self.launches), {}
        for k in sorted(written):
            memories.setdefault(at[k], k)
        before = {}
        if self.checkpoints is None:
            before = {k: self._hold(_copy(args[k])) for k in sorted(written)}
        for memory, k in memories.items():
            if memory not in self._writes:
                self._writes[memory] = [index, index]
                if self.checkpoints is not None:
                    self._initial[memory] = self._hold(_copy(args[k]))
            self._writes[memory][1] = index
        read_memory = {at[k] for k in read}
        reread = tuple(k for k in before if at[k] in read_memory)
        self.launches.append(_Launch(launch, tuple(args), at, tuple(memories), before, reread))

    def _new_buffers(self, launch, args, at: tuple) -> list[_Buffer]:
        """The memory this launch's arrays show for the first time (`at`: each argument's
        memory); a LaunchError where some shares bytes with memory seen before, as another
        view."""
        new: dict[_Memory, _Buffer] = {}
        for position, (a, memory) in enumerate(zip(args, at)):
            if memory is None:
                if _is_foreign_gpu_array(a):   # it would be taken for a constant
                    raise LaunchError(f"zm.Tape: {_where(launch, position, len(self.launches))} "
                                      f"is a {type(a).__name__}; the tape records NumPy arrays, "
                                      f"zm.DeviceArray, CuPy arrays and PyTorch tensors")
                continue
            if memory in self._buffers or memory in new:
                continue
            where = _where(launch, position, len(self.launches))
            for known in (*self._buffers.values(), *new.values()):
                if _share_bytes(memory, known.memory):
                    raise LaunchError(_partial_overlap(where, known.where))
            new[memory] = _Buffer(a, memory, where)
        return list(new.values())

    # ---- the reverse sweep ----------------------------------------------------------------
    def backward(self, seeds, seed=None) -> None:
        """Run the recorded launches' derivatives in reverse. `seeds`: pairs (array, its output
        cotangent), a dict of them (for hashable arrays such as zm.DeviceArray), or one array
        with `seed` the cotangent."""
        if RECORDING and self in RECORDING:
            raise LaunchError("tape.backward() inside `with zm.Tape()`: call it after the block")
        if seed is not None:
            seeds = [(seeds, seed)]
        elif isinstance(seeds, dict):
            seeds = list(seeds.items())
        seeded: dict[_Memory, tuple] = {}    # all checked before any shadow changes
        for array, cotangent in seeds:
            buffer = self._buffer(array, "a seeded array")
            if buffer.memory in seeded:
                raise LaunchError(f"{buffer.where} is seeded twice (two views of the same "
                                  f"memory): give it one cotangent, the sum")
            seeded[buffer.memory] = (buffer, cotangent)
        for buffer, cotangent in seeded.values():
            buffer.shadow = _copy(cotangent)
        # the program's final state of the memory some launch wrote
        after = [(self._buffers[m].array, self._hold(_copy(self._buffers[m].array)))
                 for m in self._writes]
        if self.checkpoints is None:
            self._reverse_full()
        else:
            _Replay(self).run()
        for array, final in after:
            _assign(array, final)
            self._release(final)

    def _reverse_full(self) -> None:
        """The full tape's reverse sweep. `state[m]`: the array holding memory m as it was
        after the launch being reversed, for the memories some later launch wrote (the copy
        made before the earliest of them); the others still hold the program's final state."""
        state: dict = {}
        for entry in reversed(self.launches):
            written = set(entry.written)
            updated = {entry.memories[k]: entry.before[k] for k in entry.reread}
            scratch = {m: self._hold(_copy(before)) for m, before in updated.items()}
            # (the arrays a launch only writes could go as DuplicatedNoNeed, whose derivative
            # stores none of their values; LBM's step derivative ran 2x slower so, on an H100:
            # 188 against 116 ms for the 150 steps, with 19 more global loads per thread)
            args = []
            for a, m in zip(entry.args, entry.memories):
                if m is None or (m in written and m not in scratch):
                    args.append(a)     # a scalar, or an array the launch only writes
                else:
                    args.append(scratch[m] if m in scratch else state.get(m, a))
            self._reverse(entry, args)
            for copy in scratch.values():
                self._release(copy)
            for k, before in entry.before.items():
                state[entry.memories[k]] = before

    def _reverse(self, entry: _Launch, args=None) -> None:
        """The launch's derivative, from the state its launch saw: in its own arrays (which
        the caller put back) or in `args`, arrays holding that state in place of them."""
        from ..ad import Duplicated
        args = entry.args if args is None else args
        activities = [Duplicated(a, self._shadow(own)) if _is_float_array(own) else a
                      for a, own in zip(args, entry.args)]
        grid, block, stream, shared = entry.config
        self.derivative(entry.kernel)[grid, block, stream, shared](*activities)

    def derivative(self, kernel):
        """The `zm.grad` of `kernel` that `backward` launches (its `last` specialization, its
        `tuning` under max_registers="auto"): one per kernel, whose compiled specializations
        serve all its launches (`kernel.on(backend)` makes a new view of the same kernel at
        each call: the views share their specializations, and so here their derivative)."""
        from .grad import grad
        key = (id(kernel._specs), kernel.backend, kernel.max_registers, kernel.boundscheck,
               kernel.fastmath)
        if key not in self._grads:   # the kernel kept with it keeps the id taken
            self._grads[key] = (kernel, grad(kernel, max_registers=self.max_registers))
        return self._grads[key][1]

    @property
    def state_nbytes(self) -> int:
        """Bytes of the arrays the recorded launches overwrite: the most one kept state holds."""
        return sum(_nbytes(m) for m in self._writes)

    def _hold(self, copy):
        self.nbytes += _nbytes(_memory(copy))
        self.peak_nbytes = max(self.peak_nbytes, self.nbytes)
        return copy

    def _release(self, copy) -> None:
        self.nbytes -= _nbytes(_memory(copy))

    def _buffer(self, array, what: str) -> _Buffer:
        """The recorded memory `array` shows (any view object of exactly that memory)."""
        if not _is_array(array):
            raise LaunchError(f"{what} is not an array but {type(array).__name__}")
        memory = _memory(array)
        buffer = self._buffers.get(memory)
        if buffer is not None:
            return buffer
        for known in self._buffers.values():
            if _share_bytes(memory, known.memory):
                raise LaunchError(f"{what} shares memory with {known.where} but is another "
                                  f"view of it (its offset, shape, strides or dtype differ): "
                                  f"pass a view of exactly the memory the launch took")
        raise LaunchError(f"{what} was never passed to a recorded launch: pass the array the "
                          f"kernels took (or any view of exactly its memory)")

    def _shadow(self, array, what: str = "an argument"):
        buffer = self._buffer(array, what)
        if buffer.shadow is None:
            buffer.shadow = _zeros_like(buffer.array)
        return buffer.shadow

    def gradient(self, array):
        """The shadow of `array` (or of any view of exactly its memory) after `backward`
        (zeros if nothing reached it)."""
        return self._shadow(array, "this array")

    def gradients(self) -> list[tuple]:
        """(array, gradient) for every float array the recorded launches took, in order of
        first appearance (the array object that first showed its memory)."""
        return [(b.array, self._shadow(b.array)) for b in self._buffers.values()
                if _is_float_array(b.array)]


class _Replay:
    """Carries out a checkpointed tape's schedule. It knows which state the arrays hold: the
    one before launch `position`, except the arrays in `dirty`, which the last derivative
    wrote again; putting a kept state back assigns only the arrays that can differ from it."""

    def __init__(self, tape: Tape):
        self.tape = tape
        self.kept: dict[int, dict] = {0: tape._initial}   # step -> memory -> copy
        self.position, self.dirty = len(tape.launches), set()
        self.actions = {Advance: self.advance, Keep: self.keep, Restore: self.restore,
                        Reverse: self.reverse, Drop: self.drop}

    def run(self) -> None:
        tape = self.tape
        tape.replayed = 0
        for action in schedule(len(tape.launches), tape.checkpoints):
            self.actions[type(action)](action)

    def advance(self, action: Advance) -> None:
        for entry in self.tape.launches[action.start:action.stop]:
            entry.replay()
        self.tape.replayed += action.stop - action.start
        self.position = action.stop

    def keep(self, action: Keep) -> None:
        """Copies the arrays written both before and after the step: the others are in the
        initial state, or no launch after the step writes them (nor does any restore)."""
        tape, step = self.tape, action.step
        self.kept[step] = {m: tape._hold(_copy(tape._buffers[m].array))
                           for m, (first, last) in tape._writes.items() if first < step <= last}

    def restore(self, action: Restore) -> None:
        tape, step = self.tape, action.step
        changed = set(self.dirty)
        for entry in tape.launches[step:self.position]:
            changed.update(entry.written)
        for m in changed:
            source = tape._initial if tape._writes[m][0] >= step else self.kept[step]
            _assign(tape._buffers[m].array, source[m])
        self.position, self.dirty = step, set()

    def reverse(self, action: Reverse) -> None:
        entry = self.tape.launches[action.step]
        self.tape._reverse(entry)
        self.dirty = set(entry.written)

    def drop(self, action: Drop) -> None:
        for copy in self.kept.pop(action.step).values():
            self.tape._release(copy)


# ---- arrays by memory --------------------------------------------------------------------------
_TOO_HARD = getattr(np, "exceptions", np).TooHardError   # np.exceptions: NumPy 1.25 and later


class _Memory(NamedTuple):
    """The elements an array shows: equal for two array objects exactly when they are the
    same view of the same memory."""

    space: tuple      # ("host",) or ("gpu", device ordinal)
    data: int         # address of element 0
    shape: tuple
    strides: tuple    # in bytes
    dtype: str
    itemsize: int


def _memory(a) -> _Memory:
    kind = _kind(a)
    if kind == "numpy":
        return _Memory(("host",), a.__array_interface__["data"][0], a.shape, a.strides,
                       a.dtype.str, a.itemsize)
    if kind == "torch" and not a.is_cuda:
        item = a.element_size()
        return _Memory(("host", str(a.device)), a.data_ptr(), tuple(a.shape),
                       tuple(s * item for s in a.stride()), str(a.dtype), item)
    from .cuda.arrays import array_info
    info = array_info(a)
    item = info.dtype.itemsize
    return _Memory(("gpu", _ordinal(a)), info.data, tuple(info.shape),
                   tuple(s * item for s in info.strides), info.dtype.str, item)


def _ordinal(a) -> int | None:
    """The GPU an array lives on (DeviceArray, CuPy and PyTorch name its number differently)."""
    device = getattr(a, "device", None)
    for name in ("ordinal", "id", "index"):
        number = getattr(device, name, None)
        if isinstance(number, int):
            return number
    return None


def _nbytes(m: _Memory) -> int:
    return int(np.prod(m.shape, dtype=np.int64)) * m.itemsize


def _span(m: _Memory) -> tuple[int, int]:
    return Layout(m.data, m.strides, m.shape, m.itemsize).span


def _share_bytes(m: _Memory, n: _Memory) -> bool:
    """Whether some byte lies in an element of both (interleaved views such as `a[::2]` and
    `a[1::2]` do not share any)."""
    if m.space != n.space or 0 in m.shape or 0 in n.shape:
        return False
    (m_low, m_high), (n_low, n_high) = _span(m), _span(n)
    if m_high <= n_low or n_high <= m_low:
        return False
    try:
        return bool(np.shares_memory(_at(m), _at(n), max_work=1 << 20))
    except _TOO_HARD:
        return True    # undecided: assume they do


def _at(m: _Memory) -> np.ndarray:
    """A NumPy array at `m`'s address and layout, for NumPy's exact overlap test, which does
    arithmetic on addresses and never reads them (GPU addresses included). It is made, as
    `np.lib.stride_tricks.as_strided` makes its arrays, through the array interface."""
    interface = {"data": (m.data, True), "shape": m.shape, "strides": m.strides,
                 "typestr": f"|V{m.itemsize}", "version": 3}
    return np.asarray(SimpleNamespace(__array_interface__=interface))


def _where(launch, position: int, number: int) -> str:
    """Names an argument of a launch, for messages (`number`: the launch's, from 0)."""
    kernel = launch.kernel
    try:
        name = list(inspect.signature(kernel.py_func).parameters)[position]
    except (TypeError, ValueError, IndexError):
        name = str(position)
    return f"argument `{name}` of launch {number + 1} (`{kernel.__name__}`)"


def _partial_overlap(where: str, other: str) -> str:
    return (f"zm.Tape: {where} shares memory with {other}, but is another view of it (their "
            f"offset, shape, strides or dtype differ); the tape follows gradients only through "
            f"exactly equal views, so the gradients would be wrong. Pass the same view to "
            f"both (e.g. the whole array, or `buf[:8]` each time), or copy one into an array "
            f"of its own")


def _is_foreign_gpu_array(a) -> bool:
    """A GPU array of a kind the tape cannot copy (numba's, a hand-made view)."""
    from .cuda.arrays import is_gpu_array
    return not isinstance(a, (int, float, complex, bool, np.generic)) and is_gpu_array(a)


# ---- arrays of the supported kinds -------------------------------------------------------------
def _kind(a) -> str:
    if isinstance(a, np.ndarray):
        return "numpy"
    module = type(a).__module__.split(".")[0]
    if module == "zymo":
        return "device"
    if module in ("cupy", "torch"):
        return module
    return ""


def _is_array(a) -> bool:
    return _kind(a) != ""


def _is_float_array(a) -> bool:
    if not _is_array(a):
        return False
    dtype = a.dtype
    if _kind(a) == "torch":
        return dtype.is_floating_point
    return np.dtype(dtype).kind == "f"


def _copy(a):
    kind = _kind(a)
    if kind == "numpy":
        return a.copy()
    if kind == "device":
        from .cuda import device_array
        return device_array(a.shape, a.dtype).copy_from_device(a)
    if kind == "torch":
        return a.clone()
    if kind == "cupy":   # a copy through cudaMemcpy: a.copy() runs a slower copy kernel
        out = sys.modules["cupy"].empty_like(a)
        out[...] = a
        return out
    if np.ndim(a) == 0:
        return a
    raise LaunchError(f"zm.Tape records NumPy arrays, zm.DeviceArray, CuPy arrays and PyTorch "
                      f"tensors, not {type(a).__name__}")


def _assign(a, value) -> None:
    kind = _kind(a)
    if kind == "device":
        a.copy_from_device(value)
    elif kind == "torch":
        a.copy_(value)
    else:
        a[...] = value


def _zeros_like(a):
    kind = _kind(a)
    if kind == "numpy":
        return np.zeros_like(a)
    if kind == "device":
        from .cuda import device_array
        return device_array(a.shape, a.dtype)
    return sys.modules[kind].zeros_like(a)
