"""Evolving a derivative: `zm.evolve(zm.grad(k), ...)` and `zm.evolve(zm.jvp(k), ...)`.

The search edits the derivative kernel's own optimized IR, so it needs the derivative as a
plain kernel: `FlatDerivative` takes the derivative's flat arguments (each array's shadow or
tangents right after it, an Active scalar's adjoint in a one-element array after the scalar)
and launches it as `zm.grad`/`zm.jvp` would, global tapes and the cotangent-consuming kernel
included (those two stay as the unevolved derivative makes them). The user's `inputs` give
activities as for a launch of the derivative; the search flattens them, and `check` compares
flat argument lists, the unevolved derivative's against the variant's."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ad import Active, BatchDuplicated, Duplicated, DuplicatedNoNeed, activity_of
from ...diagnostics import LaunchError
from ..derivative import DerivativeKernel, run_specialization
from ..grad import GradKernel, _on_host, _tapes
from ..jvp import JvpKernel, _kind
from ..kernel import Kernel, _backend_of, normalize_dims, param_of_arg


class FlatLaunch:
    """A launch of a FlatDerivative or of a variant of one (its edits apply to the
    derivative kernel; tapes and the consuming kernel come from the unevolved derivative)."""

    def __init__(self, kernel: Kernel, grid, block, shared: int = 0, stream=None):
        self.kernel, self.grid, self.block = kernel, grid, block
        self.shared, self.stream = shared, stream

    def __call__(self, *flat):
        kernel = self.kernel
        derivative: FlatDerivative = getattr(kernel, "original", kernel)
        backend = kernel.backend or _backend_of(flat)
        base = derivative.specialization_for(flat)
        primals = derivative.primals(flat)
        assumptions = getattr(base, "assumptions", None)
        if assumptions is not None and derivative.plain_updates and not assumptions.hold(
                self.grid, self.block, lambda source: _on_host(source, primals)):
            raise LaunchError(f"{derivative.__name__}: this launch breaks the assumptions the "
                              f"evolved derivative was built under (plain shadow updates); "
                              f"evolve with the launch configuration it will run with")
        args = list(flat) + _tapes(base, backend, self.grid, self.block, primals) \
            if getattr(base, "tapes", None) else list(flat)
        spec = kernel.specialization_for(flat)
        run_specialization(spec, backend, self.grid, self.block, args, self.shared, self.stream)
        consume = getattr(base, "consume", None)
        if consume is not None:
            consume.run(backend, self.grid, self.block, args, self.shared, self.stream)


class FlatDerivative(Kernel):
    """A derivative kernel launched with its flat arguments: `fd[grid, block](*flat)`."""

    def __init__(self, derivative: DerivativeKernel, kinds: tuple, plain_updates: bool = True,
                 backend: str | None = None, boundscheck: bool | None = None, _shared=None):
        primal = derivative.kernel
        super().__init__(primal.py_func, backend or primal.backend,
                         primal.boundscheck if boundscheck is None else boundscheck,
                         primal.fastmath, _shared, max_registers=primal.max_registers)
        self.__name__ = derivative.__name__
        self.derivative, self.kinds, self.plain_updates = derivative, tuple(kinds), plain_updates
        self.width = getattr(derivative, "width", None) or 1
        # distinct from the primal's (and from other activities') in per-process caches
        self.identity = (derivative.mode, primal.py_func, self.kinds, plain_updates, self.width)

    launch_class = FlatLaunch

    def on(self, backend: str) -> "FlatDerivative":
        return FlatDerivative(self.derivative, self.kinds, self.plain_updates, backend,
                              self.boundscheck, self._specs)

    def _specialize(self, params):
        if isinstance(self.derivative, GradKernel):
            return self.derivative.specialization(self.kinds, tuple(params), True,
                                                  self.plain_updates)
        return self.derivative.specialization(self.kinds, tuple(params))

    def counts(self) -> list[int]:
        """How many flat arguments each of the derivative's arguments takes."""
        if isinstance(self.derivative, GradKernel):
            return [1 if kind == "const" else 2 for kind in self.kinds]
        return [1 + self.width if kind == "dup" else 1 for kind in self.kinds]

    def primals(self, flat) -> list:
        out, position = [], 0
        for count in self.counts():
            out.append(flat[position])
            position += count
        return out

    def flat(self, activities) -> list:
        """The flat arguments of a launch with these activities (what an evolved derivative,
        `result.best`, is launched with)."""
        return flatten(self.derivative, activities)[1]

    def activities(self, flat) -> list:
        """The launch arguments of the derivative (activities) these flat ones stand for."""
        out, position = [], 0
        for kind, count in zip(self.kinds, self.counts()):
            value, rest = flat[position], flat[position + 1:position + count]
            position += count
            if kind == "const":
                out.append(value)
            elif kind == "active":
                out.append(Active(value))
            elif kind == "dup_noneed":
                out.append(DuplicatedNoNeed(value, rest[0]))
            elif self.width == 1:
                out.append(Duplicated(value, rest[0]))
            else:
                out.append(BatchDuplicated(value, tuple(rest)))
        return out

    def __reduce__(self):
        return (_rebuild, (self.derivative.mode, self.derivative.kernel, self.width, self.kinds,
                           self.plain_updates, self.backend, self.boundscheck))

    def __repr__(self) -> str:
        return f"<zymo {self.__name__} on flat arguments>"


