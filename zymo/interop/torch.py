"""`zm.torch.function(kernel, launch, outputs)`: a zymo kernel as a PyTorch operator.

The kernel's parameters split three ways: the outputs it writes (the operator allocates them,
each described by an `Output`), the scalars it takes (Python numbers, never differentiated) and
the tensors it reads (the rest). The operator takes the tensors and scalars in the kernel's
order and returns the outputs. It is registered with `torch.library` (namespace `zymo`) with a
fake implementation, so `torch.compile` traces it without a graph break, and with its autograd
formula: the backward is a second operator that launches `zm.grad(kernel)` with each output's
cotangent as its shadow. Forward mode (`torch.func.jvp`, `torch.autograd.forward_ad`) launches
`zm.jvp(kernel)` through a third operator.

CPU tensors run on zymo's CPU backend, read and written in place through NumPy views; CUDA
tensors launch on the GPU through `__cuda_array_interface__`, on PyTorch's current stream.
"""
from __future__ import annotations

import itertools

import torch

import zymo as zm
from zymo.diagnostics import LaunchError

from .signature import parameters

_LIBRARY = torch.library.Library("zymo", "FRAGMENT")
_NUMBERS = itertools.count()
_SCALAR_SCHEMA = {float: "float", int: "int", bool: "bool"}


class Output:
    """How the operator allocates an output the kernel writes.

    `shape`: a tuple of ints, the name of a tensor argument it is shaped like, or a function of
    the operator's arguments (tensors and scalars, in order) returning a shape: it runs on
    fake tensors under `torch.compile`, so it may read shapes only. `dtype`: default that of
    the tensor it is shaped like, else of the first floating-point tensor argument. `fill`:
    the value every element starts with, 0 by default so that kernels may accumulate (`+=`,
    `zm.atomic.add`); None leaves it uninitialized, for kernels that write every element."""

    def __init__(self, shape, dtype: torch.dtype | None = None, fill: float | None = 0):
        self.shape, self.dtype, self.fill = shape, dtype, fill

    def __repr__(self) -> str:
        return f"Output({self.shape!r}, dtype={self.dtype}, fill={self.fill})"


def function(kernel, launch, outputs, *, scalars=(), name: str | None = None) -> "Function":
    """`kernel` as a differentiable PyTorch operator (see the module's docstring).

    `launch(*args)` gives the launch configuration from the operator's arguments: `(grid,
    block)` or `(grid, block, shared_bytes)`. `outputs`: {parameter name: Output, or anything
    `Output`'s shape takes}; the operator returns one tensor, or a tuple in this order.
    `scalars`: the names of the scalar parameters (floats), or {name: float | int | bool}.

        layer = zm.torch.function(dense, lambda x, w: ((x.shape[0] + 63) // 64, 64),
                                  outputs={"y": lambda x, w: (x.shape[0], w.shape[1])})
        y = layer(x, w)          # y.sum().backward() launches zm.grad(dense)
    """
    return Function(kernel, launch, outputs, scalars, name)


