"""Recursive device functions: a call of a function whose body is being lowered.

Device functions are inlined, except those in a cycle of calls (passes/inline.py keeps them
as functions and their calls as `func.call`). The frontend lowers a body once, top to
bottom, so a recursive call needs the function's result type before the body is done: it is
the declared one (an explicit signature), else the type of a `return` lowered before the call
(numba's rule: the base case gives the type). When the whole body is lowered, its result must
have the type the recursive calls assumed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.types import Scalar
from . import carried
from .convert import UserError
from .values import PyConst, Weak, carrier_type

# a chain of calls of one function with ever-changing argument shapes (compile-time constants
# that differ at each level) is specialized this deep before it is an error
MAX_SPECIALIZATIONS = 16


@dataclass
class Pending:
    """A device function whose body is being lowered, as recursive calls see it."""

    py_func: object
    key: tuple
    name: str
    declared: Scalar | None = None    # the return type of an explicit signature
    returns: list = field(default_factory=list)   # shapes of the returns lowered so far
    assumed: object = None             # the result shape the recursive calls were given
    returns_value: bool = True         # its body has a `return <value>`

    def returned(self, value, node) -> None:
        """Record a `return` (value None for a bare one); one of a type other than the
        recursive calls assumed is an error here, before the paths are joined."""
        shape = carried.Missing() if value is None else carried.abstract(value, "return value",
                                                                        node)
        self.returns.append(shape)
        if self.assumed is not None and self.declared is None and \
                not _compatible(self.assumed, shape):
            raise non_converging(node, self.py_func)

    def result_shape(self, node):
        """The result shape a recursive call gets."""
        if self.assumed is None:
            if self.declared is not None:
                self.assumed = carried.Leaf(self.declared, False)
            elif self.returns:
                self.assumed = self.returns[0]
            elif not self.returns_value:
                self.assumed = carried.Missing()
            else:
                name = self.py_func.__name__
                raise UserError(node, "cannot type infer runaway recursion",
                                f"{name} calls itself before any return gives its result type: "
                                f"return the base case first, or give {name} an explicit "
                                f"signature")
        return self.assumed

    def check(self, shape, node):
        """The body's final result shape against the one the recursive calls assumed; the
        shape the function returns (numbers converted to the assumed type)."""
        if self.assumed is None:
            return shape
        if not _compatible(self.assumed, shape):
            raise non_converging(node, self.py_func)
        return _typed(self.assumed)


def non_converging(node, py_func) -> UserError:
    return UserError(node, f"Return type of recursive function does not converge: "
                           f"{py_func.__name__} returns values of different types",
                     "return values of one type on every path (a growing tuple cannot be "
                     "typed)")


def _compatible(assumed, b) -> bool:
    """Whether a function returning `b` can give recursive calls the result `assumed`: the
    same IR types, or numbers the assumed type holds where the assumption came from a
    literal (numba's `return 0` is an int64 whatever the other returns' integers)."""
    if isinstance(assumed, carried.Missing) or isinstance(b, carried.Missing):
        return isinstance(assumed, carried.Missing) and isinstance(b, carried.Missing)
    if isinstance(assumed, carried.Leaf) and isinstance(b, carried.Leaf):
        if assumed.weak and not b.type.is_bool and not assumed.type.is_bool:
            return assumed.type.is_float or not b.type.is_float
        return assumed.type == b.type
    if isinstance(assumed, carried.Group) and isinstance(b, carried.Group):
        return len(assumed.items) == len(b.items) and \
            all(_compatible(x, y) for x, y in zip(assumed.items, b.items))
    return False


def _typed(shape):
    """`shape` with its numbers typed, not weak: the function's results."""
    if isinstance(shape, carried.Leaf):
        return carried.Leaf(shape.type, False)
    if isinstance(shape, carried.Group):
        return carried.Group(tuple(_typed(item) for item in shape.items), shape.fields)
    return shape


def find(stack: list, py_func, key) -> Pending | None:
    """The function being lowered that a call of `py_func` with argument `key` recurses into,
    or None. A chain of ever-different specializations is an error."""
    for pending in stack:
        if pending.py_func is py_func and pending.key == key:
            return pending
    return None


def widen(lw, stack: list, py_func, args: list) -> list:
    """The arguments of a call of `py_func`, numbers passed as compile-time constants made
    run-time values when `py_func` is being lowered already (numba types a literal as an
    int64 or float64): a recursion on a constant (`f(n - 1)` from `f(10)`) then reaches the
    same specialization again instead of unrolling."""
    if not any(p.py_func is py_func for p in stack):
        return args
    return [Weak(lw.constant(a.value, carrier_type(isinstance(a.value, float))))
            if isinstance(a, PyConst) and isinstance(a.value, (int, float))
            and not isinstance(a.value, bool) else a for a in args]


def check_depth(stack: list, py_func, node) -> None:
    if sum(p.py_func is py_func for p in stack) >= MAX_SPECIALIZATIONS:
        raise UserError(node, f"recursive call of {py_func.__name__} with arguments whose types "
                              f"or compile-time values change at every level",
                        "pass numbers that change as run-time values of one type (not "
                        "constants), or give it an explicit signature")
