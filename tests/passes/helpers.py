"""Building small IR modules for the pass tests, and running a pass with checks around it."""
from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence

from zymo.ir import Block, Builder, Module, Region
from zymo.ir.printer import print_module
from zymo.ir.types import FunctionType, Type, i32
from zymo.ir.values import Value
from zymo.ir.verifier import check
from zymo.ops.arith import Constant
from zymo.ops.control import Call, Condition, For, Func, If, Return, While, Yield
from zymo.ops.memory import Store


class FunctionBuilder(Builder):
    """A builder appending to a new function of `module`; `args` maps names to values."""

    def __init__(self, module: Module, name: str, args: Sequence[tuple[str, Type]],
                 outputs: Sequence[Type] = (), kind: str = "kernel"):
        block = Block([t for _, t in args], [n for n, _ in args])
        self.func = Func([], [], {"sym_name": name, "kind": kind,
                                  "function_type": FunctionType(tuple(t for _, t in args),
                                                                tuple(outputs))},
                         [Region(block)], id=f"@{name}")
        module.add(self.func)
        if kind == "kernel":
            module.entry = name
        super().__init__(block)
        self.args = {n: a for (n, _), a in zip(args, block.args)}
        self.prefix = name
        self.out_index: Value | None = None

    def next_id(self) -> str:
        return f"{self.prefix}.{next(self._counter)}"

    def const(self, value, type: Type) -> Value:
        return self.value(Constant, value=value, type=type)

    def keep(self, *values: Value) -> None:
        """Keep `values` alive: store each into `out_<its type>[0]` (an argument). The index
        constant is made once, first in the function, so it dominates every store."""
        if self.out_index is None:
            with self.at_end(self.func.regions[0].block):
                self.index = 0
                self.out_index = self.const(0, i32)
        for value in values:
            self.create(Store, self.args[f"out_{value.type}"], self.out_index, value)

    def ret(self, *values: Value) -> None:
        self.create(Return, *values)

    def call(self, callee: str, outputs: Sequence[Type], *args: Value) -> list[Value]:
        ftype = FunctionType(tuple(a.type for a in args), tuple(outputs))
        return self.create(Call, *args, callee=callee, callee_type=ftype).results

    def if_(self, cond: Value, types: Sequence[Type], then: Callable[[], Sequence[Value]],
            else_: Callable[[], Sequence[Value]] = lambda: ()) -> list[Value]:
        op = self.create(If, cond, result_types=list(types), regions=[Region(), Region()])
        for region, fill in zip(op.regions, (then, else_)):
            with self.at_end(region.block):
                self.create(Yield, *fill())
        return op.results

    def for_(self, lower: Value, upper: Value, step: Value, inits: Sequence[Value],
             body: Callable[..., Sequence[Value]]) -> list[Value]:
        block = Block([lower.type, *(v.type for v in inits)], ["i", *(f"c{k}" for k in
                                                                       range(len(inits)))])
        op = self.create(For, lower, upper, step, *inits, result_types=[v.type for v in inits],
                         regions=[Region(block)])
        with self.at_end(block):
            self.create(Yield, *body(*block.args))
        return op.results

    def while_(self, inits: Sequence[Value], before: Callable[..., Value],
               body: Callable[..., Sequence[Value]]) -> list[Value]:
        types = [v.type for v in inits]
        before_block, body_block = Block(types), Block(types)
        op = self.create(While, *inits, result_types=types,
                         regions=[Region(before_block), Region(body_block)])
        with self.at_end(before_block):
            self.create(Condition, before(*before_block.args))
        with self.at_end(body_block):
            self.create(Yield, *body(*body_block.args))
        return op.results


def run_checked(pass_, module: Module, **print_options) -> tuple[bool, str]:
    """Run `pass_` on a verified module, verify the result; (changed, printed IR)."""
    check(module, "test input")
    changed = pass_.run(module)
    check(module, pass_.name)
    return changed, print_module(module, **print_options)


def text(source: str) -> str:
    """Expected IR written as an indented triple-quoted string."""
    return textwrap.dedent(source).strip("\n")
