"""`zm.jvp(kernel)`: the forward-mode derivative of a kernel, launched like the kernel.

Arguments carry `zm.Duplicated(value, tangent)` (one direction), `zm.BatchDuplicated(value,
tangents)` (W directions: a tuple of W arrays or scalars, or one array with a leading axis of W),
or nothing (Const). The derivative kernel takes each argument followed by its W tangents; it
runs the primal kernel and writes the tangents of what it stores into the tangent arrays.
"""
from __future__ import annotations

import numpy as np

from ..ad import activity_of
from ..ad.forward import tangent_module
from ..diagnostics import LaunchError
from ..frontend import Param
from . import aliasing
from .compile import compile, derived
from .derivative import DerivativeKernel, DerivativeSpecialization, run_specialization
from .grad import GradKernel, _shape_dtype
from .kernel import Kernel, _backend_of, param_of_arg, param_of_spec, with_max_registers


class JvpKernel(DerivativeKernel):
    """The forward-mode derivative of a kernel with `width` tangent directions."""

    mode = "jvp"
    example = "zm.Duplicated(x, tx), y"

    def __init__(self, kernel: Kernel, width: int | None = None):
        if width is not None and (not isinstance(width, int) or width < 1):
            raise ValueError(f"zm.jvp: width must be a positive int, not {width!r}")
        self.width = width
        super().__init__(kernel)

    def family(self) -> tuple:
        return (type(self).__name__, self.width or 1)

    def _view(self, kernel: Kernel) -> "JvpKernel":
        return JvpKernel(kernel, self.width)

    def _launcher(self, grid, block, shared, stream) -> "JvpLaunch":
        return JvpLaunch(self, grid, block, shared, stream)

    def specialize(self, *types_or_args) -> "JvpSpecialization":
        """The derivative for these activities (wrapping types or example values):
        `zm.jvp(k).specialize(zm.Duplicated(xtype, xtype), ytype)`."""
        kinds, params = [], []
        for index, item in enumerate(types_or_args):
            activity = activity_of(item)
            kinds.append(_kind(activity, index))
            params.append(param_of_spec(activity.value))
            params.extend(param_of_spec(t) for t in self._tangents(activity, index))
        return self.specialization(tuple(kinds), tuple(params))

    def _tangents(self, activity, index: int) -> tuple:
        """The W tangents of an argument (none for Const), checked against the width."""
        width = self.width or 1
        if activity.kind in ("dup", "dup_noneed"):
            tangents = (activity.shadow,)
        elif activity.kind == "batch_dup":
            tangents = activity.shadows
            if len(tangents) == 1 and width > 1:
                tangents = _split_leading(tangents[0], width, index)
        else:
            return ()
        if len(tangents) != width:
            raise LaunchError(f"argument {index}: {len(tangents)} tangent(s) given, the "
                              f"derivative has width {width}",
                              f"give {width} tangents or use zm.jvp(kernel, "
                              f"width={len(tangents)})")
        return tuple(tangents)

    def specialization(self, kinds, params) -> "JvpSpecialization":
        key = (kinds, tuple(p.key() for p in params))
        return self._cached(key, lambda: JvpSpecialization(self.kernel, kinds, params,
                                                           self.width or 1))


def _kind(activity, index: int) -> str:
    if activity.kind in ("dup", "dup_noneed", "batch_dup"):
        return "dup"
    if activity.kind == "const":
        return "const"
    raise LaunchError(f"argument {index}: zm.{type(activity).__name__} is reverse mode; "
                      f"forward mode takes zm.Duplicated(value, tangent) or "
                      f"zm.BatchDuplicated(value, tangents)")


def _split_leading(array, width: int, index: int) -> tuple:
    shape = getattr(array, "shape", None)
    if shape is None or len(shape) < 1 or shape[0] != width:
        raise LaunchError(f"argument {index}: zm.BatchDuplicated takes {width} tangents or one "
                          f"array with a leading axis of {width}, not shape {shape}")
    return tuple(array[k] for k in range(width))