class Function:
    """A zymo kernel registered as the PyTorch operator `torch.ops.zymo.<name>`; call it on
    tensors (and the kernel's scalars) in the kernel's parameter order, outputs left out."""

    def __init__(self, kernel, launch, outputs, scalars, name):
        self.params, self.scalars, self.outputs, self.arguments, self.tensors = parameters(
            "zm.torch.function", kernel, launch, outputs, scalars,
            "lambda x: ((x.numel() + 255) // 256, 256)", Output, "tensor")
        self.kernel, self.launch = kernel, launch
        self.grad_kernel, self.jvp_kernel = zm.grad(kernel), zm.jvp(kernel)
        self.name = f"{name or kernel.__name__}_{next(_NUMBERS)}"
        self.__name__ = self.name
        self._register()
        self._autograd = _autograd_function(self)

    def __call__(self, *args):
        if len(args) != len(self.arguments):
            raise TypeError(f"{self.name} takes ({', '.join(self.arguments)}): "
                            f"{len(args)} argument(s) given")
        if torch.compiler.is_compiling():
            # Dynamo traces no autograd.Function with a jvp rule: the operator itself, with
            # its registered backward
            return self.op(*args)
        return self._autograd.apply(*args)

    def __repr__(self) -> str:
        return f"<zm.torch.function torch.ops.zymo.{self.name}>"

    # ---- the three operators ---------------------------------------------------------------
    def _register(self) -> None:
        schema = ", ".join(f"{_SCALAR_SCHEMA[self.scalars[p]]} {p}" if p in self.scalars
                           else f"Tensor {p}" for p in self.arguments)
        results = "Tensor" if len(self.outputs) == 1 else \
            "(" + ", ".join(["Tensor"] * len(self.outputs)) + ")"
        qualified = f"zymo::{self.name}"
        _LIBRARY.define(f"{self.name}({schema}) -> {results}")
        _LIBRARY.define(f"{self.name}_grad({schema}, Tensor[] cotangents, bool[] needs) "
                        f"-> Tensor[]")
        _LIBRARY.define(f"{self.name}_jvp({schema}, Tensor?[] tangents) -> Tensor[]")
        key = "CompositeExplicitAutograd"
        _LIBRARY.impl(self.name, self._forward, key)
        _LIBRARY.impl(f"{self.name}_grad", self._backward, key)
        _LIBRARY.impl(f"{self.name}_jvp", self._jvp, key)
        torch.library.register_fake(qualified, self._forward_fake, lib=_LIBRARY)
        torch.library.register_fake(f"{qualified}_grad", self._backward_fake, lib=_LIBRARY)
        torch.library.register_fake(f"{qualified}_jvp", self._jvp_fake, lib=_LIBRARY)
        torch.library.register_autograd(qualified, self.backward, setup_context=self.save,
                                        lib=_LIBRARY)
        ops = getattr(torch.ops.zymo, self.name), getattr(torch.ops.zymo, f"{self.name}_grad")
        self.op, self.grad_op = (o.default for o in ops)
        self.jvp_op = getattr(torch.ops.zymo, f"{self.name}_jvp").default

    def _forward(self, *args):
        outs = self._allocate(args)
        _Launch(self, args).run(self.kernel, [(out, None) for out in outs], {})
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _backward(self, *args):
        *args, cotangents, needs = args
        fresh = self._allocate(args)   # the kernel runs again from the outputs' first values
        outs = [(out, _contiguous(ct.to(out.dtype)).clone())
                for out, ct in zip(fresh, cotangents)]
        inputs = {}
        for position, need in zip(self.tensors, needs):
            if need:
                inputs[position] = torch.zeros_like(_contiguous(args[position]))
        _Launch(self, args).run(self.grad_kernel, outs, inputs)
        return [inputs[p] for p, need in zip(self.tensors, needs) if need]

    def _jvp(self, *args):
        *args, tangents = args
        fresh = self._allocate(args)
        outs = [(out, torch.zeros_like(out)) for out in fresh]
        inputs = {p: _contiguous(t.to(args[p].dtype)) for p, t in zip(self.tensors, tangents)
                  if t is not None and args[p].is_floating_point()}
        _Launch(self, args).run(self.jvp_kernel, outs, inputs)
        return [out for out, _ in outs] + [t for _, t in outs]

    def _forward_fake(self, *args):
        outs = self._allocate(args, empty=True)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _backward_fake(self, *args):
        *args, _, needs = args
        return [torch.empty_like(args[p]) for p, need in zip(self.tensors, needs) if need]

    def _jvp_fake(self, *args):
        outs = self._allocate(args[:-1], empty=True)
        return outs + [torch.empty_like(out) for out in outs]

    def _allocate(self, args, empty: bool = False) -> list:
        tensors = [args[i] for i in self.tensors]
        if not tensors:
            raise LaunchError(f"{self.name}: the kernel takes no tensor, so the operator cannot "
                              f"tell the device of its outputs")
        device = tensors[0].device
        for position in self.tensors:
            if args[position].device != device:
                raise LaunchError(f"{self.name}: {self.arguments[position]} is on "
                                  f"{args[position].device}, {self.arguments[self.tensors[0]]}"
                                  f" on {device}: move them to one device")
        floats = [t.dtype for t in tensors if t.is_floating_point()]
        outs = []
        for out in self.outputs.values():
            dtype = out.dtype
            if isinstance(out.shape, str):
                like = args[self.arguments.index(out.shape)]
                shape, dtype = like.shape, dtype or like.dtype
            else:
                shape = out.shape(*args) if callable(out.shape) else out.shape
                shape = (shape,) if isinstance(shape, int) else tuple(shape)
            dtype = dtype or (floats[0] if floats else torch.float32)
            if empty or out.fill is None:
                outs.append(torch.empty(shape, dtype=dtype, device=device))
            elif out.fill == 0:
                outs.append(torch.zeros(shape, dtype=dtype, device=device))
            else:
                outs.append(torch.full(shape, out.fill, dtype=dtype, device=device))
        return outs

    # ---- autograd: shared by the operator's registration and the eager Function -----------
    def save(self, ctx, inputs, output) -> None:
        tensors = [inputs[p] for p in self.tensors]
        ctx.save_for_backward(*tensors)
        ctx.zymo_scalars = {p: inputs[p] for p in range(len(inputs)) if p not in self.tensors}

    def _saved_args(self, ctx) -> list:
        args = [None] * len(self.arguments)
        for position, tensor in zip(self.tensors, ctx.saved_tensors):
            args[position] = tensor
        for position, value in ctx.zymo_scalars.items():
            args[position] = value
        return args

    def backward(self, ctx, *cotangents):
        args = self._saved_args(ctx)
        needs = [bool(ctx.needs_input_grad[p]) and args[p].is_floating_point()
                 for p in self.tensors]
        grads = [None] * len(self.arguments)
        if any(needs):
            computed = iter(self.grad_op(*args, list(cotangents), needs))
            for position, need in zip(self.tensors, needs):
                if need:
                    grads[position] = next(computed)
        return tuple(grads)

    def tangents(self, ctx, *tangents):
        args = self._saved_args(ctx)
        given = [tangents[p] for p in self.tensors]
        made = self.jvp_op(*args, given)
        made = made[len(self.outputs):]
        return made[0] if len(made) == 1 else tuple(made)


