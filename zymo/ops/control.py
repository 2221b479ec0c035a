"""Structured control flow and functions (`control.*`, `func.*`).

`if`, `for` and `while` own single-block regions ending in a terminator that hands values
back to the op; loop-carried values are block arguments. There is no arbitrary CFG.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..diagnostics import StepLimitError
from ..ir.operation import Region, attr, operand, region, result
from ..ir.traits import (CallsFunction, Conditional, CountedLoop, IsolatedFromAbove, Loop,
                         Terminator, WritesMemory)
from ..ir.types import FunctionType, Scalar, bool_
from .base import Op, require
from . import lowering
from .adjoints import nondifferentiable
from .mutations import operands_only
from .registry import (ADJOINT, INTERP, JVP, LOWER, MUTATION, TYPING, absent, adjoint_rule,
                       interp_rule, jvp_rule, lower_rule, typing_rule)
from .structural import FORWARD_IF, FORWARD_LOOP, REVERSE_FOR, REVERSE_IF, REVERSE_WHILE


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


def _hand_back(ctx, op, *values):
    """A terminator's interp rule: its operands are the values its region hands back."""
    return values


interp_rule(Yield, _hand_back)
absent(LOWER, Yield, "the lowering of the enclosing op reads a terminator's operands")
absent(ADJOINT, Yield, "the enclosing op's adjoint rule seeds the yielded values")
absent(JVP, Yield, "the enclosing op's tangent rule yields the tangents beside the values")
operands_only(Yield)


class Condition(Op):
    """Ends the `before` region of a while: the loop goes on while `cond` holds."""

    name = "control.condition"
    traits = (Terminator,)
    cond = operand()


typing_rule(Condition, lambda types, attrs: [])
interp_rule(Condition, _hand_back)
absent(LOWER, Condition, "the lowering of the enclosing while reads its operand")
nondifferentiable(Condition, "a loop condition")
operands_only(Condition)


class If(Op):
    """%r = control.if(%cond) then {...} else {...}; both branches yield the result types."""

    name = "control.if"
    traits = (Conditional,)
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


def _if_interp(ctx, op, cond):
    """Each branch runs for the threads that take it; results are merged per thread."""
    cond = np.asarray(cond, bool)
    then_values = ctx.run_region(op.then_region, (), ctx.mask & cond)
    else_values = ctx.run_region(op.else_region, (), ctx.mask & ~cond)
    if then_values is None or else_values is None:  # no thread took one of the branches
        return then_values if else_values is None else else_values
    return ctx.merge(cond, then_values, else_values)


interp_rule(If, _if_interp)
lower_rule(If, lowering.lower_if)
adjoint_rule(If, REVERSE_IF)
jvp_rule(If, FORWARD_IF)


class For(Op):
    """Python `range(lb, ub, step)` loop: body(%iv, *carried) yields the next carried values.
    `sweep` is "reverse" for the loop a derivative runs a loop's iterations back in, and
    "recompute" for a primal loop its reverse sweep runs again to recompute values (a target
    that unrolls loops fully gives those smaller budgets: their bodies sit beside the adjoints
    and the forward sweep's copies in the same kernel)."""

    name = "control.for"
    traits = (Loop, CountedLoop)
    sweep = attr(default="", required=False)
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


