"""Activity analysis: which values carry derivatives.

A value is *varied* when it depends on an active input (an `Active` scalar or an element loaded
from a differentiated array) and *useful* when it reaches an active output (a store or atomic add
into a differentiated array). Only values that are both, and are floats, get adjoints: integer and
index computations never do. Shared and local arrays become differentiated when a varied value is
stored into them. The answer is computed to a fixpoint over loops.
"""
from __future__ import annotations

from ..diagnostics import CompileError, Diagnostic
from ..ir.operation import Block, Operation
from ..ir.traits import (Aliases, Allocates, Barrier, CallsFunction, CountedLoop, Loop, ReadsMemory,
                         WritesMemory)
from ..ir.types import Array, Scalar
from ..ir.values import BlockArgument, Value
from ..ops.adjoints import is_nondifferentiable
from ..ops.control import RECURSIVE_CALL, Func
from ..ops.views import array_origin


def is_float(value: Value) -> bool:
    """Whether `value` may carry a derivative: a float, or a complex value (a pair of them)."""
    return isinstance(value.type, Scalar) and (value.type.is_float or value.type.is_complex)


def accessed_array(op: Operation) -> Value | None:
    """The array a memory op reads or writes (its `array` operand), if it has one."""
    if (op.has_trait(ReadsMemory) or op.has_trait(WritesMemory)) and op.operands \
            and isinstance(op.operands[0].type, Array):
        return op.operands[0]
    return None


def stored_value(op: Operation) -> Value | None:
    """The value a store or atomic add writes (its `value` operand)."""
    return getattr(op, "value", None) if op.has_trait(WritesMemory) else None


def carried_links(op: Operation):
    """For a loop: (init, body argument, yielded value, result) per carried value, for each
    region that receives the carried values."""
    links = []
    offset = 1 if op.has_trait(CountedLoop) else 0
    body = op.regions[-1].block
    yielded = body.ops[-1].operands
    for k, init in enumerate(op.inits):
        links.append((init, body.args[offset + k], yielded[k], op.results[k]))
        if len(op.regions) == 2:   # while: `before` sees the carried values too
            links.append((init, op.regions[0].block.args[k], yielded[k], op.results[k]))
    return links


