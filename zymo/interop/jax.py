"""`zm.jax.function(kernel, launch, outputs)`: a zymo kernel as a JAX function, inside `jax.jit`.

The kernel's parameters split as for `zm.torch.function`: the outputs it writes (each an
`Output`, allocated by the call), the scalars it takes (Python numbers, static: each value
traces its own program) and the arrays it reads (the rest). The function takes the arrays and
scalars in the kernel's order and returns the outputs.

Each call is a JAX primitive that lowers to an XLA FFI custom call (`xla_ffi.py`): a handler
compiled for the host runs the kernel inside the XLA program, on the CPU through the CPU
backend's entry point, on the GPU through cuLaunchKernel on XLA's stream. No Python runs when
the compiled program does.

Derivatives: the function is a `jax.custom_jvp` whose tangent rule launches `zm.jvp(kernel)`
through a second primitive, linear in the tangents, whose transpose launches `zm.grad(kernel)`
through a third. JAX allows one of custom_jvp and custom_vjp per function; with custom_jvp and
a transposable tangent rule both modes work: `jax.jvp`, `jax.jacfwd` (forward mode, zm.jvp)
and `jax.grad`, `jax.vjp`, `jax.jacrev` (reverse mode, zm.grad; the tangent launch is dead
code there and XLA drops it). Second derivatives (the derivative of a derivative call) raise.

`jax.vmap`: a zymo kernel's indexing knows nothing of a batch axis, so a batched call runs the
kernel once per element of the batch inside the same custom call (one handler, the buffers
advanced by an element's bytes each time), the launches queued back to back on the stream.
"""
from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

import zymo as zm
from zymo.diagnostics import LaunchError
from zymo.runtime.kernel import normalize_dims

from . import jax_plan
from .signature import parameters
from .jax_plan import COTANGENT, PRIMAL, TANGENT, Signature

_NUMBERS = itertools.count()


class Output:
    """How the call allocates an output the kernel writes.

    `shape`: a tuple of ints, the name of an array argument it is shaped like, or a function of
    the call's arguments (arrays and scalars, in order) returning a shape: it may read shapes
    only (under `jax.jit` the arrays are tracers). `dtype`: default that of the array it is
    shaped like, else of the first floating-point array argument. `fill`: the value every
    element starts with, 0 by default so that kernels may accumulate (`+=`,
    `zm.atomic.add`)."""

    def __init__(self, shape, dtype=None, fill: float = 0):
        if fill is None:
            raise TypeError("zm.jax.Output: fill is a number (XLA gives the kernel fresh "
                            "buffers; the call fills them)")
        self.shape, self.dtype, self.fill = shape, dtype, fill

    def __repr__(self) -> str:
        return f"Output({self.shape!r}, dtype={self.dtype}, fill={self.fill})"


def function(kernel, launch, outputs, *, scalars=(), name: str | None = None) -> "Function":
    """`kernel` as a differentiable JAX function (see the module's docstring).

    `launch(*args)` gives the launch configuration from the call's arguments (arrays, of one
    batch element under vmap, and scalars): `(grid, block)` or `(grid, block, shared_bytes)`.
    `outputs`: {parameter name: Output, or anything `Output`'s shape takes}; the function
    returns one array, or a tuple in this order. `scalars`: the names of the scalar
    parameters (floats), or {name: float | int | bool}.

        layer = zm.jax.function(dense, lambda x, w: ((x.shape[0] + 63) // 64, 64),
                                outputs={"y": lambda x, w: (x.shape[0], w.shape[1])})
        y = jax.jit(layer)(x, w)     # jax.grad through it launches zm.grad(dense)
    """
    return Function(kernel, launch, outputs, scalars, name)


