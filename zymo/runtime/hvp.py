"""Forward over reverse: `zm.jvp(zm.grad(kernel))` and `zm.hvp`, Hessian-vector products.

The forward transform (`zymo.ad.forward`) is applied to the IR the reverse transform made (the
specialization `zm.grad` would launch, with its variant, tapes and gathering kernel), as
Enzyme's forward-over-reverse: each argument of the gradient kernel gets a tangent. In Enzyme's
vocabulary an argument is a Duplicated of the gradient's own activity:

    zm.Duplicated(zm.Duplicated(x, dx), zm.Duplicated(vx, hx))

x is differentiated in reverse (its adjoint accumulates into dx, the output cotangent dx holds
is consumed) and in forward along vx; hx, the tangent of dx, receives d(dx)/d(x) . vx. With the
output's shadow holding the seed w (and its tangent zero), the tangent of each input's adjoint
is the Hessian of the scalar <w, F(x)> applied to the direction: hx += H v, where v gathers the
directions of all inputs. The tangent of an output array (its own `vx`, given zeroed) receives
J v, as `zm.jvp` would give it.

The other forms: `zm.Const(zm.Duplicated(x, dx))` and `zm.Active(s)` are differentiated in
reverse only (no direction along them: Const in forward mode); `zm.Duplicated(x, vx)` with x an
array or a scalar is Const in reverse mode with the direction vx (the tangents of the adjoints
are then mixed second derivatives); a bare x is Const in both. `zm.Duplicated(zm.Active(s), vs)`
gives s the direction vs, and the launch returns, for each Active argument, the pair (adjoint of
s, its tangent: the component of H v along s).
"""
from __future__ import annotations

import numpy as np

from ..ad import Activity, activity_of
from ..ad.activities import Active, Const, Duplicated
from ..ad.forward import tangent_module
from ..diagnostics import LaunchError
from . import aliasing
from .compile import Job, compile, derived
from .derivative import DerivativeKernel, run_specialization
from .grad import GradCall, GradKernel, _shape_dtype, host_scalar
from .kernel import Specialization, param_of_arg, param_of_spec


class ForwardOverReverse(DerivativeKernel):
    """`zm.jvp(zm.grad(kernel))`: the tangent of the reverse-mode derivative (see the module's
    docstring for the activities); `fk[grid, block](*activities)` launches it."""

    mode = "jvp"
    example = "zm.Duplicated(zm.Duplicated(x, dx), zm.Duplicated(vx, hx)), " \
              "zm.Duplicated(zm.Duplicated(y, w), zm.Duplicated(vy, hy))"

    def __init__(self, grad: GradKernel):
        super().__init__(grad.kernel)
        self.grad = grad

    @property
    def __name__(self) -> str:
        return f"jvp(grad({self.kernel.__name__}))"

    def on(self, backend: str) -> "ForwardOverReverse":
        view = ForwardOverReverse(self.grad.on(backend))
        view._specs = self._specs
        return view

    def _launcher(self, grid, block, shared, stream) -> "ForwardOverReverseLaunch":
        return ForwardOverReverseLaunch(self, grid, block, shared, stream)

    def specialize(self, *types_or_args) -> "ForwardOverReverseSpecialization":
        """The derivative for these nested activities of types (or example values), with the
        gradient's default variant: `.specialize(zm.Duplicated(zm.Duplicated(t, t),
        zm.Duplicated(t, t)), ...)`."""
        inner, tangents = zip(*(_split(activity_of(a), k) for k, a in enumerate(types_or_args)))
        grad = self.grad.specialize(*inner)
        tangent_params = []
        for activity, tangent in zip(inner, tangents):
            for t in _per_value(activity, tangent):
                tangent_params.append(None if t is None else grad.params[len(tangent_params)]
                                      if t is ADJOINT else param_of_spec(t))
        tangent_params += [_tape_tangent_param(p) for p in grad.params[len(tangent_params):]]
        return self.specialization(grad, tuple(tangent_params), noalias=grad.noalias)

    def specialization(self, grad, tangent_params, noalias: bool):
        key = (grad, tuple(None if p is None else p.key() for p in tangent_params), noalias)
        return self._cached(key, lambda: ForwardOverReverseSpecialization(grad, tangent_params,
                                                                          noalias))


