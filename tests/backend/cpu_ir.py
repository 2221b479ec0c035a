"""Hand-built IR kernels for the CPU backend tests: a small builder over `zymo.ir.Builder`."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from zymo.ir import Builder, Module
from zymo.ir.operation import Operation
from zymo.ir.types import FunctionType, Scalar, Type, i32
from zymo.ir.values import Value
from zymo.ir.verifier import check
from zymo.ops import arith, control, memory, thread


class KernelIR(Builder):
    """Builds one kernel: `KernelIR("name", a=f32, x=Array(f32, 1))`; `finish()` gives the
    verified module. Structured ops take Python callables that build their regions."""

    def __init__(self, name: str, **params: Type):
        ftype = FunctionType(tuple(params.values()), ())
        self.func = control.Func([], [], {"sym_name": name, "function_type": ftype,
                                         "kind": "kernel", "arg_names": tuple(params)})
        block = self.func.regions[0].block
        super().__init__(block)
        self.name = name
        self.args = {n: block.add_arg(t, n) for n, t in params.items()}
        self.devices: list[Operation] = []

    def __getitem__(self, name: str) -> Value:
        return self.args[name]

    # ---- values -------------------------------------------------------------------------
    def const(self, value, t: Scalar) -> Value:
        return self.value(arith.Constant, value=value, type=t)

    def op(self, cls: type[Operation], *operands: Value, **attrs) -> Value:
        return self.value(cls, *operands, **attrs)

    def tid(self, axis: str = "x") -> Value:
        return self.value(thread.ThreadIdx, axis=axis)

    def special(self, cls: type[Operation], axis: str = "x") -> Value:
        return self.value(cls, axis=axis)

    def global_id(self, axis: str = "x") -> Value:
        """blockIdx * blockDim + threadIdx (i32)."""
        block = self.value(thread.BlockIdx, axis=axis)
        size = self.value(thread.BlockDim, axis=axis)
        return self.op(arith.Add, self.op(arith.Mul, block, size), self.tid(axis))

    def cast(self, x: Value, to: Scalar) -> Value:
        return self.op(arith.Cast, x, to=to)

    def cmp(self, predicate: str, a: Value, b: Value) -> Value:
        return self.op(arith.Cmp, a, b, predicate=predicate)

    def dim(self, array: Value, axis: int = 0) -> Value:
        return self.op(memory.Dim, array, axis=axis)

    def load(self, array: Value, *indices: Value) -> Value:
        return self.op(memory.Load, array, *indices)

    def store(self, array: Value, *rest: Value) -> None:
        self.create(memory.Store, array, *rest)

    # ---- structure ----------------------------------------------------------------------
    def if_(self, cond: Value, then: Callable[[], Sequence[Value]],
            else_: Callable[[], Sequence[Value]] = lambda: (),
            types: Sequence[Type] = ()) -> list[Value]:
        op = self.create(control.If, cond, result_types=list(types))
        for region, body in ((op.regions[0], then), (op.regions[1], else_)):
            with self.at_end(region.block):
                self.create(control.Yield, *(body() or ()))
        return op.results

    def for_(self, lower: Value, upper: Value, step: Value, inits: Sequence[Value],
             body: Callable[..., Sequence[Value]]) -> list[Value]:
        op = self.create(control.For, lower, upper, step, *inits,
                         result_types=[v.type for v in inits])
        block = op.regions[0].block
        iv = block.add_arg(lower.type, "i")
        carried = [block.add_arg(v.type) for v in inits]
        with self.at_end(block):
            self.create(control.Yield, *(body(iv, *carried) or ()))
        return op.results

    def while_(self, inits: Sequence[Value], cond: Callable[..., Value],
               body: Callable[..., Sequence[Value]]) -> list[Value]:
        op = self.create(control.While, *inits, result_types=[v.type for v in inits])
        before, after = op.regions[0].block, op.regions[1].block
        for block, build, end in ((before, cond, control.Condition),
                                  (after, body, control.Yield)):
            args = [block.add_arg(v.type) for v in inits]
            with self.at_end(block):
                produced = build(*args)
                self.create(end, *([produced] if end is control.Condition else produced))
        return op.results

    def call(self, callee: str, outputs: Sequence[Type], *args: Value) -> list[Value]:
        ftype = FunctionType(tuple(a.type for a in args), tuple(outputs))
        return self.create(control.Call, *args, callee=callee, callee_type=ftype).results

    def device(self, name: str, params: dict[str, Type], outputs: Sequence[Type],
               body: Callable[..., Sequence[Value]]) -> None:
        """A device function built by `body(*args)` (with this builder) returning its values."""
        ftype = FunctionType(tuple(params.values()), tuple(outputs))
        func = control.Func([], [], {"sym_name": name, "function_type": ftype,
                                         "kind": "device", "arg_names": tuple(params)})
        block = func.regions[0].block
        args = [block.add_arg(t, n) for n, t in params.items()]
        with self.at_end(block):
            self.create(control.Return, *body(*args))
        self.devices.append(func)

    def finish(self) -> Module:
        self.create(control.Return)
        module = Module(self.name)
        module.add(self.func)
        for func in self.devices:
            module.add(func)
        check(module)
        return module


def i32c(k: KernelIR, value: int) -> Value:
    return k.const(value, i32)