class Function:
    """A zymo kernel as a JAX function: call it on arrays (and the kernel's scalars) in the
    kernel's parameter order, outputs left out."""

    def __init__(self, kernel, launch, outputs, scalars, name):
        self.params, self.scalars, self.outputs, self.arguments, self.arrays = parameters(
            "zm.jax.function", kernel, launch, outputs, scalars,
            "lambda x: ((x.size + 255) // 256, 256)", Output, "array")
        if kernel.captured_arrays():
            raise TypeError(f"zm.jax.function: {kernel.__name__} names GPU arrays of the "
                            f"module or a closure; XLA passes the kernel only its arguments: "
                            f"pass them as arguments")
        self.kernel, self.launch = kernel, launch
        self.grad_kernel, self.jvp_kernel = zm.grad(kernel), zm.jvp(kernel)
        self.name = f"{name or kernel.__name__}_{next(_NUMBERS)}"
        self.__name__ = self.name
        self._call = _differentiable(self)

    def __call__(self, *args):
        if len(args) != len(self.arguments):
            raise TypeError(f"{self.name} takes ({', '.join(self.arguments)}): "
                            f"{len(args)} argument(s) given")
        scalars = []
        for position, value in enumerate(args):
            if position in self.arrays:
                continue
            if not isinstance(value, (int, float, bool, np.number, np.bool_)):
                raise TypeError(f"{self.name}: scalar `{self.arguments[position]}` must be a "
                                f"Python number, not {type(value).__name__}: a kernel's "
                                f"scalars are constants of the compiled program (to trace a "
                                f"value, pass it as a one-element array and read x[0])")
            scalars.append(self.scalars[self.arguments[position]](value))
        arrays = [jnp.asarray(args[p]) for p in self.arrays]
        outs = self._call(tuple(scalars), *arrays)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __repr__(self) -> str:
        return f"<zm.jax.function {self.name}>"

    # ---- the call's pieces, shared with jax_plan ----------------------------------------
    def arguments_with(self, arrays, scalars) -> list:
        """The call's arguments in order, from its arrays and its scalars."""
        arrays, scalars = iter(arrays), iter(scalars)
        return [next(arrays) if k in self.arrays else next(scalars)
                for k in range(len(self.arguments))]

    def configuration(self, arguments) -> tuple:
        config = self.launch(*arguments)
        if not isinstance(config, tuple) or len(config) not in (2, 3):
            raise LaunchError(f"{self.name}: launch returned {config!r}: return (grid, block) "
                              f"or (grid, block, shared_bytes)")
        return (normalize_dims(config[0], "grid"), normalize_dims(config[1], "block"),
                int(config[2]) if len(config) == 3 else 0)

    def kernel_call(self, arguments, outs, replaced=None) -> list:
        """The kernel's arguments in parameter order: `outs` for its outputs, the call's
        arguments (or their replacements, by position) for the rest."""
        replaced = replaced or {}
        outs, call, position = iter(outs), [], 0
        for param in self.params:
            if param in self.outputs:
                call.append(next(outs))
                continue
            call.append(replaced.get(position, arguments[position]))
            position += 1
        return call

    def output_avals(self, arrays, scalars) -> list:
        """(shape, dtype, fill) of each output for these arrays (or tracers)."""
        arguments = self.arguments_with(arrays, scalars)
        floats = [a.dtype for a in arrays if jnp.issubdtype(a.dtype, jnp.floating)]
        made = []
        for out in self.outputs.values():
            dtype = out.dtype
            if isinstance(out.shape, str):
                like = arguments[self.arguments.index(out.shape)]
                shape, dtype = like.shape, dtype or like.dtype
            else:
                shape = out.shape(*arguments) if callable(out.shape) else out.shape
                shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
            dtype = np.dtype(dtype or (floats[0] if floats else np.float32))
            made.append((tuple(int(n) for n in shape), dtype, out.fill))
        return made


def _is_float(dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.complexfloating)