class JvpSpecialization(DerivativeSpecialization):
    """One forward-mode signature: which arguments carry tangents, their types, the width."""

    steps = derived("forward")

    def __init__(self, kernel: Kernel, kinds, params, width: int):
        super().__init__(kernel, kinds, params, lambda kind: width if kind == "dup" else 0)
        self.width = width
        compile(self, "derive")   # now, as before: the transform's errors come at `specialize`

    def derive(self, primal_ir):
        tangents = [[p.type for p in extra] if extra else None for extra in self.extras]
        return tangent_module(primal_ir.clone(), list(self.kinds), self.width, tangents)


class JvpLaunch:
    def __init__(self, jvp: JvpKernel, grid, block, shared: int, stream):
        self.jvp, self.grid, self.block = jvp, grid, block
        self.shared, self.stream = shared, stream

    def __call__(self, *args) -> None:
        activities = [activity_of(a) for a in args]
        kinds, call_args, params, arguments = [], [], [], []
        for index, activity in enumerate(activities):
            kinds.append(_kind(activity, index))
            primal = param_of_arg(activity.value)
            call_args.append(activity.value)
            params.append(primal)
            tangents = self.jvp._tangents(activity, index)
            arguments.append((activity.value, tangents))
            for tangent in tangents:
                _check_tangent(index, activity.value, tangent, primal)
                call_args.append(tangent)
                params.append(param_of_arg(tangent) if primal.kind == "array" else primal)
        backend = self.jvp.kernel.backend or _backend_of(call_args)
        spec = self.jvp.specialization(tuple(kinds), tuple(params))
        if aliasing.overlapping(call_args):   # after compiling: its own errors come first
            # tangents shared alike need no other build: their loads and stores follow the
            # primal's, which the launch allows to overlap; other sharing is a LaunchError
            aliasing.check_launch(self.jvp.kernel, arguments, word="tangent")
        run_specialization(spec, backend, self.grid, self.block, call_args, self.shared,
                           self.stream)


def _check_tangent(index: int, value, tangent, primal: Param) -> None:
    if primal.kind != "array":
        if not isinstance(tangent, (float, int, np.floating, np.integer)):
            raise LaunchError(f"argument {index}: the tangent of a scalar is a number, not "
                              f"{type(tangent).__name__}")
        return
    p, t = _shape_dtype(value), _shape_dtype(tangent)
    if t is None or p != t:
        got = f"{t[1]}{list(t[0])}" if t else type(tangent).__name__
        raise LaunchError(f"argument {index}: the tangent is {got}, the array "
                          f"{p[1]}{list(p[0])}: give a tangent of the same shape and dtype")


def jvp(kernel, width: int | None = None, *rest, max_registers: int | None = None):
    """The forward-mode derivative of a `@zm.kernel` (see `JvpKernel`); `width=W` carries W
    tangent directions at once (multivariate dual numbers); `max_registers` caps the
    derivative kernel's registers on the GPU. Of a `zm.grad(kernel)`: forward over reverse,
    whose tangents of the adjoints are Hessian-vector products (`zymo.runtime.hvp`: each
    argument `zm.Duplicated(zm.Duplicated(x, dx), zm.Duplicated(vx, hx))`; `zm.hvp` for the
    common case). Inside kernels, `zm.jvp(f, primals, tangents)` of a `@zm.func` gives
    (out, tangent_out), like `jax.jvp`."""
    if not isinstance(kernel, Kernel) and callable(kernel):
        raise TypeError("zm.jvp(f, primals, tangents) of a device function is evaluated inside "
                        "kernels; on the host, zm.jvp takes a @zm.kernel")
    if isinstance(kernel, GradKernel):   # forward over reverse: Hessian-vector products
        from .hvp import ForwardOverReverse
        if max_registers is not None:
            kernel = GradKernel(with_max_registers(kernel.kernel, max_registers))
        return ForwardOverReverse(kernel, width)
    if isinstance(kernel, Kernel):
        kernel = with_max_registers(kernel, max_registers)
    return JvpKernel(kernel, width)


jvp.zymo_transform = "jvp"