def _split(outer: Activity, index: int) -> tuple:
    """(the gradient's activity, its tangent or None) of one argument."""
    if outer.kind in ("dup", "dup_noneed"):
        inner = activity_of(outer.value)
        tangent = outer.shadow
        if inner.kind in ("dup", "dup_noneed"):
            if not isinstance(tangent, Duplicated):
                raise LaunchError(f"argument {index}: the tangent of zm.Duplicated(x, dx) is "
                                  f"zm.Duplicated(vx, hx) (the direction of x and the array "
                                  f"receiving the tangent of dx), not "
                                  f"{type(tangent).__name__}")
            return inner, tangent
        if inner.kind == "const" and isinstance(tangent, Activity):
            raise LaunchError(f"argument {index}: a Const argument's tangent is a plain value "
                              f"of its type, not zm.{type(tangent).__name__}")
        if inner.kind not in ("const", "active"):
            raise LaunchError(f"argument {index}: zm.{type(inner).__name__} cannot be nested "
                              f"in forward over reverse",
                              "nest zm.Const, zm.Active or zm.Duplicated")
        return inner, tangent
    if outer.kind == "active":
        return outer, None
    if outer.kind == "const":
        inner = activity_of(outer.value)
        if isinstance(outer.value, Const):   # zm.Const(zm.Duplicated(x, dx)): Const outside
            inner = activity_of(outer.value.value)
        return inner, None
    raise LaunchError(f"argument {index}: forward over reverse takes zm.Duplicated(activity, "
                      f"tangent) or the gradient's activity alone, not zm.{type(outer).__name__}")


# the tangent of an Active scalar's adjoint array: allocated by the launch, like the array
ADJOINT = object()


def _per_value(activity: Activity, tangent) -> list:
    """The tangents of the gradient kernel's parameters for one argument: its value, its
    shadow, an Active scalar's adjoint array (allocated by the launch: None here)."""
    if tangent is None:
        count = {"const": 1, "active": 2}.get(activity.kind, 2)
        return [None] * count
    if activity.kind in ("dup", "dup_noneed"):
        return [tangent.value, tangent.shadow]
    if activity.kind == "active":
        return [tangent, ADJOINT]
    return [tangent]


def _tape_tangent_param(param):
    """A float tape holds primal values that may carry tangents: it gets a tangent tape."""
    return param if param.type.dtype.kind == "f" else None


class ForwardOverReverseSpecialization(Specialization):
    """The forward transform of one gradient specialization; `tangent_params[i]` is the
    tangent of the gradient's parameter i (None: Const in forward mode)."""

    steps = derived("forward-over-reverse")

    def __init__(self, grad, tangent_params: tuple, noalias: bool):
        params = [p for param, tangent in zip(grad.params, tangent_params)
                  for p in ((param,) if tangent is None else (param, tangent))]
        Job.__init__(self, grad.kernel, tuple(params))
        self.primal, self.tangent_params = grad, tangent_params
        self.noalias = noalias
        self.shared_carveout = grad.shared_carveout
        self.consume = None if grad.consume is None else _Consume(grad.consume, tangent_params)
        compile(self, "derive")   # now: the transform's errors come at `specialize`

    def derive(self, gradient_ir):
        return _forward(gradient_ir, self.tangent_params)


def _forward(module, tangent_params):
    kinds = ["const" if t is None else "dup" for t in tangent_params]
    extra = [None if t is None else [t.type] for t in tangent_params]
    return tangent_module(module.clone(), kinds, 1, extra)


