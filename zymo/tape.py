"""Program-level reverse mode: record kernel launches, then run their derivatives backwards.

    with zm.Tape() as tape:
        for step in range(steps):
            stream_collide[grid, block](src, dst, omega)
            src, dst = dst, src
    tape.backward([(src, dloss)])      # or tape.backward(src, dloss)
    dsrc0 = tape.gradient(first_src)

Recording a launch first copies the arrays the kernel may write (its compiled IR says which):
the tape of the program, kept where the arrays live (host or GPU memory), as Enzyme's split mode
keeps what later launches overwrite. `backward` walks the launches in reverse; before and after
each one's derivative (`zm.grad`, every float array Duplicated, everything else Const) it puts
those arrays back as they were before that launch, so each derivative sees exactly the inputs
its launch saw (ping-pong buffers and in-place updates included). Shadows follow Enzyme's
semantics across the whole program: a seeded output's shadow is consumed by the launches that
wrote it, and every array's shadow accumulates d(seeded outputs)/d(its value before the first
launch that touched it). The primal arrays end as the recorded program left them.

Arrays are identified by the Python objects passed to the launches (a fresh view per launch is
a different array). Scalar arguments are constants. NumPy arrays, `zm.DeviceArray`, CuPy arrays
and PyTorch tensors are recorded.
"""
from __future__ import annotations

import sys

import numpy as np

from .diagnostics import LaunchError
from .runtime.kernel import RECORDING


class _Launch:
    """One recorded launch: the kernel, its configuration, its arguments, and copies of the
    arrays it may write as they were before it ran."""

    def __init__(self, launch, args, before: dict):
        self.kernel = launch.kernel
        self.config = (launch.grid, launch.block, launch.stream, launch.shared)
        self.args = args
        self.before = before     # argument position -> copy


class Tape:
    """Records the kernel launches made inside `with zm.Tape() as tape:`."""

    def __init__(self):
        self.launches: list[_Launch] = []
        self._shadows: dict[int, tuple] = {}    # id(array) -> (array, shadow)
        self._order: list[int] = []              # arrays by first appearance

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
            written, _ = kernel.specialization_for(args).array_uses()
        except Exception:
            return   # the launch itself will report the problem
        before = {k: _copy(args[k]) for k in sorted(written)}
        self.launches.append(_Launch(launch, tuple(args), before))
        for a in args:
            if _is_array(a) and id(a) not in self._shadows:
                self._shadows[id(a)] = (a, None)
                self._order.append(id(a))

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
        for array, cotangent in seeds:
            if id(array) not in self._shadows:
                raise LaunchError("a seeded array was never passed to a recorded launch: seed "
                                  "the array object the kernels wrote")
            self._shadows[id(array)] = (array, _copy(cotangent))
        from .ad import Duplicated
        from .runtime.grad import GradKernel
        after = {}   # the program's final state of every array some launch wrote
        for entry in self.launches:
            for k in entry.before:
                after.setdefault(id(entry.args[k]), (entry.args[k], None))
        after = {key: (a, _copy(a)) for key, (a, _) in after.items()}
        for entry in reversed(self.launches):
            self._restore(entry)
            activities = [Duplicated(a, self._shadow(a)) if _is_float_array(a) else a
                          for a in entry.args]
            grid, block, stream, shared = entry.config
            GradKernel(entry.kernel)[grid, block, stream, shared](*activities)
            self._restore(entry)   # the derivative's forward sweep wrote the outputs again
        for array, final in after.values():
            _assign(array, final)

    def _restore(self, entry: _Launch) -> None:
        for k, copy in entry.before.items():
            _assign(entry.args[k], copy)

    def _shadow(self, array):
        _, shadow = self._shadows.get(id(array), (array, None))
        if shadow is None:
            shadow = _zeros_like(array)
            self._shadows[id(array)] = (array, shadow)
        return shadow

    def gradient(self, array):
        """The shadow of `array` after `backward` (zeros if nothing reached it)."""
        if id(array) not in self._shadows:
            raise LaunchError("this array was never passed to a recorded launch")
        return self._shadow(array)

    def gradients(self) -> list[tuple]:
        """(array, gradient) for every float array the recorded launches took, in order of
        first appearance."""
        return [(self._shadows[key][0], self._shadow(self._shadows[key][0]))
                for key in self._order if _is_float_array(self._shadows[key][0])]


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
        from .runtime.cuda import device_array
        return device_array(a.shape, a.dtype).copy_from_device(a)
    if kind == "torch":
        return a.clone()
    if kind == "cupy":
        return a.copy()
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
        from .runtime.cuda import device_array
        return device_array(a.shape, a.dtype)
    return sys.modules[kind].zeros_like(a)
