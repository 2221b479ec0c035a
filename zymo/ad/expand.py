"""Derivatives of device functions called inside kernels (`zm.jvp`, `zm.jacfwd`, `zm.vjp`,
`zm.grad(f)`, `zm.jacrev`): each `func.call_derivative` becomes a `func.call` of a derivative
function built here (forward mode: tangents; reverse mode: a pullback).

The callee is optimized on its own first (inlined, folded: differentiate after optimizing) by
the `optimize` it is handed: the compile driver's own stage (`runtime/compile.py`), so that a
callee goes through the stages a kernel does; then it is transformed, and the kernel's pipeline
inlines the derivative and optimizes it again with the code around it. One derivative function
is built per (callee, kinds, width, seeds).
"""
from __future__ import annotations

from typing import Callable

from ..ir.module import Module
from ..ops import control
from .forward import tangent_function
from .reverse import pullback_function


def expand_derivative_calls(module: Module, optimize: Callable[[Module], Module]) -> Module:
    """`module` with its derivative calls replaced; `optimize(callee_module)` returns the
    callee's module optimized (its own derivative calls expanded the same way)."""
    made: dict = {}
    for func in list(module):
        for op in list(func.walk()):
            if isinstance(op, control.DerivativeCall):
                _replace(module, op, made, optimize)
    return module


def _replace(module: Module, op: control.DerivativeCall, made: dict, optimize) -> None:
    key = (op.callee, op.mode, op.kinds, op.width, op.seeds)
    derivative = made.get(key)
    if derivative is None:
        derivative = made[key] = _build(module, op, len(made), optimize)
    ftype = derivative.attrs["function_type"]
    call = control.Call(list(op.operands), [r.type for r in op.results],
                        dict(callee=derivative.attrs["sym_name"], callee_type=ftype), [],
                        loc=op.loc, id=op.id)
    op.parent.insert_before(op, call)
    for old, new in zip(op.results, call.results):
        old.replace_all_uses_with(new)
    op.erase()


def _build(module: Module, op: control.DerivativeCall, serial: int, optimize):
    name = op.callee
    alone = Module(entry=name)
    for callee in _reachable(module, name):
        alone.add(module[callee].clone({}))
    alone = optimize(alone)
    new_name = f"{name}.{op.mode}{serial}"
    if op.mode == "vjp":
        derivative = pullback_function(alone[name], list(op.kinds), new_name, op.seeds)
    else:
        seeds = {index: list(seed) for index, seed in op.seeds}
        derivative = tangent_function(alone[name], list(op.kinds), op.width, seeds,
                                      name=new_name)
    module.add(derivative)
    return derivative


def _reachable(module: Module, name: str) -> list[str]:
    """`name` and the functions it calls, directly or not (device functions do not recurse)."""
    seen, work = [], [name]
    while work:
        current = work.pop()
        if current in seen or current not in module.functions:
            continue
        seen.append(current)
        work += [op.callee for op in module[current].walk()
                 if isinstance(op, (control.Call, control.DerivativeCall))]
    return seen
