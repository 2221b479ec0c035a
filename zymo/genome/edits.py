"""Edits, their JSON form, and their deterministic replay on the original IR.

An individual is a list of edits replayed in order on a copy of the kernel's optimized IR, never
a mutated program. Every choice a mutation made to keep the IR valid is stored in the edit as a
`Rewire` (an operand slot that must read another value) or a `Fill` (what the uses of a removed
op's result read instead), so replay makes no choices. An edit that no longer applies, because an
earlier edit removed an op it names or its repairs no longer reach, is skipped as a whole; that is
decided by the same rules in every process, so replay stays deterministic.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import ClassVar

from ..ir import verifier
from ..ir.module import Module
from ..ir.operation import Operation
from ..ir.traits import Convergent, Terminator
from ..ir.types import SCALARS
from ..ops.arith import Constant
from ..ops.mutations import rule_of
from .ids import Ref, inside, ops_by_id

_SCALAR_BY_NAME = {t.name: t for t in SCALARS}


class Conflict(Exception):
    """The edit does not apply to this IR (an op it names is gone, a repair is out of scope)."""


@dataclass(frozen=True)
class Rewire:
    """Operand `operand` of op `op` reads `value`."""

    op: str
    operand: int
    value: Ref


@dataclass(frozen=True)
class Fill:
    """The uses of result `result` of the removed op `op` read `value` instead."""

    op: str
    result: int
    value: Ref


@dataclass(frozen=True)
class Edit:
    kind: ClassVar[str] = ""
    tag: str            # unique within a run; names the ops the edit creates

    def names(self) -> tuple[str, ...]:
        """The ids of the original ops the edit is about (for reports and source lines)."""
        return ()

    def apply(self, module: Module) -> None:
        raise NotImplementedError

    def key(self) -> str:
        return json.dumps(to_json(self), sort_keys=True)


@dataclass(frozen=True)
class Delete(Edit):
    kind: ClassVar[str] = "delete"
    target: str = ""
    fills: tuple[Fill, ...] = ()

    def names(self):
        return (self.target,)

    def apply(self, module):
        ops = ops_by_id(module)
        target = _find(ops, self.target)
        _remove(ops, target, self.fills, self.tag)


@dataclass(frozen=True)
class Copy(Edit):
    """A copy of `source` (with its regions) placed before `before`; `rewires` repair the
    copy's operands and may route one later use to the copy's result (GEVO's useResult)."""

    kind: ClassVar[str] = "copy"
    source: str = ""
    before: str = ""
    rewires: tuple[Rewire, ...] = ()

    def names(self):
        return (self.source, self.before)

    def apply(self, module):
        ops = ops_by_id(module)
        _place_copy(ops, _find(ops, self.source), _find(ops, self.before), self.tag)
        _rewire(ops_by_id(module), self.rewires, self.tag)


@dataclass(frozen=True)
class Move(Edit):
    """`source` moved before `before`. `carried`: ops that define values `source` reads and
    that go first, in order, to the same place (a loop hoisted with the bound it reads);
    every use of theirs reads the moved copy."""

    kind: ClassVar[str] = "move"
    source: str = ""
    before: str = ""
    rewires: tuple[Rewire, ...] = ()
    fills: tuple[Fill, ...] = ()
    carried: tuple[str, ...] = ()

    def names(self):
        return (self.source, self.before)

    def apply(self, module):
        ops = ops_by_id(module)
        source, before = _find(ops, self.source), _find(ops, self.before)
        if inside(before, source):
            raise Conflict("a move into the op itself")
        for id in self.carried:
            _carry(ops, _find(ops, id), before, self.tag)
        if self.carried:
            ops = ops_by_id(module)
        _place_copy(ops, source, before, self.tag)
        ops = ops_by_id(module)
        _rewire(ops, self.rewires, self.tag)
        _remove(ops, source, self.fills, self.tag)


@dataclass(frozen=True)
class Replace(Edit):
    """`target` replaced by a copy of `source` whose results take over the target's uses."""

    kind: ClassVar[str] = "replace"
    target: str = ""
    source: str = ""
    rewires: tuple[Rewire, ...] = ()

    def names(self):
        return (self.target, self.source)

    def apply(self, module):
        ops = ops_by_id(module)
        target, source = _find(ops, self.target), _find(ops, self.source)
        if [r.type for r in target.results] != [r.type for r in source.results]:
            raise Conflict("result types differ")
        copy = _place_copy(ops, source, target, self.tag)
        for old, new in zip(target.results, copy.results):
            old.replace_all_uses_with(new)
        ops = ops_by_id(module)
        _rewire(ops, self.rewires, self.tag)
        _erase(target)


@dataclass(frozen=True)
class Swap(Edit):
    """`first` and `second` exchange places (each moved before the other's old place)."""

    kind: ClassVar[str] = "swap"
    first: str = ""
    second: str = ""
    rewires: tuple[Rewire, ...] = ()
    fills: tuple[Fill, ...] = ()

    def names(self):
        return (self.first, self.second)

    def apply(self, module):
        ops = ops_by_id(module)
        first, second = _find(ops, self.first), _find(ops, self.second)
        if inside(first, second) or inside(second, first):
            raise Conflict("one op is nested in the other")
        _place_copy(ops, first, second, self.tag)
        _place_copy(ops, second, first, self.tag)
        ops = ops_by_id(module)
        _rewire(ops, self.rewires, self.tag)
        first_fills = tuple(f for f in self.fills if f.op == self.first)
        second_fills = tuple(f for f in self.fills if f.op == self.second)
        _remove(ops, first, first_fills, self.tag)
        _remove(ops, second, second_fills, self.tag)


@dataclass(frozen=True)
class Operand(Edit):
    """Operand `index` of `target` reads `value` (GEVO's operand replacement)."""

    kind: ClassVar[str] = "operand"
    target: str = ""
    index: int = 0
    value: Ref = ()

    def names(self):
        return (self.target,)

    def apply(self, module):
        ops = ops_by_id(module)
        _rewire(ops, (Rewire(self.target, self.index, self.value),), self.tag)


KINDS = {cls.kind: cls for cls in (Delete, Copy, Move, Replace, Swap, Operand)}


# ---- replay ----------------------------------------------------------------------------------
@dataclass
class Replayed:
    module: Module
    applied: list[bool] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        return self.applied.count(False)


def replay(base: Module, edits) -> Replayed:
    """Apply `edits` in order to a copy of `base`; an edit that does not apply, or whose result
    does not verify, is skipped (the IR stays as before it)."""
    work = base.clone()
    result = Replayed(work)
    done: list = []
    for edit in edits:
        # edits apply in place (a clone per edit was most of a search's serial time); one that
        # fails is rolled back by replaying the edits that applied on a fresh copy
        try:
            edit.apply(work)
            check_structure(work)
        except Conflict:
            work = base.clone()
            for earlier in done:
                earlier.apply(work)
            result.applied.append(False)
            continue
        done.append(edit)
        result.applied.append(True)
    result.module = work
    return result


def check_structure(module: Module) -> None:
    """Raise Conflict unless `module` verifies and convergent ops stay where threads arrive
    together (the kernel's top block, or blocks that synchronized in the original)."""
    problems = verifier.verify(module)
    if problems:
        raise Conflict(problems[0].message)
    for op in module.walk():
        rule = rule_of(op)
        if rule is not None and rule.placement == "synchronizing" and not synchronizes(op.parent):
            raise Conflict(f"{op.name} placed where threads may diverge")


def synchronizes(block) -> bool:
    """A block where convergent ops may go: a function body, or a block that holds a
    convergent op the original kernel placed there (ids without an edit tag)."""
    owner = block.parent_op if block is not None else None
    if owner is None or owner.parent_op is None:
        return True
    return any(op.has_trait(Convergent) and "@" not in op.id for op in block.ops)


# ---- the pieces edits are made of -------------------------------------------------------------
def _find(ops: dict[str, Operation], id: str) -> Operation:
    op = ops.get(id)
    if op is None:
        raise Conflict(f"no op {id}")
    return op


def _place_copy(ops, source: Operation, before: Operation, tag: str) -> Operation:
    if source.has_trait(Terminator) or before.parent is None or source.parent is None:
        raise Conflict("terminators and functions are not copied")
    copy = source.clone({})
    for op in copy.walk():
        op.id = f"{op.id}@{tag}"
    if any(op.id in ops for op in copy.walk()):
        raise Conflict("the edit's ops already exist")
    before.parent.insert_before(before, copy)
    return copy


def resolve(ops: dict[str, Operation], ref: Ref, user: Operation, tag: str):
    """The value `ref` names; a constant is created right before `user`."""
    kind = ref[0]
    if kind == "r":
        owner = _find(ops, ref[1])
        if ref[2] >= len(owner.results):
            raise Conflict("no such result")
        return owner.results[ref[2]]
    if kind == "a":
        owner = _find(ops, ref[1])
        if ref[2] >= len(owner.regions) or ref[3] >= len(owner.regions[ref[2]].block.args):
            raise Conflict("no such block argument")
        return owner.regions[ref[2]].block.args[ref[3]]
    if kind == "c":
        type = _SCALAR_BY_NAME[ref[1]]
        const = Constant([], [type], {"value": type.dtype.type(ref[2]).item(), "type": type},
                         loc=user.loc, id=f"{user.id}~{tag}~{ref[1]}={ref[2]}")
        if const.id in ops:
            return ops[const.id].result
        user.parent.insert_before(user, const)
        ops[const.id] = const
        return const.result
    raise Conflict(f"bad value reference {ref!r}")


def _rewire(ops, rewires, tag: str) -> None:
    for rewire in rewires:
        op = _find(ops, rewire.op)
        if rewire.operand >= len(op.operands):
            raise Conflict("no such operand")
        value = resolve(ops, rewire.value, op, tag)
        if value.type != op.operands[rewire.operand].type:
            raise Conflict("types differ")
        op.set_operand(rewire.operand, value)


def _remove(ops, target: Operation, fills, tag: str) -> None:
    if target.has_trait(Terminator) or target.parent is None or target.parent_op is None:
        raise Conflict("terminators and functions are not removed")
    for fill in fills:
        if fill.result >= len(target.results):
            raise Conflict("no such result")
        value = resolve(ops, fill.value, target, tag)
        if value.type != target.results[fill.result].type or inside(_owner(value), target):
            raise Conflict("the fill does not fit")
        target.results[fill.result].replace_all_uses_with(value)
    _erase(target)


def _carry(ops, op: Operation, before: Operation, tag: str) -> None:
    """`op` moved before `before`, its uses reading the copy (the verifier rejects a use the
    new place does not dominate)."""
    if inside(before, op) or op.regions:
        raise Conflict("only ops without regions are carried, never into themselves")
    copy = _place_copy(ops, op, before, tag)
    for old, new in zip(op.results, copy.results):
        old.replace_all_uses_with(new)
    _erase(op)


def _owner(value):
    owner = getattr(value, "owner", None)
    return owner if owner is not None else value.block.parent_op


def _erase(op: Operation) -> None:
    if any(r.uses for r in op.results):
        raise Conflict("a removed op's result is still used")
    op.erase()


# ---- JSON ------------------------------------------------------------------------------------
def to_json(edit: Edit) -> dict:
    out = {"kind": edit.kind}
    for f in fields(edit):
        value = getattr(edit, f.name)
        if f.name == "carried" and not value:
            continue      # the form of moves that carry nothing predates the field
        if f.name in ("rewires", "fills"):
            value = [asdict(item) for item in value]
        out[f.name] = value
    return out


def from_json(data: dict) -> Edit:
    cls = KINDS[data["kind"]]
    kwargs = {}
    for f in fields(cls):
        if f.name == "carried":
            kwargs[f.name] = tuple(data.get(f.name, ()))
            continue
        value = data[f.name]
        if f.name == "rewires":
            value = tuple(Rewire(r["op"], r["operand"], _ref(r["value"])) for r in value)
        elif f.name == "fills":
            value = tuple(Fill(r["op"], r["result"], _ref(r["value"])) for r in value)
        elif f.name == "value":
            value = _ref(value)
        kwargs[f.name] = value
    return cls(**kwargs)


def _ref(value) -> Ref:
    return tuple(value)


def dumps(edits) -> str:
    return json.dumps([to_json(e) for e in edits], indent=1)


def loads(text: str) -> list[Edit]:
    return [from_json(item) for item in json.loads(text)]
