"""Hand-built kernels for the backend tests: a builder with one short method per construct."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from zymo.diagnostics import Loc
from zymo.ir import Block, Builder, Module, Region
from zymo.ir.types import Array, FunctionType, Scalar, Type, bool_, i32
from zymo.ir.values import Value
from zymo.ir.verifier import check
from zymo.ops import arith, atomic, control, memory, sync, thread, warp

FILE = "kernel.py"


def array(dtype: Scalar, ndim: int = 1, layout: str = "A") -> Array:
    return Array(dtype, ndim, "global", layout)


class KernelBuilder(Builder):
    """Builds one function of `module` (a new one by default); every op gets the source
    location `kernel.py:<line>:1`, where `line` counts the ops created so far, unless set
    with `at(line)`."""

    def __init__(self, name: str, args: Sequence[tuple[str, Type]], outputs: Sequence[Type] = (),
                 kind: str = "kernel", module: Module | None = None):
        self.module = module or Module(name)
        block = Block([t for _, t in args], [n for n, _ in args])
        ftype = FunctionType(tuple(t for _, t in args), tuple(outputs))
        self.func = control.Func([], [], {"sym_name": name, "kind": kind, "function_type": ftype,
                                          "arg_names": tuple(n for n, _ in args)},
                                 [Region(block)])
        self.module.add(self.func)
        super().__init__(block)
        self.args = {n: a for (n, _), a in zip(args, block.args)}
        self.line = 1

    def at(self, line: int) -> KernelBuilder:
        self.line = line
        return self

    def insert(self, op):
        op.loc = Loc(FILE, self.line, 1)
        self.line += 1
        return super().insert(op)

    def __getitem__(self, name: str) -> Value:
        return self.args[name]

    # ---- values ------------------------------------------------------------------------
    def const(self, value, type: Type = i32) -> Value:
        return self.value(arith.Constant, value=value, type=type)

    def binary(self, cls, lhs: Value, rhs: Value | float) -> Value:
        if not isinstance(rhs, Value):
            rhs = self.const(rhs, lhs.type)
        return self.value(cls, lhs, rhs)

    def add(self, a, b):
        return self.binary(arith.Add, a, b)

    def sub(self, a, b):
        return self.binary(arith.Sub, a, b)

    def mul(self, a, b):
        return self.binary(arith.Mul, a, b)

    def mod(self, a, b):
        return self.binary(arith.Mod, a, b)

    def cmp(self, predicate: str, a: Value, b: Value | float) -> Value:
        if not isinstance(b, Value):
            b = self.const(b, a.type)
        return self.value(arith.Cmp, a, b, predicate=predicate)

    def cast(self, value: Value, to: Scalar) -> Value:
        return self.value(arith.Cast, value, to=to)

    def special(self, cls, axis: str = "x") -> Value:
        return self.value(cls, axis=axis)

    def tid(self, axis: str = "x") -> Value:
        return self.special(thread.ThreadIdx, axis)

    def global_id(self) -> Value:
        """blockIdx.x * blockDim.x + threadIdx.x"""
        block = self.mul(self.special(thread.BlockIdx), self.special(thread.BlockDim))
        return self.add(block, self.tid())

    # ---- memory ------------------------------------------------------------------------
    def load(self, array_: Value, *indices: Value) -> Value:
        return self.value(memory.Load, array_, *indices)

    def store(self, array_: Value, *indices_and_value: Value) -> None:
        self.create(memory.Store, array_, *indices_and_value)

    def dim(self, array_: Value, axis: int = 0) -> Value:
        return self.value(memory.Dim, array_, axis=axis)

    def shared(self, shape: tuple[int, ...], dtype: Scalar, name: str = "") -> Value:
        value = self.value(memory.SharedAlloc, shape=shape, dtype=dtype)
        value.name_hint = name
        return value

    def local(self, shape: tuple[int, ...], dtype: Scalar) -> Value:
        return self.value(memory.LocalAlloc, shape=shape, dtype=dtype)

    def atomic(self, cls, array_: Value, *operands: Value) -> Value:
        return self.value(cls, array_, *operands)

    def barrier(self) -> None:
        self.create(sync.Barrier)

    def warp(self, cls, *operands: Value) -> Value:
        return self.value(cls, *operands)

    # ---- control -----------------------------------------------------------------------
    def if_(self, cond: Value, types: Sequence[Type], then: Callable[[], Sequence[Value]],
            otherwise: Callable[[], Sequence[Value]] = lambda: ()) -> list[Value]:
        op = self.create(control.If, cond, result_types=list(types), regions=[Region(), Region()])
        for region, fill in zip(op.regions, (then, otherwise)):
            with self.at_end(region.block):
                self.create(control.Yield, *fill())
        return op.results

    def for_(self, lower: Value, upper: Value, step: Value, inits: Sequence[Value],
             body: Callable[..., Sequence[Value]]) -> list[Value]:
        block = Block([lower.type, *(v.type for v in inits)])
        op = self.create(control.For, lower, upper, step, *inits,
                         result_types=[v.type for v in inits], regions=[Region(block)])
        with self.at_end(block):
            self.create(control.Yield, *body(*block.args))
        return op.results

    def while_(self, inits: Sequence[Value], before: Callable[..., Value],
               body: Callable[..., Sequence[Value]]) -> list[Value]:
        types = [v.type for v in inits]
        before_block, body_block = Block(types), Block(types)
        op = self.create(control.While, *inits, result_types=types,
                         regions=[Region(before_block), Region(body_block)])
        with self.at_end(before_block):
            self.create(control.Condition, before(*before_block.args))
        with self.at_end(body_block):
            self.create(control.Yield, *body(*body_block.args))
        return op.results

    def call(self, callee: str, outputs: Sequence[Type], *args: Value) -> list[Value]:
        ftype = FunctionType(tuple(a.type for a in args), tuple(outputs))
        return self.create(control.Call, *args, callee=callee, callee_type=ftype).results

    def finish(self, *values: Value) -> Module:
        """End the function with func.return, verify the module and return it."""
        self.create(control.Return, *values)
        check(self.module if self.module.entry == self.func.attrs["sym_name"] else self.func)
        return self.module


__all__ = [
    "KernelBuilder",
    "arith",
    "array",
    "atomic",
    "bool_",
    "control",
    "i32",
    "memory",
    "sync",
    "thread",
    "warp",
]
