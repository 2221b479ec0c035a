"""Operations, blocks and regions, with ops declared by named fields (operands, results,
attributes, regions) from which constructors, accessors and structural checks follow."""
from __future__ import annotations

import itertools
from typing import Any, ClassVar, Iterator

from ..diagnostics import UNKNOWN, Loc
from .traits import Trait
from .types import Type
from .values import BlockArgument, OpResult, Use, Value


class _Field:
    """A named part of an op; subclasses say which part."""

    def __init__(self, variadic: bool = False):
        self.variadic = variadic
        self.name = ""

    def __set_name__(self, owner, name):
        self.name = name


class OperandDef(_Field):
    def __get__(self, op, owner=None):
        if op is None:
            return self
        return op._slice(op.operands, type(op)._operand_defs, self)


class ResultDef(_Field):
    def __get__(self, op, owner=None):
        if op is None:
            return self
        return op._slice(op.results, type(op)._result_defs, self)


class AttrDef(_Field):
    def __init__(self, default: Any = None, required: bool = True):
        super().__init__()
        self.default = default
        self.required = required and default is None

    def __get__(self, op, owner=None):
        if op is None:
            return self
        return op.attrs.get(self.name, self.default)


class RegionDef(_Field):
    def __get__(self, op, owner=None):
        if op is None:
            return self
        index = type(op)._region_defs.index(self)
        return op.regions[index]


def operand(variadic: bool = False) -> Any:
    return OperandDef(variadic)


def result(variadic: bool = False) -> Any:
    return ResultDef(variadic)


def attr(default: Any = None, required: bool = True) -> Any:
    return AttrDef(default, required)


def region() -> Any:
    return RegionDef()


_ids = itertools.count()


class Operation:
    """One IR operation. Subclasses declare `name`, `traits` and their fields."""

    name: ClassVar[str] = "<abstract>"
    traits: ClassVar[tuple[Trait, ...]] = ()
    _operand_defs: ClassVar[tuple[OperandDef, ...]] = ()
    _result_defs: ClassVar[tuple[ResultDef, ...]] = ()
    _attr_defs: ClassVar[tuple[AttrDef, ...]] = ()
    _region_defs: ClassVar[tuple[RegionDef, ...]] = ()
    _traits: ClassVar[frozenset[Trait]] = frozenset()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        fields: dict[str, _Field] = {}
        traits: set[Trait] = set()
        for klass in reversed(cls.__mro__):
            traits.update(klass.__dict__.get("traits", ()))
            for key, value in klass.__dict__.items():
                if isinstance(value, _Field):
                    fields.pop(key, None)
                    fields[key] = value
        cls._traits = frozenset(traits)
        cls._operand_defs = tuple(f for f in fields.values() if isinstance(f, OperandDef))
        cls._result_defs = tuple(f for f in fields.values() if isinstance(f, ResultDef))
        cls._attr_defs = tuple(f for f in fields.values() if isinstance(f, AttrDef))
        cls._region_defs = tuple(f for f in fields.values() if isinstance(f, RegionDef))
        for group in (cls._operand_defs, cls._result_defs):
            if sum(f.variadic for f in group) > 1:
                raise TypeError(f"{cls.__name__}: at most one variadic operand and result group")

    def __init__(self, operands: list[Value] = (), result_types: list[Type] = (),
                 attrs: dict[str, Any] | None = None, regions: list["Region"] | None = None,
                 loc: Loc = UNKNOWN, id: str = ""):
        self.operands: list[Value] = []
        for value in operands:
            self._append_operand(value)
        self.results = [OpResult(t, self, i) for i, t in enumerate(result_types)]
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.regions: list[Region] = []
        for reg in regions if regions is not None else [Region() for _ in self._region_defs]:
            self.add_region(reg)
        self.loc = loc
        self.id = id or f"{loc.line}:{loc.col}#{next(_ids)}"
        self.parent: Block | None = None

    # ---- fields -------------------------------------------------------------------------
    @staticmethod
    def _slice(items: list, defs: tuple[_Field, ...], wanted: _Field):
        position = defs.index(wanted)
        variadic = [i for i, d in enumerate(defs) if d.variadic]
        if not variadic or position < variadic[0]:
            return items[position]
        fixed_after = len(defs) - variadic[0] - 1
        if position == variadic[0]:
            return items[position:len(items) - fixed_after]
        return items[len(items) - (len(defs) - position)]

    @property
    def result(self) -> OpResult:
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results, not one")
        return self.results[0]

    @classmethod
    def has_trait(cls, trait: Trait) -> bool:
        return trait in cls._traits

    # ---- operands and uses --------------------------------------------------------------
    def _append_operand(self, value: Value) -> None:
        if not isinstance(value, Value):
            raise TypeError(f"{type(self).__name__}: operand {value!r} is not an IR value")
        self.operands.append(value)
        value.uses.append(Use(self, len(self.operands) - 1))

    def set_operand(self, index: int, value: Value) -> None:
        old = self.operands[index]
        old.uses = [u for u in old.uses if not (u.operation is self and u.index == index)]
        self.operands[index] = value
        value.uses.append(Use(self, index))

    def set_operands(self, values: list[Value]) -> None:
        self.drop_operand_uses()
        self.operands = []
        for value in values:
            self._append_operand(value)

    def drop_operand_uses(self) -> None:
        for index, value in enumerate(self.operands):
            value.uses = [u for u in value.uses if not (u.operation is self and u.index == index)]

    # ---- structure ----------------------------------------------------------------------
    def add_region(self, reg: "Region") -> None:
        reg.parent = self
        self.regions.append(reg)

    @property
    def parent_op(self) -> "Operation | None":
        if self.parent is None or self.parent.parent is None:
            return None
        return self.parent.parent.parent

    def ancestors(self) -> Iterator["Operation"]:
        op = self.parent_op
        while op is not None:
            yield op
            op = op.parent_op

    def walk(self) -> Iterator["Operation"]:
        """This op and every op nested in its regions, in pre-order."""
        yield self
        for reg in self.regions:
            for op in list(reg.block.ops):
                yield from op.walk()

    def erase(self) -> None:
        """Remove this op (and its regions) from its block; its results must be unused."""
        for inner in list(self.walk()):
            inner.drop_operand_uses()
        if self.parent is not None:
            self.parent.ops.remove(self)
            self.parent = None

    def detach(self) -> None:
        if self.parent is not None:
            self.parent.ops.remove(self)
            self.parent = None

    def clone(self, mapping: dict[Value, Value]) -> "Operation":
        """A deep copy; operands are looked up in `mapping` (and new values recorded there)."""
        new = type(self).__new__(type(self))
        Operation.__init__(new, [mapping.get(v, v) for v in self.operands],
                           [r.type for r in self.results], dict(self.attrs), [],
                           self.loc, self.id)
        for old_result, new_result in zip(self.results, new.results):
            new_result.name_hint = old_result.name_hint  # diagnostics name arrays by it
            mapping[old_result] = new_result
        for reg in self.regions:
            new.add_region(reg.clone(mapping))
        return new

    def __repr__(self) -> str:
        return f"<{self.name} {self.id} at {self.loc}>"