def _autograd_function(fn: Function):
    """The eager path: an autograd.Function over the operator, with its backward and a
    forward-mode rule (`torch.func.jvp`), which operators registered with `torch.library`
    cannot carry."""

    def forward(*args):
        return fn.op(*args)

    def setup_context(ctx, inputs, output):
        fn.save(ctx, inputs, output)
        ctx.save_for_forward(*[inputs[p] for p in fn.tensors])

    return type(f"Zymo_{fn.name}", (torch.autograd.Function,), {
        "forward": staticmethod(forward),
        "setup_context": staticmethod(setup_context),
        "backward": staticmethod(lambda ctx, *cts: fn.backward(ctx, *cts)),
        "jvp": staticmethod(lambda ctx, *tangents: fn.tangents(ctx, *tangents)),
    })


def _contiguous(tensor):
    return tensor.detach().contiguous()


class _Launch:
    """One launch of the kernel or a derivative of it on the operator's arguments."""

    def __init__(self, fn: Function, args):
        self.fn, self.args = fn, args
        config = fn.launch(*args)
        if not isinstance(config, tuple) or len(config) not in (2, 3):
            raise LaunchError(f"{fn.name}: launch returned {config!r}: return (grid, block) or "
                              f"(grid, block, shared_bytes)")
        self.grid, self.block = config[0], config[1]
        self.shared = int(config[2]) if len(config) == 3 else 0
        tensors = [args[p] for p in fn.tensors]
        self.device = tensors[0].device if tensors else torch.device("cpu")

    def run(self, kernel, outs: list, inputs: dict) -> None:
        """Launch `kernel` (the kernel, `zm.grad` or `zm.jvp` of it): each output with its
        shadow or tangent (None for the kernel), each tensor argument with its shadow or
        tangent where `inputs` holds one (else constant)."""
        fn, view = self.fn, self._view
        out_of = dict(zip(fn.outputs, outs))
        call, position, storages = [], 0, set()
        for param in fn.params:
            if param in out_of:
                value, shadow = out_of[param]
                call.append(view(value) if shadow is None else
                            zm.Duplicated(view(value), view(shadow)))
                continue
            value = self.args[position]
            if isinstance(value, torch.Tensor):
                value = _contiguous(value)
                storage = value.untyped_storage().data_ptr()
                if storage in storages:
                    # one tensor passed twice (f(x, x)): its two uses get shadows of their
                    # own, which zymo refuses on one memory; the copy makes them two arrays
                    value = value.clone()
                storages.add(storage)
                call.append(zm.Duplicated(view(value), view(inputs[position]))
                            if position in inputs else view(value))
            else:
                call.append(value)
            position += 1
        if self.device.type == "cuda":
            with torch.cuda.device(self.device):
                stream = torch.cuda.current_stream(self.device)
                kernel[self.grid, self.block, stream, self.shared](*call)
        else:
            kernel[self.grid, self.block, None, self.shared](*call)

    def _view(self, tensor):
        if self.device.type == "cuda":
            return tensor.detach()    # read through __cuda_array_interface__
        if self.device.type != "cpu":
            raise LaunchError(f"{self.fn.name}: tensors on {self.device} are not supported: "
                              f"use CPU or CUDA tensors")
        try:
            return tensor.detach().numpy()   # shares the tensor's memory
        except TypeError:
            raise LaunchError(f"{self.fn.name}: {tensor.dtype} tensors have no NumPy type for "
                              f"the CPU backend: convert them (tensor.float())") from None
