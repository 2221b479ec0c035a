"""Exceptions raised in kernels (`error.raise`): `raise E(...)`, and the checks a debug build
adds (division by zero, a tuple index out of range), as numba's CUDA target has them.

A thread that raises stops. A checked build (numba's `debug=True`, zymo's `boundscheck=True`)
records the first raise of the launch in the error buffer (the raise's number among the
module's raises, the thread and its block) and the launch raises the exception on the host, its
message prefixed as numba's: "In function 'f', file F, line L, tid=[z, y, x] ctaid=[z, y, x]:
message". An unchecked build records nothing (numba's: the thread just ends). The class and the
constant arguments are compile-time data, held in the op's attributes.
"""
from __future__ import annotations

import os

import numpy as np

from ..ir.operation import Operation, attr, operand
from ..ir.traits import Output
from ..ir.types import Scalar
from .adjoints import nondifferentiable
from .base import Op, require
from .mutations import operands_only
from .registry import interp_rule, lower_rule, typing_rule


class Raise(Op):
    """error.raise(%cond) {exception, args, function}: the threads where `cond` holds raise
    `exception(*args)` and stop (the frontend ends them: a `raise` statement returns, as the
    function's `return` does; a check's lowering leaves the thread in a checked build)."""

    name = "error.raise"
    traits = (Output,)
    cond = operand()
    exception = attr()     # the exception class
    args = attr()          # its constant arguments (a tuple)
    function = attr()      # the name of the Python function the raise is written in


def _types(types, attrs):
    require(isinstance(types[0], Scalar) and types[0].is_bool, "the condition must be a bool")
    require(isinstance(attrs.get("exception"), type)
            and issubclass(attrs["exception"], BaseException), "raise needs an exception class")
    return []


def raises(module) -> list[Operation]:
    """The module's raises in a fixed order: the number the error buffer records is an index
    into this list (the backends lower and the launches read the same codegen IR)."""
    return [op for op in module.walk() if isinstance(op, Raise)]


def host_exception(op: Operation, tid, ctaid) -> BaseException:
    """The exception `op` raises on the host for thread `tid` of block `ctaid` (x, y, z each),
    its message prefixed with where it was raised, as numba words it."""
    loc = op.loc
    where = f"In function {op.function!r}, file {os.path.abspath(loc.file)}, line {loc.line}, " \
        if loc.line else ""
    prefix = f"{where}tid={list(reversed([int(v) for v in tid]))} " \
             f"ctaid={list(reversed([int(v) for v in ctaid]))}"
    args = tuple(op.args)
    args = (f"{prefix}: {args[0]}",) + args[1:] if args else (prefix,)
    try:
        return op.exception(*args)
    except Exception:   # a class whose constructor takes other arguments: its plain instance
        error = op.exception.__new__(op.exception)
        error.args = args
        return error


def _interp(ctx, op, cond):
    """The first active thread (in launch order) where `cond` holds raises; unchecked runs let
    the threads end (the frontend's return, or the check's clamped value)."""
    hit = np.broadcast_to(np.asarray(cond, bool), ctx.mask.shape) & ctx.mask
    if not ctx.check_bounds or not hit.any():
        return
    thread = int(np.argmax(hit))
    batch = ctx.batch
    error = host_exception(op, [batch.tid[a][thread] for a in "xyz"],
                           [batch.ctaid[a][thread] for a in "xyz"])
    error._zymo_noted = True   # the kernel's own exception: its message says where already
    raise error


typing_rule(Raise, _types)
interp_rule(Raise, _interp)
lower_rule(Raise, lambda ctx, op, cond: ctx.raise_where(op, cond))
# which exception, and where, is the program's behaviour: evolution may only rewire the test
operands_only(Raise)
# the forward sweep raises as the primal did; the reverse sweep has nothing to undo and never
# raises again (a thread that raised ended before its reverse sweep)
nondifferentiable(Raise, "a raise has no result: no derivative flows through it")