def _differentiable(fn: Function):
    """fn's call as a custom_jvp: (scalars, *arrays) -> outputs."""

    def primal(scalars, *arrays):
        inits = [jnp.full(shape, fill, dtype) for shape, dtype, fill in
                 fn.output_avals(arrays, scalars)]
        results = _bind(_primal_p, fn, PRIMAL, scalars, (), [*arrays, *inits])
        return tuple(results[:len(inits)])

    call = jax.custom_jvp(primal, nondiff_argnums=(0,))

    def tangent_rule(scalars, primals, tangents):
        outs = call(scalars, *primals)
        active = tuple(p for p, (x, t) in enumerate(zip(primals, tangents))
                       if type(t) is not SymbolicZero and _is_float(x.dtype))
        avals = fn.output_avals(primals, scalars)
        floats = [k for k, (_, dtype, _) in enumerate(avals) if _is_float(dtype)]
        if not active:
            return outs, tuple(SymbolicZero(jax.typeof(o).to_tangent_aval())
                               for o in outs)
        inits = [jnp.full(shape, fill, dtype) for shape, dtype, fill in avals]
        zeros = [jnp.zeros(shape, dtype) for shape, dtype, _ in avals]
        results = _bind(_tangent_p, fn, TANGENT, scalars, active,
                        [*primals, *[tangents[p] for p in active], *inits, *zeros])
        out_tangents = results[len(avals):2 * len(avals)]
        return outs, tuple(out_tangents[k] if k in floats else
                           SymbolicZero(jax.typeof(outs[k]).to_tangent_aval())
                           for k in range(len(avals)))

    call.defjvp(tangent_rule, symbolic_zeros=True)
    return call


# ---- the primitives ---------------------------------------------------------------------------
# Operands: the arrays the kernel reads (fn.arrays; for the tangent call then the input
# tangents), then the first values of what it writes; results: the written arrays, aliased to
# those operands, then scratch arrays (tapes). Parameters: the Function, the mode, the
# kernel's scalars, `active` (the array positions with tangents / wanting cotangents), batch
# (the vmap size, 0 for none) and batched (per operand: whether its leading axis is the batch).

def _make_primitive(name: str) -> Primitive:
    p = Primitive(name)
    p.multiple_results = True
    p.def_impl(_impl(p))
    p.def_abstract_eval(_abstract_eval)
    mlir.register_lowering(p, _lowering)
    batching.primitive_batchers[p] = _batching(p)
    return p


def _impl(p):
    """Outside jax.jit the primitive runs as a compiled program of its own, one per set of
    parameters (the parameters are hashable: the Function by identity)."""
    compiled: dict = {}

    def impl(*operands, **params):
        key = tuple(sorted(params.items()))
        run = compiled.get(key)
        if run is None:
            run = compiled[key] = jax.jit(lambda *xs: p.bind(*xs, **params))
        return run(*operands)
    return impl


def _bind(p, fn, mode, scalars, active, operands) -> list:
    batched = tuple(False for _ in operands)
    return p.bind(*operands, fn=fn, mode=mode, scalars=scalars, active=active, batch=0,
                  batched=batched)


def _signature(avals, fn, mode, scalars, active, batch, batched) -> Signature:
    shapes = tuple((tuple(a.shape[1:] if b else a.shape), np.dtype(a.dtype).name)
                   for a, b in zip(avals, batched))
    return Signature(fn, mode, scalars, active, shapes)


def _abstract_eval(*avals, fn, mode, scalars, active, batch, batched):
    sig = _signature(avals, fn, mode, scalars, active, batch, batched)
    made = jax_plan.plan(sig)
    written = [jax.core.ShapedArray(avals[k].shape, avals[k].dtype) for k in made.written]
    scratch = [jax.core.ShapedArray(shape, dtype) for shape, dtype in made.scratch_avals()]
    return written + scratch


def _lowering(ctx, *operands, fn, mode, scalars, active, batch, batched):
    platforms = ctx.module_context.platforms
    if len(platforms) != 1 or platforms[0] not in ("cpu", "cuda"):
        raise LaunchError(f"{fn.name}: zymo kernels run in XLA programs for the CPU or a CUDA "
                          f"GPU, one platform at a time, not {', '.join(platforms)}")
    sig = _signature(ctx.avals_in, fn, mode, scalars, active, batch, batched)
    made = jax_plan.plan(sig)
    name = jax_plan.target_name(sig, max(batch, 1), batched, platforms[0])
    aliases = {operand: result for result, operand in enumerate(made.written)}
    return jax.ffi.ffi_lowering(name, operand_output_aliases=aliases)(ctx, *operands)