def _for_interp(ctx, op, lower, upper, step, *inits):
    """Python `range` per thread: bounds and step may differ between threads, and each
    thread leaves after its own trip count (computed in i64, so the induction variable
    never overflows on the way)."""
    lower, upper, step = (np.asarray(v).astype(np.int64) for v in (lower, upper, step))
    if np.any(ctx.mask & (step == 0)):
        raise ctx.error(op, "range() step must not be zero")
    safe_step = np.where(step == 0, 1, step)
    trips = np.maximum(0, -((lower - upper) // safe_step))  # ceil((upper - lower) / step)
    iv_type = op.lower.type.dtype
    carried = list(inits)
    active = ctx.mask & (trips > 0)
    done = 0
    while active.any():
        iv = (lower + done * step).astype(iv_type)
        values = ctx.run_region(op.body, (iv, *carried), active)
        carried = ctx.merge(active, values, carried)
        done += 1
        active = active & (trips > done)
    return tuple(carried)


interp_rule(For, _for_interp)
lower_rule(For, lowering.lower_for)
adjoint_rule(For, REVERSE_FOR)
jvp_rule(For, FORWARD_LOOP)


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


def waits_for_other_threads(loop) -> bool:
    """Whether only another thread can end `loop`: a loop that may not terminate (no counted
    range) whose body changes no carried value and writes no memory, so that its condition can
    turn only by other threads' writes (a spin-wait on a flag). Backends that run threads one
    after another (the CPU, the interpreter's lockstep) may never run the thread it waits for:
    they bound such loops and report."""
    if not loop.has_trait(Loop) or loop.has_trait(CountedLoop):
        return False
    body = loop.regions[-1]
    term = body.block.terminator
    if any(value is not arg for value, arg in zip(term.operands, body.block.args)):
        return False
    return not any(op.has_trait(WritesMemory) for op in body.walk())


# Iterations of a loop that waits for other threads (`waits_for_other_threads`) before the
# interpreter gives up: in lockstep the thread it waits for has not run, or will not (the CPU
# backend's limit: `Target.spin_limit`).
SPIN_LIMIT_INTERP = 1 << 16


def spin_error(loc) -> str:
    return (f"{loc}: this loop waits for other threads to change memory (it changes nothing "
            f"itself), and they did not: on this backend the threads of a launch run one after "
            f"another (or in lockstep), so the thread it waits for may only run after it\n"
            f"hint: launch on the GPU, or hand the value over through a barrier "
            f"(zm.syncthreads()) or a separate launch")


typing_rule(While, lambda types, attrs: list(types))


def _while_interp(ctx, op, *inits):
    """Iterates while any thread goes on; each thread leaves when its condition fails,
    keeping the carried values it had then."""
    carried = list(inits)
    active = ctx.mask
    spins = waits_for_other_threads(op)
    for iteration in itertools.count():
        (cond,) = ctx.run_region(op.before, carried, active)
        active = active & np.asarray(cond, bool)
        if not active.any():
            return tuple(carried)
        if spins and iteration >= SPIN_LIMIT_INTERP:
            raise StepLimitError(spin_error(op.loc))
        values = ctx.run_region(op.body, carried, active)
        carried = ctx.merge(active, values, carried)


interp_rule(While, _while_interp)
lower_rule(While, lowering.lower_while)
adjoint_rule(While, REVERSE_WHILE)
jvp_rule(While, FORWARD_LOOP)


class Return(Op):
    """Ends a function body with its results."""

    name = "func.return"
    traits = (Terminator,)
    values = operand(variadic=True)


typing_rule(Return, lambda types, attrs: [])
interp_rule(Return, _hand_back)
absent(LOWER, Return, "the function lowering returns the terminator's operands")
absent(ADJOINT, Return, "the reverse sweep starts from the function's end")
absent(JVP, Return, "the forward transform returns the tangents beside the results")
operands_only(Return)


class Call(Op):
    """%r = func.call(%args) {callee = "name", callee_type = (...) -> (...)}"""

    name = "func.call"
    traits = (CallsFunction,)
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
interp_rule(Call, lambda ctx, op, *args: ctx.call(op.callee, args))
lower_rule(Call, lambda ctx, op, *args: ctx.call_function(op.callee, list(args)))
# Every device function but a recursive one is inlined before differentiation
# (passes/inline.py); the transforms refuse a kernel that still calls one, at the call
# (ad/activity.py: reject_calls), rather than take its results as constants.
RECURSIVE_CALL = ("a recursive device function cannot be differentiated: its calls stay calls, "
                  "and zymo differentiates inlined code")
nondifferentiable(Call, RECURSIVE_CALL)


class DerivativeCall(Op):
    """%r = func.call_derivative(%args) {callee, callee_type, mode, kinds, width, seeds}

    A call of a derivative of device function `callee` inside a kernel. Forward mode
    (`mode = "jvp"`: `zm.jvp(f, ...)`, `zm.jacfwd(f)(...)`): `kinds[i]` says how the callee's
    argument i takes part ("const", "dup": followed by `width` tangent arguments, "seed": its
    tangents are the constants `seeds[i]`); the results are the callee's, then `width` tangents
    per float result. Reverse mode (`mode = "vjp"`: `zm.vjp`, `zm.grad(f)`, `zm.jacrev`): the
    callee's arguments are followed by one cotangent per result position listed in `seeds`
    (float results; the others' cotangents are zero); `kinds[i]` is "active" or "const"; the
    results are the callee's, then the adjoint of each active argument.
    `zymo.ad.expand_derivative_calls` replaces it by a `func.call` of the derivative function
    it builds, before inlining."""

    name = "func.call_derivative"
    args = operand(variadic=True)
    results_ = result(variadic=True)
    callee = attr()
    callee_type = attr()
    mode = attr()
    kinds = attr()
    width = attr()
    seeds = attr()


def _derivative_call_types(types, attrs):
    ftype = attrs["callee_type"]
    require(isinstance(ftype, FunctionType), "callee_type must be a function type")
    require(attrs["mode"] in ("jvp", "vjp"), "mode must be \"jvp\" or \"vjp\"")
    if attrs["mode"] == "vjp":
        return list(ftype.outputs) + [t for t, kind in zip(ftype.inputs, attrs["kinds"])
                                      if kind == "active"]
    width = attrs["width"]
    tangents = [t for t in ftype.outputs if isinstance(t, Scalar) and t.is_float]
    return list(ftype.outputs) + [t for t in tangents for _ in range(width)]


_EXPANDED = "expanded into a call of the derivative function by zymo.ad before inlining"
typing_rule(DerivativeCall, _derivative_call_types)
absent(INTERP, DerivativeCall, _EXPANDED)
absent(LOWER, DerivativeCall, _EXPANDED)
absent(JVP, DerivativeCall, "derivatives of derivatives are not supported yet")
absent(ADJOINT, DerivativeCall, "derivatives of derivatives are not supported yet")
absent(MUTATION, DerivativeCall, _EXPANDED)


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
absent(INTERP, Func, "functions are entered by the interpreter's run() and by func.call")
absent(LOWER, Func, "each function becomes an LLVM function in backend/llvm/module.py")
absent(ADJOINT, Func, "the reverse transform builds the derivative function itself")
absent(JVP, Func, "the forward transform builds the derivative function itself")
absent(MUTATION, Func, "evolution edits the ops of a function's body, never the function")


