"""Lowering of a whole IR module to an llvmlite module: one LLVM function per `func.func`.

Device functions become internal LLVM functions taking their arguments by value (arrays as
aggregates) plus the target's implicit parameters. The kernel goes through the target's
`lower_kernel` hook: one function per thread by default, a block function on the CPU.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir as ll

from ...diagnostics import UNKNOWN, Loc
from ...ir.module import Module
from ...ir.operation import Operation
from ...ir.types import Array, FunctionType, Scalar, Type
from ...ops.raising import raises
from ..target import Target
from . import types as lt
from .context import LoweringContext


@dataclass(frozen=True)
class BoundsSite:
    """A bounds-checked access, numbered in the error buffer: which array and where."""

    array: str
    loc: Loc
    op_id: str


class ModuleLowering:
    """One compilation's llvmlite module and the declarations shared by its functions.

    `noalias`: declare `noalias` the kernel's array parameters that the codegen stage found
    private (the kernel's `private_arrays` attribute: no other thread touches what one thread
    does); the launch runs a build without when arguments overlap or its shape breaks that."""

    def __init__(self, module: Module, target: Target, *, boundscheck: bool = False,
                 noalias: bool = True, name: str = "zymo"):
        self.module = module
        self.target = target
        self.boundscheck = boundscheck
        self.noalias = noalias
        self.llvm = ll.Module(name=name)
        if target.triple:
            self.llvm.triple = target.triple
        if target.data_layout:
            self.llvm.data_layout = target.data_layout
        self.functions: dict[str, ll.Function] = {}
        self.sites: list[BoundsSite] = []
        self.unrolled: list[tuple] = []   # (loop op, trips, body ops) of fully unrolled loops
        self._declared: dict[str, ll.Function] = {}
        self._constants = 0
        self._strings: dict[str, ll.GlobalVariable] = {}
        self._raises: dict[Operation, int] | None = None

    # ---- driver -------------------------------------------------------------------------
    def lower(self) -> ll.Module:
        device = [f for f in self.module if f.attrs.get("kind") != "kernel"]
        for func in device:
            self.declare_function(func)
        for func in device:
            self.lower_function(func)
        kernels = [f for f in self.module if f.attrs.get("kind") == "kernel"]
        for func in kernels:
            self.target.lower_kernel(self, func)
        self.target.finish_module(self.llvm)
        return self.llvm

    # ---- types --------------------------------------------------------------------------
    def value_type(self, t: Type) -> ll.Type:
        return lt.value_type(t, self.target.address_space)

    def memory_type(self, t: Type) -> ll.Type:
        return lt.memory_type(t, self.target.address_space)

    # ---- functions ----------------------------------------------------------------------
    def declare_function(self, func: Operation) -> ll.Function:
        ftype: FunctionType = func.attrs["function_type"]
        params = [self.value_type(t) for t in ftype.inputs]
        params += [t for _, t in self.target.implicit_params()]
        ret = lt.return_type(ftype, self.target.address_space)
        fn = ll.Function(self.llvm, ll.FunctionType(ret, params), f"zymo.{func.attrs['sym_name']}")
        fn.linkage = "internal"
        self.functions[func.attrs["sym_name"]] = fn
        return fn

    def lower_function(self, func: Operation) -> ll.Function:
        """Lower a function whose every thread runs the body once (device functions, and
        kernels on targets that launch one LLVM function per thread)."""
        kernel = func.attrs.get("kind") == "kernel"
        implicit = list(self.target.implicit_params())
        fn = (self.kernel_function(func, extra=implicit) if kernel
              else self.functions[func.attrs["sym_name"]])
        builder = ll.IRBuilder(fn.append_basic_block("entry"))
        ctx = LoweringContext(self, fn, builder, func)
        args = list(fn.args)
        explicit, hidden = args[:len(args) - len(implicit)], args[len(args) - len(implicit):]
        ctx.implicit = {name: v for (name, _), v in zip(implicit, hidden)}
        values = self.assemble_params(ctx, func, explicit) if kernel else explicit
        results = ctx.lower_block(func.regions[0].block, values)
        if not results:
            builder.ret_void()
        elif len(results) == 1:
            builder.ret(results[0])
        else:
            aggregate = ll.Constant(fn.function_type.return_type, ll.Undefined)
            for index, value in enumerate(results):
                aggregate = builder.insert_value(aggregate, value, index)
            builder.ret(aggregate)
        return fn

    def kernel_function(self, func: Operation, name: str | None = None,
                        extra: list[tuple[str, ll.Type]] = ()) -> ll.Function:
        """A function taking the kernel's parameters expanded (`param_types`), then `extra`."""
        params = [t for t_ir in func.attrs["function_type"].inputs for t in self.param_types(t_ir)]
        params += [t for _, t in extra]
        fn = ll.Function(self.llvm, ll.FunctionType(lt.VOID, params),
                         name or f"zymo.kernel.{func.attrs['sym_name']}")
        private = func.attrs.get("private_arrays")   # passes/alias.py; absent: none
        position = 0
        for index, t in enumerate(func.attrs["function_type"].inputs):
            if self.noalias and private is not None and index in private.arguments:
                fn.args[position].add_attribute("noalias")
            position += len(self.param_types(t))
        return fn

    def param_types(self, t: Type) -> list[ll.Type]:
        """A kernel parameter expanded: an array is (data, shape..., strides...), with the
        strides only where the target passes them (`passes_strides`); a scalar is itself."""
        if isinstance(t, Array):
            dims = 2 * t.ndim if self.target.passes_strides(t) else t.ndim
            return [ll.PointerType(addrspace=self.target.address_space(t.space))] + [lt.I64] * dims
        if isinstance(t, Scalar) and t.is_complex:   # its real and imaginary parts
            return [self.value_type(t.part)] * 2
        return [self.value_type(t)]

    def assemble_params(self, ctx: LoweringContext, func: Operation,
                        args: list[ll.Value]) -> list[Any]:
        """The IR-level values of a kernel's parameters from their expanded LLVM form."""
        values = []
        position = 0
        for t in func.attrs["function_type"].inputs:
            count = len(self.param_types(t))
            parts = args[position:position + count]
            position += count
            if isinstance(t, Array):
                shape = parts[1:1 + t.ndim]
                strides = parts[1 + t.ndim:] if t.layout != "C" else None
                values.append(ctx.make_array(t, parts[0], shape, strides))
            elif len(parts) == 2:
                values.append(ctx.complex_value(t, *parts))
            else:
                values.append(parts[0])
        return values

    # ---- declarations and constants -----------------------------------------------------
    def declare(self, name: str, ret: ll.Type, args: list[ll.Type]) -> ll.Function:
        """An external function or intrinsic, declared once per module."""
        fn = self._declared.get(name)
        if fn is None:
            fn = ll.Function(self.llvm, ll.FunctionType(ret, args), name)
            self._declared[name] = fn
        return fn

    def constant_global(self, data: np.ndarray, t: Array) -> ll.Value:
        element = self.memory_type(t.dtype)
        flat = np.ascontiguousarray(data).reshape(-1)
        assert isinstance(t.dtype, Scalar)
        items = [_scalar_constant(element, t.dtype, v) for v in flat.tolist()]
        array_type = ll.ArrayType(element, max(len(items), 1))
        if not items:
            items = [ll.Constant(element, None)]
        space = self.target.address_space("const")
        self._constants += 1
        glob = ll.GlobalVariable(self.llvm, array_type, f"zymo.const.{self._constants}",
                                 addrspace=space)
        glob.initializer = ll.Constant(array_type, items)
        glob.global_constant = True
        glob.linkage = "internal"
        glob.align = 16
        return glob

    def string_constant(self, text: str) -> ll.Value:
        """A NUL-terminated constant string (format strings of `print`), one per text."""
        glob = self._strings.get(text)
        if glob is None:
            data = bytearray(text.encode()) + b"\0"
            array_type = ll.ArrayType(ll.IntType(8), len(data))
            glob = ll.GlobalVariable(self.llvm, array_type, f"zymo.str.{len(self._strings)}",
                                     addrspace=self.target.address_space("const"))
            glob.initializer = ll.Constant(array_type, data)
            glob.global_constant = True
            glob.linkage = "internal"
            self._strings[text] = glob
        return glob

    def add_site(self, array: str, op: Operation | None) -> int:
        loc = op.loc if op is not None else UNKNOWN
        self.sites.append(BoundsSite(array, loc, op.id if op is not None else ""))
        return len(self.sites) - 1


    def raise_number(self, op: Operation) -> int:
        """`op`'s number among the module's raises (what the launch reads back)."""
        if self._raises is None:
            self._raises = {found: k for k, found in enumerate(raises(self.module))}
        return self._raises[op]


def _scalar_constant(element: ll.Type, t: Scalar, value: Any) -> ll.Constant:
    if t.is_complex:   # {re, im}, as NumPy lays complex numbers out
        part = element.elements[0]
        return ll.Constant(element, [ll.Constant(part, float(value.real)),
                                     ll.Constant(part, float(value.imag))])
    if t.is_float:
        return ll.Constant(element, float(value))
    wrapped = int(value) & ((1 << element.width) - 1)
    if wrapped >= 1 << (element.width - 1):
        wrapped -= 1 << element.width
    return ll.Constant(element, wrapped)


def lower_module(module: Module, target: Target, **options: Any) -> ModuleLowering:
    """Lower `module` for `target`; the result holds the llvmlite module and bounds sites."""
    lowering = ModuleLowering(module, target, **options)
    lowering.lower()
    return lowering
