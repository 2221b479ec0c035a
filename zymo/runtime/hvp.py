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
directions of all inputs. An output y written by the kernel, `zm.Duplicated(zm.Duplicated(y, w),
zm.Duplicated(ty, tw))`, receives J v in ty (as `zm.jvp` gives it), and its seed's tangent tw
(zero for a Hessian; else J^T tw adds to the hx) is consumed like w.

The other forms: `zm.Const(zm.Duplicated(x, dx))` and `zm.Active(s)` are differentiated in
reverse only (no direction along them: Const in forward mode); `zm.Duplicated(x, vx)` with x an
array or a scalar is Const in reverse mode with the direction vx (the tangents of the adjoints
are then mixed second derivatives); a bare x is Const in both. `zm.Duplicated(zm.Active(s), vs)`
gives s the direction vs, and the launch returns, for each Active argument, the pair (adjoint of
s, its tangent: the component of H v along s).

`zm.jvp(zm.grad(kernel), width=W)` carries W directions in one launch (W columns of H):
`zm.BatchDuplicated(zm.Duplicated(x, dx), (zm.Duplicated(v1, h1), ..., zm.Duplicated(vW, hW)))`,
or one `zm.Duplicated(V, H)` whose arrays have a leading axis of W; an Active scalar's tangent
is then a tuple of W.
"""
from __future__ import annotations

import numpy as np

from ..ad import Activity, activity_of
from ..ad.activities import BatchDuplicated, Duplicated
from ..ad.forward import tangent_module
from ..diagnostics import LaunchError
from ..ir.traits import Allocates
from . import aliasing
from .compile import Job, compile, derived
from .derivative import DerivativeKernel, run_specialization, run_with_consumer
from .grad import GradKernel, _shape_dtype, host_scalar
from .kernel import Specialization, param_of_arg, param_of_spec


class ForwardOverReverse(DerivativeKernel):
    """`zm.jvp(zm.grad(kernel), width=W)`: the tangent of the reverse-mode derivative along W
    directions at once (see the module's docstring for the activities); `fk[grid,
    block](*activities)` launches it."""

    mode = "jvp"
    example = "zm.Duplicated(zm.Duplicated(x, dx), zm.Duplicated(vx, hx)), " \
              "zm.Duplicated(zm.Duplicated(y, w), zm.Duplicated(vy, hy))"

    def __init__(self, grad: GradKernel, width: int | None = None):
        if width is not None and (not isinstance(width, int) or width < 1):
            raise ValueError(f"zm.jvp: width must be a positive int, not {width!r}")
        self.grad, self.width = grad, width
        super().__init__(grad.kernel)

    def family(self) -> tuple:
        return (type(self).__name__, self.width or 1)

    @property
    def __name__(self) -> str:
        return f"jvp(grad({self.kernel.__name__}))"

    def on(self, backend: str) -> "ForwardOverReverse":
        view = ForwardOverReverse(self.grad.on(backend), self.width)
        view._specs = self._specs
        return view

    def _launcher(self, grid, block, shared, stream) -> "ForwardOverReverseLaunch":
        return ForwardOverReverseLaunch(self, grid, block, shared, stream)

    def specialize(self, *types_or_args) -> "ForwardOverReverseSpecialization":
        """The derivative for these nested activities of types (or example values), with the
        gradient's default variant: `.specialize(zm.Duplicated(zm.Duplicated(t, t),
        zm.Duplicated(t, t)), ...)`."""
        inner, tangents = zip(*(self._split(activity_of(a), k)
                                for k, a in enumerate(types_or_args)))
        for plain_updates in (True, False):
            grad = self.grad.specialize(*inner, plain_updates=plain_updates)
            tangent_params = []
            for activity, tangent in zip(inner, tangents):
                for ts in _per_value(activity, tangent):
                    param = grad.params[len(tangent_params)]
                    tangent_params.append(None if ts is None else tuple(
                        param if t is ADJOINT else _tangent_param(param, t, param_of_spec)
                        for t in ts))
            tangent_params += [_tape_tangents(p, self.directions)
                               for p in grad.params[len(tangent_params):]]
            spec = self.specialization(grad, tuple(tangent_params), noalias=grad.noalias)
            if fits(spec):
                break
        return spec

    @property
    def directions(self) -> int:
        return self.width or 1

    def specialization(self, grad, tangent_params, noalias: bool):
        key = (grad, tuple(None if ts is None else tuple(p.key() for p in ts)
                           for ts in tangent_params), noalias)
        return self._cached(key, lambda: ForwardOverReverseSpecialization(
            grad, tangent_params, noalias, self.directions))

    def _split(self, outer: Activity, index: int) -> tuple:
        """(the gradient's activity, its W tangents or None) of one argument."""
        if outer.kind == "active":
            return outer, None
        if outer.kind == "const":   # a bare value, or zm.Const(the gradient's activity)
            return activity_of(outer.value), None
        if outer.kind not in ("dup", "dup_noneed", "batch_dup"):
            raise LaunchError(f"argument {index}: forward over reverse takes zm.Duplicated("
                              f"activity, tangent) or the gradient's activity alone, not "
                              f"zm.{type(outer).__name__}")
        inner = activity_of(outer.value)
        if inner.kind not in ("const", "active", "dup", "dup_noneed"):
            raise LaunchError(f"argument {index}: zm.{type(inner).__name__} cannot be nested "
                              f"in forward over reverse",
                              "nest zm.Const, zm.Active or zm.Duplicated")
        tangents = outer.shadows if outer.kind == "batch_dup" else (outer.shadow,)
        if len(tangents) == 1 and self.directions > 1:
            tangents = _split_leading(tangents[0], self.directions, index)
        if len(tangents) != self.directions:
            raise LaunchError(f"argument {index}: {len(tangents)} tangent(s) given, the "
                              f"derivative has width {self.directions}",
                              f"give {self.directions} tangents or use zm.jvp(zm.grad(kernel), "
                              f"width={len(tangents)})")
        for tangent in tangents:
            nested = inner.kind in ("dup", "dup_noneed")
            if nested and not isinstance(tangent, Duplicated):
                raise LaunchError(f"argument {index}: the tangent of zm.Duplicated(x, dx) is "
                                  f"zm.Duplicated(vx, hx) (the direction of x and the array "
                                  f"receiving the tangent of dx), not "
                                  f"{type(tangent).__name__}")
            if not nested and isinstance(tangent, Activity):
                raise LaunchError(f"argument {index}: the tangent of a Const or Active "
                                  f"argument is a plain value of its type, not "
                                  f"zm.{type(tangent).__name__}")
        return inner, tuple(tangents)


def _split_leading(tangent, width: int, index: int) -> tuple:
    """W tangents from one with a leading axis of W (both arrays of a nested Duplicated)."""
    def rows(array):
        shape = getattr(array, "shape", None)
        if shape is None or len(shape) < 1 or shape[0] != width:
            raise LaunchError(f"argument {index}: zm.BatchDuplicated takes {width} tangents or "
                              f"one with a leading axis of {width}, not shape {shape}")
        return [array[k] for k in range(width)]
    if isinstance(tangent, Duplicated):
        return tuple(Duplicated(v, h) for v, h in zip(rows(tangent.value),
                                                      rows(tangent.shadow)))
    return tuple(rows(tangent))


# the tangent of an Active scalar's adjoint array: allocated by the launch, like the array
ADJOINT = object()


def _per_value(activity: Activity, tangents) -> list:
    """The W tangents of each of the gradient kernel's parameters one argument fills: its
    value, its shadow, an Active scalar's adjoint array (ADJOINT: its tangents are the
    launch's); None where there are none."""
    if tangents is None:
        return [None] * (1 if activity.kind == "const" else 2)
    if activity.kind in ("dup", "dup_noneed"):
        return [tuple(t.value for t in tangents), tuple(t.shadow for t in tangents)]
    if activity.kind == "active":
        return [tangents, (ADJOINT,) * len(tangents)]
    return [tangents]


def _tangent_param(param, tangent, param_of):
    """A tangent's parameter: a scalar's has the scalar's type (a Python float along an f32
    scalar is an f32 direction, as in `zm.jvp`); an array's is its own."""
    return param if param is not None and param.kind != "array" else param_of(tangent)


def _tape_tangents(param, width: int):
    """A float tape holds primal values that may carry tangents: it gets W tangent tapes."""
    return (param,) * width if param.type.dtype.kind == "f" else None


def _interleaved(values, tangents) -> list:
    return [x for value, ts in zip(values, tangents) for x in (value, *(ts or ()))]


class ForwardOverReverseSpecialization(Specialization):
    """The forward transform of one gradient specialization; `tangent_params[i]` holds the W
    tangents of the gradient's parameter i (None: Const in forward mode)."""

    steps = derived("forward-over-reverse")

    def __init__(self, grad, tangent_params: tuple, noalias: bool, width: int):
        Job.__init__(self, grad.kernel, tuple(_interleaved(grad.params, tangent_params)))
        self.primal, self.tangent_params, self.width = grad, tangent_params, width
        self.noalias = noalias
        self.shared_carveout = grad.shared_carveout
        self.consume = None if grad.consume is None else \
            _Consume(grad.consume, tangent_params, width)
        compile(self, "derive")   # now: the transform's errors come at `specialize`

    def derive(self, gradient_ir):
        return _forward(gradient_ir, self.tangent_params, self.width)


def _forward(module, tangent_params, width: int):
    kinds = ["const" if ts is None else "dup" for ts in tangent_params]
    extra = [None if ts is None else [p.type for p in ts] for ts in tangent_params]
    return tangent_module(module.clone(), kinds, width, extra)


class _Consume(Specialization):
    """The forward transform of a gathering gradient's consuming kernel: it zeroes the output
    cotangents and their tangents."""

    steps = derived("forward-over-reverse")

    def __init__(self, consume, tangent_params: tuple, width: int):
        # the consuming kernel takes the gradient's parameters, then its coarsening factor
        tangent_params = tuple(tangent_params) + (None,)
        Job.__init__(self, consume.kernel, tuple(_interleaved(consume.params, tangent_params)))
        self.primal, self.tangent_params, self.width = consume, tangent_params, width

    def derive(self, consume_ir):
        return _forward(consume_ir, self.tangent_params, self.width)

    def run(self, backend: str, grid, block, args, shared: int, stream) -> None:
        grid, args = self.primal.configured(grid, args)
        run_specialization(self, backend, grid, block, args, shared, stream)


class ForwardOverReverseLaunch:
    def __init__(self, fk: ForwardOverReverse, grid, block, shared: int, stream):
        self.fk, self.grid, self.block = fk, grid, block
        self.shared, self.stream = shared, stream

    def __call__(self, *args):
        """Launch; for each Active argument, (its adjoint, the tangent of the adjoint), the
        tangent a tuple of W when the derivative was given a width."""
        inner, tangents = zip(*(self.fk._split(activity_of(a), k)
                                for k, a in enumerate(args))) if args else ((), ())
        if self.fk.kernel.captured_arrays() or any(_composite(a) for a in inner):
            raise LaunchError("forward over reverse takes arrays and scalars: pass a tuple's "
                              "or a record array's fields as arguments of their own, and "
                              "captured GPU arrays as arguments")
        launch = self.fk.grad[self.grid, self.block, self.stream, self.shared]
        for plain_updates in (True, False):
            call = launch.prepare(list(inner), plain_updates)
            spec, per_param, adjoint_tangents = self._tangents(call, inner, tangents)
            if fits(spec):
                break
        call_args = _interleaved(call.call_args, per_param)
        run_with_consumer(spec, call.backend, self.grid, self.block, call_args, self.shared,
                          self.stream)
        results = []
        for out, ts in zip(call.outs, adjoint_tangents):
            tangent = tuple(host_scalar(t) for t in ts)
            results.append((host_scalar(out), tangent if self.fk.width else tangent[0]))
        return tuple(results)

    def _tangents(self, call, inner, tangents) -> tuple:
        """(the specialization, the W tangents of each of the gradient's parameters or None,
        the tangents of the Active scalars' adjoint arrays), tangent tapes allocated."""
        width = self.fk.directions
        per_param, adjoint_tangents = [], []
        for index, (activity, tangent) in enumerate(zip(inner, tangents)):
            for value, ts in zip(_values(activity), _per_value(activity, tangent)):
                if ts is not None and ts[0] is ADJOINT:
                    ts = tuple(_zeros_like(value, call.backend) for _ in ts)
                    adjoint_tangents.append(ts)
                elif ts is not None:
                    for t in ts:
                        _check_tangent(index, value, t)
                per_param.append(ts)
        for tape in call.call_args[len(per_param):]:
            per_param.append(tuple(_empty_like(tape, call.backend) for _ in range(width))
                             if tape.dtype.kind == "f" else None)
        flat_tangents = [t for ts in per_param if ts is not None for t in ts]
        _check_distinct(call.call_args, flat_tangents)
        params = call.spec.params
        tangent_params = tuple(None if ts is None else tuple(
            _tangent_param(params[k] if k < len(params) else None, t, param_of_arg) for t in ts)
            for k, ts in enumerate(per_param))
        noalias = call.spec.noalias and not aliasing.overlapping(flat_tangents)
        spec = self.fk.specialization(call.spec, tangent_params, noalias)
        return spec, per_param, adjoint_tangents


def _static_shared_bytes(module) -> int:
    return sum(int(np.prod(result.type.shape)) * result.type.dtype.nbytes
               for op in module.kernel.walk() if op.has_trait(Allocates)
               for result in op.results
               if result.type.space == "shared" and result.type.shape is not None)


def fits(spec: ForwardOverReverseSpecialization) -> bool:
    """Whether the HVP kernel's fixed-size shared arrays stay within CUDA's limit (see
    STATIC_SHARED_BYTES): tangents double a gradient's block-private shadow copies, which
    alone may take a third of it."""
    return _static_shared_bytes(spec.optimized) <= STATIC_SHARED_BYTES


# CUDA's limit on a kernel's fixed-size shared arrays together (ptxas rejects more); a
# gradient over it in forward over reverse is derived in the variant without block-private
# copies, on every backend alike
STATIC_SHARED_BYTES = 48 * 1024


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
    for tangent in tangents:
        if _shape_dtype(tangent) is not None and \
                any(aliasing.overlapping([tangent, array]) for array in arrays):
            raise LaunchError("a tangent shares memory with an argument or a shadow",
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


def hvp(kernel, grid, block, *args, v, width: int | None = None,
        backend: str | None = None) -> tuple:
    """Hessian-vector products of a kernel's scalar output: `args` are the activities of
    `zm.grad(kernel)` (the output's shadow holds the seed w), `v` one direction per argument
    (None: none; an array like a Duplicated argument, a float for an Active one). Launches
    `zm.jvp(zm.grad(kernel), width)` once; returns, per argument, H v (None for Const), where
    H is the Hessian of <w, F(x)> in all differentiated inputs together. With `width=W`, each
    direction has a leading axis of W (W directions at once) and so has each H v. The gradient
    lands in the shadows, as `zm.grad` leaves it."""
    from .kernel import Kernel
    if not isinstance(kernel, Kernel):
        raise TypeError(f"zm.hvp takes a @zm.kernel, not {kernel!r}")
    if len(v) != len(args):
        raise LaunchError(f"zm.hvp: {len(args)} arguments but {len(v)} directions",
                          "give one direction per argument, None where there is none")
    fk = ForwardOverReverse(GradKernel(kernel), width)
    if backend is not None:
        fk = fk.on(backend)
    lead = () if width is None else (width,)
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
            along = np.zeros(lead) if direction is None else np.asarray(direction, np.float64)
            if along.shape != lead:
                raise LaunchError(f"argument {index}: the direction of an Active scalar is "
                                  + ("a number" if width is None else f"{width} numbers"))
            outer.append(BatchDuplicated(activity, tuple(float(t) for t in along.ravel())))
            landing.append(ADJOINT)
        elif activity.kind in ("dup", "dup_noneed"):
            along = _like(activity.value, direction, lead, index)
            hx = _like(activity.shadow, None, lead, index)
            outer.append(BatchDuplicated(activity, (Duplicated(along, hx),)))
            landing.append(hx)
        else:
            raise LaunchError(f"argument {index}: zm.hvp takes the activities of zm.grad, not "
                              f"zm.{type(activity).__name__}")
    pairs = iter(fk[grid, block](*outer))
    return tuple((np.array(next(pairs)[1]) if width else next(pairs)[1])
                 if where is ADJOINT else where for where in landing)


def _like(array, direction, lead: tuple, index: int):
    """`direction` as an array of `array`'s kind and dtype, its shape after `lead` (zeros for
    None)."""
    shape, dtype = _shape_dtype(array)
    on_gpu = not isinstance(array, np.ndarray)
    if direction is not None and on_gpu and not isinstance(direction, np.ndarray):
        return direction   # already on the GPU: checked by the launch
    host = np.zeros(lead + tuple(shape), dtype) if direction is None else \
        np.array(direction, dtype)
    if host.shape != lead + tuple(shape):
        raise LaunchError(f"argument {index}: the direction has shape {list(host.shape)}, "
                          f"{'the array' if not lead else 'W and the array'} "
                          f"{list(lead + tuple(shape))}")
    if on_gpu:
        from .cuda.arrays import to_device
        return to_device(host)
    return host
