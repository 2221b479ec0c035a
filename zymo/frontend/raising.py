"""`raise` in kernels and the checks a checked build adds, as `error.raise` ops (ops/raising.py).

A `raise` statement names an exception class, or calls one with constant arguments, or names an
exception instance defined outside the kernel; the thread then returns (the lowerer sets the
return flag, so the statements after it are skipped as after a `return`). A checked build
(numba's `debug=True`: the Python error model) also raises ZeroDivisionError on a division by
zero (not under fastmath, as numba's fast division) and IndexError on a tuple index out of
range; an unchecked one divides as NumPy does (inf, nan; integers give 0).
"""
from __future__ import annotations

import ast

from ..ir import types as T
from ..ops import arith
from ..ops.raising import Raise
from .convert import UserError, describe
from .values import Obj, PyConst

# numba's messages for a division by zero (integer ones name the integer operation)
_ZERO_DIVISION = {("truediv", False): "division by zero", ("truediv", True): "division by zero",
                  ("floordiv", False): "division by zero",
                  ("floordiv", True): "integer division by zero",
                  ("mod", False): "modulo by zero", ("mod", True): "integer modulo by zero"}


def statement(lw, node: ast.Raise) -> None:
    """`raise E`, `raise E(args)` or `raise instance`: the thread raises and returns."""
    if node.exc is None:
        raise UserError(node, "a bare `raise` re-raises, and kernels catch no exception",
                        "raise an exception class: raise ValueError(\"message\")")
    exception, args = _exception(lw, node.exc)
    raise_where(lw, lw.constant(True, T.bool_), exception, args)


def raise_where(lw, cond, exception: type, args: tuple = ()) -> None:
    """The threads where IR bool `cond` holds raise `exception(*args)`."""
    lw.b.create(Raise, cond, exception=exception, args=tuple(args), function=lw.source.name)


def _exception(lw, node: ast.expr) -> tuple[type, tuple]:
    if isinstance(node, ast.Call):
        callee = lw.expr(node.func)
        if not _is_exception_class(callee):
            raise UserError(node.func, f"cannot raise {describe(callee)}",
                            "raise an exception class, e.g. raise ValueError(\"message\")")
        if node.keywords:
            raise UserError(node, "an exception in a kernel takes no keyword arguments",
                            "pass its arguments by position")
        args = tuple(_constant(lw, arg) for arg in node.args)
        return callee.obj, args
    found = lw.expr(node)
    if _is_exception_class(found):
        return found.obj, ()
    if isinstance(found, Obj) and isinstance(found.obj, BaseException):
        return type(found.obj), tuple(found.obj.args)
    raise UserError(node, f"cannot raise {describe(found)}",
                    "raise an exception class, e.g. raise ValueError(\"message\")")


def _constant(lw, node: ast.expr):
    value = lw.expr(node)
    if isinstance(value, PyConst):
        return value.value
    if isinstance(value, Obj) and isinstance(value.obj, (str, bytes, int, float, complex,
                                                         bool, type(None))):
        return value.obj
    raise UserError(node, f"the arguments of an exception raised in a kernel are compile-time "
                          f"constants, not {describe(value)}",
                    "write the message as a string literal; store run-time values in an "
                    "output array")


def _is_exception_class(value) -> bool:
    return isinstance(value, Obj) and isinstance(value.obj, type) and \
        issubclass(value.obj, BaseException)


def check_divisor(lw, kind: str, written, divisor, integer: bool) -> None:
    """In a checked build, the threads dividing by IR value `divisor` (`written` as the kernel
    wrote it) where it is zero raise ZeroDivisionError: they never reach the division."""
    message = _ZERO_DIVISION.get((kind, integer))
    compiler = getattr(lw, "compiler", None)
    if message is None or compiler is None or not compiler.checked or \
            (compiler.fastmath and not integer):
        return
    if isinstance(written, PyConst) and written.value != 0:
        return
    zero = lw.b.value(arith.Cmp, divisor, lw.constant(0, divisor.type), predicate="eq")
    raise_where(lw, zero, ZeroDivisionError, (message,))


def check_tuple_index(lw, position, length: int) -> None:
    """In a checked build, a run-time tuple index outside [-length, length) raises IndexError
    (Python's message)."""
    if not lw.compiler.checked:
        return
    t = position.type
    high = lw.b.value(arith.Cmp, position, lw.constant(length, t), predicate="ge")
    outside = high
    if t.is_signed:
        low = lw.b.value(arith.Cmp, position, lw.constant(-length, t), predicate="lt")
        outside = lw.binary("or", low, high)
    raise_where(lw, outside, IndexError, ("tuple index out of range",))