class _Consume(Specialization):
    """The forward transform of a gathering gradient's consuming kernel: it zeroes the output
    cotangents and their tangents."""

    steps = derived("forward-over-reverse")

    def __init__(self, consume, tangent_params: tuple):
        Job.__init__(self, consume.kernel, ())
        self.primal = consume
        # the consuming kernel takes the gradient's parameters, then its coarsening factor
        self.tangent_params = tuple(tangent_params) + (None,)
        self.params = tuple(p for param, t in zip(consume.params, self.tangent_params)
                            for p in ((param,) if t is None else (param, t)))
        self.noalias = False

    def derive(self, consume_ir):
        return _forward(consume_ir, self.tangent_params)

    def run(self, backend: str, grid, block, args, shared: int, stream) -> None:
        grid, args = self.primal.configured(grid, args)
        run_specialization(self, backend, grid, block, args, shared, stream)


class ForwardOverReverseLaunch:
    def __init__(self, fk: ForwardOverReverse, grid, block, shared: int, stream):
        self.fk, self.grid, self.block = fk, grid, block
        self.shared, self.stream = shared, stream

    def __call__(self, *args):
        inner, tangents = [], []
        for index, arg in enumerate(args):
            activity, tangent = _split(activity_of(arg), index)
            inner.append(activity)
            tangents.append(tangent)
        if self.fk.kernel.captured_arrays() or any(_composite(a) for a in inner):
            raise LaunchError("forward over reverse takes arrays and scalars: pass a tuple's "
                              "or a record array's fields as arguments of their own, and "
                              "captured GPU arrays as arguments")
        call = self.fk.grad[self.grid, self.block, self.stream, self.shared].prepare(inner)
        per_param, adjoint_tangents = [], []
        for index, (activity, tangent) in enumerate(zip(inner, tangents)):
            for value, t in zip(_values(activity), _per_value(activity, tangent)):
                if t is ADJOINT:
                    t = _zeros_like(value, call.backend)
                    adjoint_tangents.append(t)
                elif t is not None:
                    _check_tangent(index, value, t)
                per_param.append(t)
        primals = len(per_param)
        for tape in call.call_args[primals:]:
            per_param.append(_empty_like(tape, call.backend)
                             if tape.dtype.kind == "f" else None)
        _check_distinct(call.call_args, per_param)
        tangent_params = tuple(None if t is None else param_of_arg(t) for t in per_param)
        noalias = call.spec.noalias and not aliasing.overlapping(
            [t for t in per_param if t is not None])
        spec = self.fk.specialization(call.spec, tangent_params, noalias)
        call_args = [a for value, t in zip(call.call_args, per_param)
                     for a in ((value,) if t is None else (value, t))]
        run_specialization(spec, call.backend, self.grid, self.block, call_args, self.shared,
                           self.stream)
        if spec.consume is not None:
            spec.consume.run(call.backend, self.grid, self.block, call_args, self.shared,
                             self.stream)
        return tuple((host_scalar(out), host_scalar(t))
                     for out, t in zip(call.outs, adjoint_tangents))


def _values(activity: Activity) -> tuple:
    """The gradient kernel's parameters one argument fills (an Active scalar's adjoint array
    is given by the launch: its place holder here is the scalar)."""
    values = activity.values()
    return values + (activity.value,) if activity.kind == "active" else values


def _composite(activity: Activity) -> bool:
    from .cuda.arguments import is_composite
    return any(is_composite(v) for v in activity.values())


def _check_tangent(index: int, value, tangent) -> None:
    shape = _shape_dtype(value)
    if shape is None:
        if not isinstance(tangent, (float, int, np.floating, np.integer)):
            raise LaunchError(f"argument {index}: the tangent of a scalar is a number, not "
                              f"{type(tangent).__name__}")
        return
    got = _shape_dtype(tangent)
    if got != shape:
        text = f"{got[1]}{list(got[0])}" if got else type(tangent).__name__
        raise LaunchError(f"argument {index}: a tangent is {text}, its array "
                          f"{shape[1]}{list(shape[0])}: give tangents of the same shape and "
                          f"dtype")


