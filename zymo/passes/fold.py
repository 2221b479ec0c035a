"""Constant folding and algebraic simplification, each rewrite keyed by the trait it needs."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.module import Module
from ..ir.operation import Block, Operation
from ..ir.traits import (Commutative, Comparison, Conditional, ConstantLike, Conversion,
                         CountedLoop, Extent, Involution, OneIsIdentity, Pure, Selects,
                         ThreadVarying, Trait, ZeroIsAbsorbing, ZeroIsIdentity)
from ..ir.types import Array, Scalar, Type
from ..ir.values import OpResult, Value
from ..ops.registry import INTERP
from .common import constant_of, make_constant, terminator

# A rewrite gives the values that replace the op's results, or None to leave the op alone.
Rewrite = Callable[[Operation], list[Value] | None]


class Fold:
    """Fold ops whose operands are constants by running their interp rule (so the result is
    exactly what the interpreter computes), simplify algebraic identities, take the branch
    of an `if` whose condition is constant, drop loops that run zero times and read static
    array extents.

    Rewrites are found through traits (`REWRITES`); an op without them is left as it is.
    Ops are visited in program order, nested regions before their op, so one run folds
    chains of constants. Verified IR in, verified IR out.
    """

    name = "fold"

    def run(self, module: Module) -> bool:
        changed = False
        for func in module:
            changed |= self._fold_block(func.regions[0].block)
        return changed

    def _fold_block(self, block: Block) -> bool:
        changed = False
        for op in list(block.ops):
            if op.parent is not block:  # moved or erased by an earlier rewrite
                continue
            for region in op.regions:
                changed |= self._fold_block(region.block)
            changed |= fold_op(op)
        return changed


def fold_op(op: Operation) -> bool:
    """Apply the first rewrite that fits `op`; whether one did."""
    if op.has_trait(ConstantLike):
        return False
    for trait, rewrite in REWRITES:
        if not op.has_trait(trait):
            continue
        replacements = rewrite(op)
        if replacements is None:
            continue
        for result, value in zip(op.results, replacements):
            assert result.type == value.type, f"{op.name}: a fold changed a type"
            result.replace_all_uses_with(value)
        op.erase()
        return True
    return False


def _is_integral(type: Type) -> bool:
    return isinstance(type, Scalar) and not type.is_float


# ---- constant folding ------------------------------------------------------------------
def fold_constants(op: Operation) -> list[Value] | None:
    """A pure op of constants becomes constants: its interp rule run on NumPy scalars."""
    rule = INTERP.find(op)
    if (rule is None or not op.operands or op.regions or op.has_trait(ThreadVarying)
            or not all(isinstance(r.type, Scalar) for r in op.results)):
        return None
    values = [constant_of(operand) for operand in op.operands]
    if any(value is None for value in values):
        return None
    with np.errstate(all="ignore"):
        outputs = rule(None, op, *values)
    if len(op.results) == 1:
        outputs = (outputs,)
    ids = [op.id] if len(op.results) == 1 else [f"{op.id}.{i}" for i in range(len(op.results))]
    return [make_constant(value, result.type, op, id)
            for value, result, id in zip(outputs, op.results, ids)]


# ---- algebra ---------------------------------------------------------------------------
def _constant_side(op: Operation, unit: int) -> tuple[Value, Value] | None:
    """(other operand, constant operand) when one operand is the constant `unit`; the left
    operand is looked at only for commutative ops."""
    pairs = [(op.lhs, op.rhs)]
    if op.has_trait(Commutative):
        pairs.append((op.rhs, op.lhs))
    for other, candidate in pairs:
        value = constant_of(candidate)
        if value is not None and value.item() == unit:  # .item(): NumPy's == is slow here
            return other, candidate
    return None


def zero_identity(op: Operation) -> list[Value] | None:
    """x + 0, x - 0, x | 0 ... -> x, for integers (x + 0.0 is not x when x is -0.0)."""
    found = _constant_side(op, 0) if _is_integral(op.result.type) else None
    return None if found is None else [found[0]]


def one_identity(op: Operation) -> list[Value] | None:
    """x * 1, x / 1 ... -> x (exact for floats too)."""
    found = _constant_side(op, 1)
    return None if found is None else [found[0]]


def zero_absorbing(op: Operation) -> list[Value] | None:
    """x * 0, x & 0 ... -> 0, for integers (for floats 0 * inf is NaN)."""
    found = _constant_side(op, 0) if _is_integral(op.result.type) else None
    return None if found is None else [found[1]]


def involution(op: Operation) -> list[Value] | None:
    """-(-x) -> x, not(not(x)) -> x."""
    inner = op.x
    if (isinstance(inner, OpResult) and type(inner.owner) is type(op)
            and inner.owner.attrs == op.attrs):
        return [inner.owner.x]
    return None


def conversion(op: Operation) -> list[Value] | None:
    """A conversion to the type its operand already has is the operand."""
    return [op.x] if op.x.type == op.result.type else None


def select(op: Operation) -> list[Value] | None:
    """select(true, a, b) -> a, select(false, a, b) -> b, select(c, a, a) -> a."""
    if op.if_true is op.if_false:
        return [op.if_true]
    cond = constant_of(op.cond)
    if cond is None:
        return None
    return [op.if_true if bool(cond) else op.if_false]


def self_comparison(op: Operation) -> list[Value] | None:
    """x < x, x == x ... of an integer is decided: compare any integer with itself."""
    if op.lhs is not op.rhs or not _is_integral(op.lhs.type):
        return None
    zero = np.zeros((), op.lhs.type.dtype)
    return [make_constant(INTERP[op](None, op, zero, zero), op.result.type, op, op.id)]


def static_extent(op: Operation) -> list[Value] | None:
    """The extent of an array with a static shape (shared, local, const) is a constant."""
    array = op.array.type
    if not isinstance(array, Array) or array.shape is None:
        return None
    return [make_constant(array.shape[op.axis], op.result.type, op, op.id)]


# ---- control flow ----------------------------------------------------------------------
def constant_branch(op: Operation) -> list[Value] | None:
    """An `if` with a constant condition becomes the ops of the branch it takes."""
    cond = constant_of(op.cond)
    if cond is None:
        return None
    taken = op.then_region if bool(cond) else op.else_region
    assert op.parent is not None
    for inner in taken.block.ops[:-1]:
        inner.detach()
        op.parent.insert_before(op, inner)
    return list(terminator(taken).operands)


def empty_loop(op: Operation) -> list[Value] | None:
    """A loop over an empty constant range gives back its initial values."""
    lower, upper, step = (constant_of(v) for v in (op.lower, op.upper, op.step))
    if lower is None or upper is None or step is None:
        return None
    if step == 0 or len(range(int(lower), int(upper), int(step))) > 0:
        return None
    return list(op.inits)


REWRITES: tuple[tuple[Trait, Rewrite], ...] = (
    (Pure, fold_constants),
    (ZeroIsIdentity, zero_identity),
    (OneIsIdentity, one_identity),
    (ZeroIsAbsorbing, zero_absorbing),
    (Involution, involution),
    (Conversion, conversion),
    (Selects, select),
    (Comparison, self_comparison),
    (Extent, static_extent),
    (Conditional, constant_branch),
    (CountedLoop, empty_loop),
)
