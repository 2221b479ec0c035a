"""Output to the host (`output.print`): `print(...)` in a kernel, as numba's (C's printf)."""
from __future__ import annotations

import numpy as np

from ..ir.operation import attr, operand
from ..ir.traits import Output
from ..ir.types import Scalar
from .base import Op, require
from .mutations import operands_only
from .adjoints import nondifferentiable
from .registry import interp_rule, lower_rule, typing_rule


class Print(Op):
    """output.print(%a, %b) {format = "x=%lld y=%f\\n"}: one line per thread that runs it,
    printf's `format` with one conversion per operand: `%lld` / `%llu` for integers (widened
    to 64 bits), `%f` for floats (as doubles). Threads print in no fixed order."""

    name = "output.print"
    traits = (Output,)
    values = operand(variadic=True)
    format = attr()


MAX_VALUES = 32   # what CUDA's vprintf formats


def conversion(t: Scalar) -> str:
    """The printf conversion of a value of type `t`, as the backends pass it: bools as the
    strings True and False (`%s`), integers widened to 64 bits, floats to double."""
    if t.is_bool:
        return "%s"
    if t.is_float:
        return "%f"
    return "%llu" if t.is_int and not t.is_signed else "%lld"


def _types(types, attrs):
    for t in types:
        require(isinstance(t, Scalar), f"print takes numbers, not {t}")
    return []


def _interp(ctx, op, *values):
    """Thread by thread in launch order, through Python's print (what pytest captures)."""
    columns = [np.broadcast_to(np.asarray(v), ctx.mask.shape) for v in values]
    text = op.format.replace("%lld", "%d").replace("%llu", "%d")
    for thread in np.flatnonzero(ctx.mask):
        row = tuple(bool(c[thread]) if c.dtype.kind == "b" else float(c[thread])
                    if c.dtype.kind == "f" else int(c[thread]) for c in columns)
        print(text % row, end="", flush=True)


typing_rule(Print, _types)
interp_rule(Print, _interp)
lower_rule(Print, lambda ctx, op, *values: ctx.target.print(
    ctx, op.format, list(zip(values, [v.type for v in op.values]))))
operands_only(Print)   # what a kernel prints is its output: evolution keeps the line
# printed by the forward sweep, as the primal did
nondifferentiable(Print, "print has no result: no derivative flows through it")