def _check_distinct(values: list, tangents: list) -> None:
    """Tangents sharing memory among themselves follow their primals' sharing; a tangent in
    the memory of a primal value or a shadow would mix the two."""
    arrays = [v for v in values if _shape_dtype(v) is not None]
    for position, tangent in enumerate(tangents):
        if tangent is None or _shape_dtype(tangent) is None:
            continue
        if any(aliasing.overlapping([tangent, array]) for array in arrays):
            raise LaunchError(f"the tangent of the gradient kernel's parameter {position} shares "
                              f"memory with an argument or a shadow",
                              "give each tangent an array of its own")


def _zeros_like(value, backend: str):
    if backend == "cuda":
        from .cuda.arrays import device_array
        return device_array(1, np.asarray(value).dtype if np.ndim(value) == 0 else value.dtype)
    return np.zeros(1, np.asarray(value).dtype)


def _empty_like(array, backend: str):
    if backend == "cuda":
        from .cuda.arrays import device_array
        return device_array(array.shape, array.dtype)
    return np.empty_like(array)


def hvp(kernel, grid, block, *args, v, backend: str | None = None) -> tuple:
    """Hessian-vector products of a kernel's scalar output: `args` are the activities of
    `zm.grad(kernel)` (the output's shadow holds the seed w), `v` one direction per argument
    (None: no direction; an array like a Duplicated argument, a float for an Active one).
    Launches `zm.jvp(zm.grad(kernel))` once; returns, per argument, H v (None for Const),
    where H is the Hessian of <w, F(x)> in all differentiated inputs together. The gradient
    lands in the shadows, as `zm.grad` leaves it."""
    from .kernel import Kernel
    if not isinstance(kernel, Kernel):
        raise TypeError(f"zm.hvp takes a @zm.kernel, not {kernel!r}")
    if len(v) != len(args):
        raise LaunchError(f"zm.hvp: {len(args)} arguments but {len(v)} directions",
                          "give one direction per argument, None where there is none")
    fk = ForwardOverReverse(GradKernel(kernel))
    if backend is not None:
        fk = fk.on(backend)
    outer, landing = [], []
    for index, (arg, direction) in enumerate(zip(args, v)):
        activity = activity_of(arg)
        if activity.kind == "const":
            if direction is not None:
                raise LaunchError(f"argument {index} is Const: it has no direction",
                                  "pass it as zm.Duplicated(x, dx) to differentiate it")
            outer.append(activity)
            landing.append(None)
        elif activity.kind == "active":
            outer.append(Duplicated(activity, 0.0 if direction is None else float(direction)))
            landing.append(ADJOINT)
        elif activity.kind in ("dup", "dup_noneed"):
            along = _like(activity.value, direction, index)
            hx = _like(activity.shadow, None, index)
            outer.append(Duplicated(activity, Duplicated(along, hx)))
            landing.append(hx)
        else:
            raise LaunchError(f"argument {index}: zm.hvp takes the activities of zm.grad, not "
                              f"zm.{type(activity).__name__}")
    pairs = iter(fk[grid, block](*outer))
    return tuple(next(pairs)[1] if where is ADJOINT else where for where in landing)


def _like(array, direction, index: int):
    """`direction` as an array of `array`'s kind, shape and dtype (zeros for None)."""
    shape = _shape_dtype(array)
    on_gpu = not isinstance(array, np.ndarray)
    if direction is None:
        host = np.zeros(shape[0], shape[1])
    else:
        if not isinstance(direction, np.ndarray) and on_gpu:
            return direction   # already on the GPU: checked by the launch
        host = np.asarray(direction)
        if host.shape != tuple(shape[0]):
            raise LaunchError(f"argument {index}: the direction has shape {list(host.shape)}, "
                              f"the array {list(shape[0])}")
        host = host.astype(shape[1], copy=True)
    if on_gpu:
        from .cuda.arrays import to_device
        return to_device(host)
    return host
