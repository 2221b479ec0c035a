"""Structured control flow and functions (`control.*`, `func.*`).

`if`, `for` and `while` own single-block regions ending in a terminator that hands values
back to the op; loop-carried values are block arguments. There is no arbitrary CFG.
"""
from __future__ import annotations

from ..ir.operation import Region, attr, operand, region, result
from ..ir.traits import IsolatedFromAbove, Loop, Terminator
from ..ir.types import FunctionType, Scalar, bool_
from .base import Op, require
from .registry import TYPING, absent, typing_rule


def _region_check(op, reg: Region, expected_args, terminator_cls, expected_values, what: str):
    errors = []
    args = [a.type for a in reg.block.args]
    if args != list(expected_args):
        errors.append(f"{what} region arguments ({', '.join(map(str, args))}) should be "
                      f"({', '.join(map(str, expected_args))})")
    term = reg.block.ops[-1] if reg.block.ops else None
    if not isinstance(term, terminator_cls):
        errors.append(f"{what} region must end with {terminator_cls.name}")
        return errors
    got = [v.type for v in term.operands]
    if got != list(expected_values):
        errors.append(f"{what} region yields ({', '.join(map(str, got))}), expected "
                      f"({', '.join(map(str, expected_values))})")
    return errors


class Yield(Op):
    """Ends an if branch or a loop body, handing values to the enclosing op."""

    name = "control.yield"
    traits = (Terminator,)
    values = operand(variadic=True)


typing_rule(Yield, lambda types, attrs: [])


class Condition(Op):
    """Ends the `before` region of a while: the loop goes on while `cond` holds."""

    name = "control.condition"
    traits = (Terminator,)
    cond = operand()


typing_rule(Condition, lambda types, attrs: [])


class If(Op):
    """%r = control.if(%cond) then {...} else {...}; both branches yield the result types."""

    name = "control.if"
    cond = operand()
    results_ = result(variadic=True)
    then_region = region()
    else_region = region()

    @classmethod
    def infer_types(cls, operand_types, attrs):
        raise TypeError("control.if result types come from its branches")

    def verify_(self):
        errors = [] if self.operands[0].type == bool_ else ["condition must be bool"]
        types = [r.type for r in self.results]
        errors += _region_check(self, self.then_region, [], Yield, types, "then")
        errors += _region_check(self, self.else_region, [], Yield, types, "else")
        return errors


absent(TYPING, If, "its result types are those its branches yield (checked by verify_)")


class For(Op):
    """Python `range(lb, ub, step)` loop: body(%iv, *carried) yields the next carried values."""

    name = "control.for"
    traits = (Loop,)
    lower = operand()
    upper = operand()
    step = operand()
    inits = operand(variadic=True)
    results_ = result(variadic=True)
    body = region()

    def verify_(self):
        bounds = [v.type for v in self.operands[:3]]
        errors = []
        if not (isinstance(bounds[0], Scalar) and bounds[0].is_int and len(set(bounds)) == 1):
            errors.append(f"loop bounds must share one integer type, not {bounds}")
        carried = [v.type for v in self.inits]
        if [r.type for r in self.results] != carried:
            errors.append("result types must equal the carried value types")
        errors += _region_check(self, self.body, [bounds[0], *carried], Yield, carried, "body")
        return errors


typing_rule(For, lambda types, attrs: list(types[3:]))


class While(Op):
    """Loop: `before(*carried)` computes the condition, `body(*carried)` the next values."""

    name = "control.while"
    traits = (Loop,)
    inits = operand(variadic=True)
    results_ = result(variadic=True)
    before = region()
    body = region()

    def verify_(self):
        carried = [v.type for v in self.inits]
        errors = []
        if [r.type for r in self.results] != carried:
            errors.append("result types must equal the carried value types")
        errors += _region_check(self, self.before, carried, Condition, [bool_], "before")
        errors += _region_check(self, self.body, carried, Yield, carried, "body")
        return errors


typing_rule(While, lambda types, attrs: list(types))


class Return(Op):
    """Ends a function body with its results."""

    name = "func.return"
    traits = (Terminator,)
    values = operand(variadic=True)


typing_rule(Return, lambda types, attrs: [])


class Call(Op):
    """%r = func.call(%args) {callee = "name", callee_type = (...) -> (...)}"""

    name = "func.call"
    args = operand(variadic=True)
    results_ = result(variadic=True)
    callee = attr()
    callee_type = attr()


def _call_types(types, attrs):
    ftype = attrs["callee_type"]
    require(isinstance(ftype, FunctionType), "callee_type must be a function type")
    require(list(ftype.inputs) == list(types),
            f"call arguments ({', '.join(map(str, types))}) do not match {ftype}")
    return list(ftype.outputs)


typing_rule(Call, _call_types)


class Func(Op):
    """A kernel or device function: `kind` is "kernel" or "device"."""

    name = "func.func"
    traits = (IsolatedFromAbove,)
    sym_name = attr()
    function_type = attr()
    kind = attr(default="device")
    arg_names = attr(default=())
    body = region()

    def verify_(self):
        ftype = self.function_type
        return _region_check(self, self.body, list(ftype.inputs), Return, list(ftype.outputs),
                             "function")

    @property
    def args(self):
        return self.body.block.args


typing_rule(Func, lambda types, attrs: [])