def _rebuild(mode, primal, width, kinds, plain_updates, backend, boundscheck):
    derivative = GradKernel(primal) if mode == "grad" else JvpKernel(primal, width)
    return FlatDerivative(derivative, kinds, plain_updates, backend, boundscheck)


def flatten(derivative: DerivativeKernel, args) -> tuple[tuple, list]:
    """(kinds, flat arguments) of a launch of `derivative` with activities `args`."""
    activities = [activity_of(a) for a in args]
    kinds, flat = [], []
    if isinstance(derivative, GradKernel):
        for activity in activities:
            if activity.kind == "batch_dup":
                raise LaunchError("zm.BatchDuplicated is forward mode: evolve zm.jvp(kernel, "
                                  "width=W)")
            kinds.append(activity.kind)
            flat.extend(activity.values())
            if activity.kind == "active":
                flat.append(np.zeros(1, param_of_arg(activity.value).type.dtype))
        return tuple(kinds), flat
    for index, activity in enumerate(activities):
        kinds.append(_kind(activity, index))
        flat.append(activity.value)
        flat.extend(derivative._tangents(activity, index))
    return tuple(kinds), flat


@dataclass(frozen=True)
class Flattened:
    """An inputs function of activities, giving the derivative's flat arguments."""
    fn: object
    derivative: FlatDerivative

    def __call__(self, *rng):
        kinds, flat = flatten(self.derivative.derivative, self.fn(*rng))
        if kinds != self.derivative.kinds:
            raise LaunchError(f"the inputs gave activities {kinds}, the first call gave "
                              f"{self.derivative.kinds}: give the same activities every time")
        return flat


@dataclass(frozen=True)
class FlatDims:
    """A launch function of activities, called with the flat arguments."""
    fn: object
    derivative: FlatDerivative

    def __call__(self, flat):
        return self.fn(self.derivative.activities(flat))


def as_kernel(derivative: DerivativeKernel, inputs, launch, holdout, race_check, seed: int):
    """(kernel, inputs, launch, holdout, race_check) of the search over a derivative."""
    example = list(inputs(np.random.default_rng(seed)))
    kinds, flat = flatten(derivative, example)
    plain = True
    if isinstance(derivative, GradKernel):
        # the launch's variant: plain shadow updates when this launch allows them
        params = tuple(param_of_arg(a) for a in flat)
        spec = derivative.specialization(kinds, params, True, True)
        grid, block = launch(example) if callable(launch) else launch
        primals = [activity_of(a).value for a in example]
        plain = spec.assumptions.hold(normalize_dims(grid, "grid"),
                                      normalize_dims(block, "block"),
                                      lambda source: _on_host(source, primals))
    kernel = FlatDerivative(derivative, kinds, plain)

    def wrapped(fn):
        if fn is None:
            return None
        if isinstance(fn, tuple):   # (inputs, launch)
            return (Flattened(fn[0], kernel), wrapped_launch(fn[1]))
        return Flattened(fn, kernel)

    def wrapped_launch(dims):
        return FlatDims(dims, kernel) if callable(dims) else dims

    return kernel, Flattened(inputs, kernel), wrapped_launch(launch), wrapped(holdout), \
        wrapped(race_check)
