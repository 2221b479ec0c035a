"""Common subexpression elimination of pure ops, scoped by structured dominance."""
from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from ..ir.module import Module
from ..ir.operation import Block, Operation
from ..ir.traits import Commutative, Pure


class CSE:
    """Replace a pure op by an earlier one of the same class, attributes, operands and result
    types that dominates it: one before it in the same block or in an enclosing block (an op
    in an outer block dominates the later ops of nested regions). Operands of commutative ops
    match in either order. The earlier op, and its id, survive.

    Ops that are not Pure (loads, stores, atomics, allocations of shared or local arrays,
    warp ops) are never merged. Verified IR in, verified IR out.
    """

    name = "cse"

    def run(self, module: Module) -> bool:
        changed = False
        for func in module:
            changed |= self._visit(func.regions[0].block, {})
        return changed

    def _visit(self, block: Block, outer: dict[Hashable, Operation]) -> bool:
        available = dict(outer)  # what this block adds stays out of the enclosing scope
        changed = False
        for op in list(block.ops):
            for region in op.regions:
                changed |= self._visit(region.block, available)
            if not op.has_trait(Pure) or op.regions:
                continue
            key = expression_key(op)
            earlier = available.get(key)
            if earlier is None:
                available[key] = op
                continue
            for result, kept in zip(op.results, earlier.results):
                result.replace_all_uses_with(kept)
            op.erase()
            changed = True
        return changed


def expression_key(op: Operation) -> Hashable:
    """Equal keys mean the two ops compute the same values."""
    operands: tuple[Any, ...] = tuple(op.operands)
    if op.has_trait(Commutative):
        operands = tuple(sorted(operands, key=id))
    return (type(op), operands, tuple(r.type for r in op.results),
            tuple(sorted((name, attribute_key(value)) for name, value in op.attrs.items())))


def attribute_key(value: Any) -> Hashable:
    """A hashable form of an attribute that tells apart what `==` would confuse: 0.0 and -0.0,
    1 and 1.0 and True; NumPy arrays compare by dtype, shape and bytes."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (float, np.floating)):
        return (type(value).__name__, float(value).hex())
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(attribute_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, attribute_key(v)) for k, v in value.items())))
    return (type(value).__name__, value)
