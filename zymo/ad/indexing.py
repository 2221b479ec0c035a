"""How an index varies across threads, to pick the cheapest correct adjoint of a read.

Each integer value gets a form:
- `Uniform`: the same in every thread at a given moment (arguments, extents, block indices,
  constants, `range` variables of loops with uniform bounds, and pure ops over these);
- `ThreadAffine(axis, base, offset)`: the thread index along `axis` (`base` "tid") or the global
  thread index (`base` "gid": blockIdx * blockDim + threadIdx) plus an offset fixed for the whole
  kernel (defined outside every loop), which maps distinct threads to distinct indices;
- `Varying`: anything else.

An array whose every accumulated read uses one and the same tuple of thread-affine indices, on
distinct axes, is touched by each thread at its own elements only, so its shadow is updated with
plain adds; otherwise uniform indices use warp-aggregated atomics and the rest plain atomics.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.operation import Operation
from ..ir.traits import ConstantLike, CountedLoop, Loop, Pure, ThreadVarying
from ..ir.types import Scalar
from ..ir.values import BlockArgument, Value
from ..ops import arith, memory, thread


@dataclass(frozen=True)
class Uniform:
    invariant: bool          # fixed for the whole kernel (defined outside every loop)
    term: tuple = ()         # how to compare it as an offset: ("const", v) or ("value", id)


@dataclass(frozen=True)
class ThreadAffine:
    axis: str
    base: str                # "tid" or "gid"
    offset: tuple            # sorted terms of a kernel-invariant offset


class Varying:
    pass


VARYING = Varying()


class IndexForms:
    def __init__(self, func):
        self.forms: dict[Value, object] = {}
        for arg in func.args:
            self.forms[arg] = Uniform(True, ("value", id(arg)))
        self._block(func.body.block, in_loop=False)

    def form(self, value: Value):
        return self.forms.get(value, VARYING)

    def _block(self, block, in_loop: bool) -> None:
        for op in block.ops:
            self._op(op, in_loop)

    def _op(self, op: Operation, in_loop: bool) -> None:
        if op.regions:
            self._structured(op, in_loop)
            return
        if not op.results or not all(isinstance(r.type, Scalar) for r in op.results):
            return
        result = op.results[0]
        form = self._form_of(op, in_loop)
        self.forms[result] = form

    def _structured(self, op: Operation, in_loop: bool) -> None:
        if op.has_trait(CountedLoop):
            bounds = [self.form(v) for v in (op.lower, op.upper, op.step)]
            iv = op.body.block.args[0]
            self.forms[iv] = (Uniform(False, ("value", id(iv)))
                              if all(isinstance(f, Uniform) for f in bounds) else VARYING)
        for region in op.regions:
            self._block(region.block, in_loop or op.has_trait(Loop))

    def _form_of(self, op: Operation, in_loop: bool):
        operands = [self.form(v) for v in op.operands]
        result = op.results[0]
        if isinstance(op, thread.ThreadIdx):
            return ThreadAffine(op.axis, "tid", ())
        if isinstance(op, arith.Mul) and _block_base(op):
            return BlockBase(_block_base(op))
        if isinstance(op, arith.Add):
            return _add(operands, op)
        if isinstance(op, arith.Sub) and isinstance(operands[0], ThreadAffine) \
                and isinstance(operands[1], Uniform) and operands[1].invariant:
            return ThreadAffine(operands[0].axis, operands[0].base,
                                _terms(operands[0].offset, (("neg",) + operands[1].term,)))
        if isinstance(op, arith.Cast) and isinstance(operands[0], ThreadAffine) \
                and result.type.bits >= op.x.type.bits:
            return operands[0]   # widening keeps distinct indices distinct
        if op.has_trait(ConstantLike):
            return Uniform(True, ("const", op.value))
        if op.has_trait(ThreadVarying) or not op.has_trait(Pure) \
                and not isinstance(op, memory.Dim):
            return VARYING
        if all(isinstance(f, (Uniform, BlockBase)) for f in operands):
            invariant = all(f.invariant for f in operands)
            return Uniform(invariant, ("value", id(result)))
        return VARYING


@dataclass(frozen=True)
class BlockBase(Uniform):
    """blockIdx * blockDim along one axis: uniform, and the start of a block's global ids."""

    def __init__(self, axis: str):
        object.__setattr__(self, "invariant", True)
        object.__setattr__(self, "term", ("block_base", axis))
        object.__setattr__(self, "axis", axis)


def _block_base(op: Operation) -> str | None:
    kinds = {type(v.owner) for v in op.operands if not isinstance(v, BlockArgument)}
    axes = {v.owner.axis for v in op.operands if not isinstance(v, BlockArgument)
            and isinstance(v.owner, (thread.BlockIdx, thread.BlockDim))}
    if kinds == {thread.BlockIdx, thread.BlockDim} and len(axes) == 1:
        return axes.pop()
    return None


def _terms(*groups) -> tuple:
    return tuple(sorted((t for g in groups for t in g), key=repr))


def _add(operands, op):
    a, b = operands
    if isinstance(b, ThreadAffine):
        a, b = b, a
    if isinstance(a, ThreadAffine):
        if isinstance(b, BlockBase) and a.base == "tid" and b.axis == a.axis:
            return ThreadAffine(a.axis, "gid", a.offset)
        if isinstance(b, Uniform) and not isinstance(b, BlockBase) and b.invariant:
            return ThreadAffine(a.axis, a.base, _terms(a.offset, (b.term,)))
        return VARYING
    if all(isinstance(f, Uniform) for f in operands):
        return Uniform(all(f.invariant for f in operands), ("value", id(op.results[0])))
    return VARYING


def injective(forms: list, space: str) -> bool:
    """Whether distinct threads reach distinct elements through this index tuple."""
    if space == "local":
        return True
    if not forms or not all(isinstance(f, ThreadAffine) for f in forms):
        return False
    base = "tid" if space == "shared" else "gid"
    axes = [f.axis for f in forms]
    return len(set(axes)) == len(axes) and all(f.base == base for f in forms)


def uniform(forms: list) -> bool:
    return all(isinstance(f, Uniform) for f in forms)