class Block:
    """A list of ops with typed arguments; structured IR has one block per region."""

    def __init__(self, arg_types: list[Type] = (), arg_names: list[str] | None = None):
        names = arg_names or [""] * len(arg_types)
        self.args = [BlockArgument(t, self, i, n) for i, (t, n) in enumerate(zip(arg_types, names))]
        self.ops: list[Operation] = []
        self.parent: Region | None = None

    def add_arg(self, type: Type, name_hint: str = "") -> BlockArgument:
        arg = BlockArgument(type, self, len(self.args), name_hint)
        self.args.append(arg)
        return arg

    def erase_arg(self, index: int) -> None:
        assert not self.args[index].uses, "erasing a used block argument"
        del self.args[index]
        for i, arg in enumerate(self.args):
            arg.index = i

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.ops.append(op)
        return op

    def insert(self, index: int, op: Operation) -> Operation:
        op.parent = self
        self.ops.insert(index, op)
        return op

    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        return self.insert(self.ops.index(anchor), op)

    @property
    def terminator(self) -> Operation | None:
        from .traits import Terminator
        if self.ops and self.ops[-1].has_trait(Terminator):
            return self.ops[-1]
        return None

    @property
    def parent_op(self) -> Operation | None:
        return self.parent.parent if self.parent is not None else None


class Region:
    """A single-block region owned by an op."""

    def __init__(self, block: Block | None = None):
        self.block = block if block is not None else Block()
        self.block.parent = self
        self.parent: Operation | None = None

    def clone(self, mapping: dict[Value, Value]) -> "Region":
        old = self.block
        block = Block([a.type for a in old.args], [a.name_hint for a in old.args])
        for old_arg, new_arg in zip(old.args, block.args):
            mapping[old_arg] = new_arg
        for op in old.ops:
            block.append(op.clone(mapping))
        return Region(block)

    def walk(self) -> Iterator[Operation]:
        for op in list(self.block.ops):
            yield from op.walk()