class ActivityAnalysis:
    """Which values of `func` carry derivatives (not the launch arguments' `zm.Active`,
    `zm.Duplicated`, ... wrappers, which are `zymo.ad.activities`).

    `outputs`: values that leave the function (a device function's results): useful when
    varied, like stores into differentiated arrays."""

    def __init__(self, func: Func, arg_kinds: list[str], outputs=()):
        self.func = func
        self.arg_kinds = dict(zip(func.args, arg_kinds))
        self.arrays: set[Value] = {a for a, k in self.arg_kinds.items()
                                   if k in ("dup", "dup_noneed")}
        self.varied: set[Value] = {a for a, k in self.arg_kinds.items()
                                   if k == "active" and is_float(a)}
        self.useful: set[Value] = set()
        self.ops = list(func.body.walk())
        self._forward()
        for value in outputs:
            self._use(value)
        self._backward()
        self.active_values = {v for v in self.varied if v in self.useful and is_float(v)}
        self.reversed_ops: set[Operation] = set()
        self._mark_reversed(func.body.block)

    # ---- varied: forward to a fixpoint ------------------------------------------------------
    def _forward(self) -> None:
        changed = True
        while changed:
            changed = False
            for op in self.ops:
                changed |= self._forward_op(op)

    def _vary(self, value: Value) -> bool:
        if value in self.varied or not is_float(value):
            return False
        self.varied.add(value)
        return True

    def _forward_op(self, op: Operation) -> bool:
        changed = False
        array = accessed_array(op)
        value = stored_value(op)
        if value is not None and value in self.varied and array is not None \
                and array_origin(array) not in self.arrays \
                and _is_allocation(array_origin(array)):
            self.arrays.add(array_origin(array))   # a store through a view fills its origin
            changed = True
        if op.has_trait(Aliases):
            # a view of a differentiated array is one (the transforms then refuse the view,
            # whose op has no derivative rule, naming its line)
            if op.operands[0] in self.arrays and op.result not in self.arrays:
                self.arrays.add(op.result)
                changed = True
            return changed
        if op.has_trait(Loop):
            for init, arg, yielded, res in carried_links(op):
                if init in self.varied or yielded in self.varied:
                    changed |= self._vary(arg) | self._vary(res)
            return changed
        if op.regions:   # if: result k is varied when a branch yields a varied value
            for region in op.regions:
                term = region.block.ops[-1]
                for res, yielded in zip(op.results, term.operands):
                    if yielded in self.varied:
                        changed |= self._vary(res)
            return changed
        if is_nondifferentiable(op):
            return changed
        if array is not None:   # a load (or an atomic's old value) is varied where the array is
            varied = array in self.arrays
        else:
            varied = any(v in self.varied for v in op.operands)
        if varied:
            for res in op.results:
                changed |= self._vary(res)
        return changed

    # ---- useful: backward to a fixpoint -----------------------------------------------------
    def _backward(self) -> None:
        changed = True
        while changed:
            changed = False
            for op in reversed(self.ops):
                changed |= self._backward_op(op)

    def _use(self, value: Value) -> bool:
        if value in self.useful or value not in self.varied:
            return False
        self.useful.add(value)
        return True

    def _backward_op(self, op: Operation) -> bool:
        changed = False
        array = accessed_array(op)
        value = stored_value(op)
        if value is not None and array is not None and array in self.arrays:
            changed |= self._use(value)
        if op.has_trait(Loop):
            for init, arg, yielded, res in carried_links(op):
                if res in self.useful or arg in self.useful:
                    changed |= self._use(arg) | self._use(yielded) | self._use(init) \
                        | self._use(res)
            return changed
        if op.regions:
            for region in op.regions:
                term = region.block.ops[-1]
                for res, yielded in zip(op.results, term.operands):
                    if res in self.useful:
                        changed |= self._use(yielded)
            return changed
        if is_nondifferentiable(op) or op.has_trait(WritesMemory):
            return changed
        if any(r in self.useful for r in op.results):
            for v in op.operands:
                changed |= self._use(v)
        return changed

    # ---- which ops the reverse sweep visits -------------------------------------------------
    def _mark_reversed(self, block: Block) -> bool:
        any_marked = False
        for op in block.ops:
            marked = any([self._mark_reversed(r.block) for r in op.regions])
            marked |= any(r in self.active_values for r in op.results)
            array = accessed_array(op)
            if array is not None and array in self.arrays and op.has_trait(WritesMemory):
                marked = True
            if op.has_trait(Aliases) and op.result in self.arrays:
                marked = True
            if op.has_trait(Barrier) and self.arrays:
                marked = True
            if marked:
                self.reversed_ops.add(op)
                any_marked = True
        return any_marked

    def active(self, value: Value) -> bool:
        return value in self.active_values

    def is_active_array(self, value: Value) -> bool:
        return value in self.arrays


def _is_allocation(value: Value) -> bool:
    return not isinstance(value, BlockArgument) and value.owner.has_trait(Allocates)



def lost_derivatives(func: Func, arg_kinds: list[str], activity: ActivityAnalysis):
    """(store, load, array) for each Const array argument that stores values depending on
    active inputs and is read back: the derivatives through it would be silently lost."""
    lost = []
    for arg, kind in zip(func.args, arg_kinds):
        if kind != "const" or not isinstance(arg.type, Array):
            continue
        users = _users_through_views(arg)
        stores = [op for op in users if op.has_trait(WritesMemory)
                  and getattr(op, "value", None) in activity.varied]
        loads = [op for op in users if op.has_trait(ReadsMemory)
                 and not op.has_trait(WritesMemory)]
        if stores and loads:
            lost.append((stores[0], loads[0], arg))
    return lost


def _users_through_views(array: Value) -> list[Operation]:
    """The ops that use `array` or a view of it (`Aliases`), views excepted."""
    users, pending = [], [array]
    while pending:
        for use in pending.pop().uses:
            if use.operation.has_trait(Aliases):
                pending.append(use.operation.result)
            else:
                users.append(use.operation)
    return users


def reject_calls(func: Operation) -> None:
    """A CompileError at each call left in `func` (of a recursive device function: every
    other is inlined): its derivative would need the callee differentiated as a function."""
    calls = [op for op in func.walk() if op.has_trait(CallsFunction)]
    if calls:
        raise CompileError([Diagnostic(op.loc, RECURSIVE_CALL, "write the recursion as a loop "
                                       "to differentiate through it") for op in calls])