def _batching(p):
    def rule(operands, dims, *, fn, mode, scalars, active, batch, batched):
        size = next(x.shape[d] for x, d in zip(operands, dims) if d is not None)
        first_written = len(fn.arrays) + (len(active) if p is _tangent_p else 0)
        moved, flags = [], []
        for k, (x, d) in enumerate(zip(operands, dims)):
            if d is None:
                if not (k >= first_written or batch and batched[k]):
                    moved.append(x)        # read by every element alike
                    flags.append(False)
                    continue
                # each element writes its own; a nested vmap needs the axis to merge
                x, d = jnp.broadcast_to(x, (size, *x.shape)), 0
            x = jnp.moveaxis(x, d, 0)
            if batch:   # a vmap of a vmapped call: one batch of both, this one outer
                if not batched[k]:
                    x = jnp.broadcast_to(x[:, None], (size, batch, *x.shape[1:]))
                x = x.reshape((size * batch, *x.shape[2:]))
            moved.append(x)
            flags.append(True)
        results = p.bind(*moved, fn=fn, mode=mode, scalars=scalars, active=active,
                         batch=size * batch if batch else size, batched=tuple(flags))
        written = len(operands) - first_written
        outs = [r.reshape((size, batch, *r.shape[1:])) if k < written and batch else r
                for k, r in enumerate(results)]
        return outs, [0 if k < written else None for k in range(len(results))]
    return rule


def _transpose_tangent(cts, *operands, fn, mode, scalars, active, batch, batched):
    """The transpose of the tangent call in its input tangents: zm.grad with the output
    tangents' cotangents."""
    arrays = operands[:len(fn.arrays)]
    if any(ad.is_undefined_primal(x) for x in arrays):
        raise LaunchError(f"{fn.name}: a derivative of a zymo kernel's derivative call "
                          f"(second order) is not supported inside JAX: use zm.hvp")
    outs = len(fn.outputs)
    rest = operands[len(fn.arrays):]
    inits = rest[len(active):len(active) + outs]
    out_tangent_cts = cts[outs:2 * outs]
    cotangents = []
    for k, ct in enumerate(out_tangent_cts):
        like = inits[k]
        cotangents.append(jnp.zeros(like.shape, like.dtype) if type(ct) is ad.Zero else ct)
    tangent_flags = batched[len(fn.arrays):len(fn.arrays) + len(active)]
    shadows = []
    for p in active:
        x = arrays[p]
        shape = x.shape[1:] if batched[p] else x.shape
        shadows.append(jnp.zeros(((batch,) if batch else ()) + tuple(shape), x.dtype))
    inits_flags = batched[len(fn.arrays) + len(active):len(fn.arrays) + len(active) + outs]
    new_flags = (tuple(batched[:len(fn.arrays)]) + tuple(inits_flags)
                 + tuple(bool(batch) for _ in cotangents) + tuple(bool(batch) for _ in shadows))
    results = _cotangent_p.bind(*arrays, *inits, *cotangents, *shadows, fn=fn, mode=COTANGENT,
                                scalars=scalars, active=active, batch=batch, batched=new_flags)
    grads = results[2 * outs:2 * outs + len(active)]
    answer = [None] * len(operands)
    for index, (g, flag) in enumerate(zip(grads, tangent_flags)):
        answer[len(fn.arrays) + index] = g.sum(0) if batch and not flag else g
    return answer


def _second_order(*args, fn, **params):
    raise LaunchError(f"{fn.name}: a derivative of a zymo kernel's derivative call (second "
                      f"order, or forward over forward) is not supported inside JAX: for "
                      f"Hessian-vector products of a kernel use zm.hvp")


def _outside_the_rule(primals, tangents, *, fn, **params):
    raise LaunchError(f"{fn.name}: the kernel call was differentiated outside its custom_jvp "
                      f"rule; call the function zm.jax.function made")


def _derivative_of_derivative(primals, tangents, *, fn, **params):
    _second_order(fn=fn)


_primal_p = _make_primitive("zymo_kernel")
_tangent_p = _make_primitive("zymo_kernel_jvp")
_cotangent_p = _make_primitive("zymo_kernel_vjp")
ad.primitive_jvps[_primal_p] = _outside_the_rule
ad.primitive_jvps[_tangent_p] = _derivative_of_derivative
ad.primitive_jvps[_cotangent_p] = _derivative_of_derivative
ad.primitive_transposes[_tangent_p] = _transpose_tangent
ad.primitive_transposes[_cotangent_p] = _second_order
