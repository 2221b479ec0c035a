"""The `operator` module's functions in kernels (`operator.add(a, b)`, or `op` passed to a
device function and called): each is the operator it names."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from .convert import AST_BINARY, AST_COMPARE, UserError
from .intrinsics import COMPLEX_FORMS, HANDLERS, _complex_operand
from .values import PyConst

_BINARY = {fn: kind for fn, kind in (
    (operator.add, "add"), (operator.sub, "sub"), (operator.mul, "mul"),
    (operator.truediv, "truediv"), (operator.floordiv, "floordiv"), (operator.mod, "mod"),
    (operator.pow, "pow"), (operator.and_, "and"), (operator.or_, "or"),
    (operator.xor, "xor"), (operator.lshift, "lshift"), (operator.rshift, "rshift"))}
_COMPARE = {operator.lt: "lt", operator.le: "le", operator.gt: "gt", operator.ge: "ge",
            operator.eq: "eq", operator.ne: "ne"}
_UNARY = {operator.neg: "neg", operator.pos: "plus", operator.invert: "invert",
          operator.not_: "not"}
assert set(_BINARY.values()) <= set(AST_BINARY.values())
assert set(_COMPARE.values()) == set(AST_COMPARE.values())

OPERATOR_PATHS = {fn: f"operator.{fn.__name__}" for fn in (*_BINARY, *_COMPARE, *_UNARY)}
# Python's pow(x, y) is x ** y
OPERATOR_PATHS[builtins.pow] = OPERATOR_PATHS[operator.pow]
# NumPy's ufuncs that are these operators on numbers (`np.add(a, b)`, and the element function
# of `np.add(x, y, out)` on arrays: frontend/ufuncs.py)
OPERATOR_PATHS.update({ufunc: OPERATOR_PATHS[fn] for ufunc, fn in (
    (np.add, operator.add), (np.subtract, operator.sub), (np.multiply, operator.mul),
    (np.true_divide, operator.truediv), (np.floor_divide, operator.floordiv),
    (np.remainder, operator.mod), (np.power, operator.pow), (np.bitwise_and, operator.and_),
    (np.bitwise_or, operator.or_), (np.bitwise_xor, operator.xor),
    (np.left_shift, operator.lshift), (np.right_shift, operator.rshift),
    (np.equal, operator.eq), (np.not_equal, operator.ne),
    (np.negative, operator.neg), (np.positive, operator.pos), (np.invert, operator.invert),
    (np.logical_not, operator.not_))})

# the ordering ufuncs: the operators on real numbers; on complex ones NumPy's order (which
# `<` itself does not have, in Python and in numba)
_ORDERING = {np.less: "lt", np.less_equal: "le", np.greater: "gt", np.greater_equal: "ge"}
OPERATOR_PATHS.update({ufunc: f"numpy.{ufunc.__name__}" for ufunc in _ORDERING})


def _ordering(ufunc: np.ufunc, predicate: str):
    def lower(lw, node, args, kwargs):
        if len(args) != 2 or kwargs:
            raise UserError(node, f"np.{ufunc.__name__} of numbers takes 2 arguments, got "
                                  f"{len(args)}")
        a, b = (lw.scalar(v, node) for v in args)
        if isinstance(a, PyConst) and isinstance(b, PyConst):
            return PyConst(bool(ufunc(a.value, b.value)))
        if _complex_operand([a, b]):
            return COMPLEX_FORMS["order"](lw, predicate, a, b, node)
        return lw.compare(predicate, a, b, node)
    return lower


def _binary(kind: str, name: str):
    def lower(lw, node, args, kwargs):
        if len(args) != 2 or kwargs:
            raise UserError(node, f"operator.{name} takes 2 arguments, got {len(args)}")
        return lw.binary(kind, lw.scalar(args[0], node), lw.scalar(args[1], node), node)
    return lower


def _compare(predicate: str, name: str):
    def lower(lw, node, args, kwargs):
        if len(args) != 2 or kwargs:
            raise UserError(node, f"operator.{name} takes 2 arguments, got {len(args)}")
        return lw.compare(predicate, lw.scalar(args[0], node), lw.scalar(args[1], node), node)
    return lower


def _unary(kind: str, name: str):
    def lower(lw, node, args, kwargs):
        if len(args) != 1 or kwargs:
            raise UserError(node, f"operator.{name} takes 1 argument, got {len(args)}")
        return lw.unary(kind, lw.scalar(args[0], node), node)
    return lower


for _fn, _kind in _BINARY.items():
    HANDLERS[OPERATOR_PATHS[_fn]] = _binary(_kind, _fn.__name__)
for _fn, _kind in _COMPARE.items():
    HANDLERS[OPERATOR_PATHS[_fn]] = _compare(_kind, _fn.__name__)
for _fn, _kind in _UNARY.items():
    HANDLERS[OPERATOR_PATHS[_fn]] = _unary(_kind, _fn.__name__)
for _fn, _kind in _ORDERING.items():
    HANDLERS[OPERATOR_PATHS[_fn]] = _ordering(_fn, _kind)
