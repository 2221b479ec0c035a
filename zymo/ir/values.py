"""SSA values: operation results and block arguments, each with the list of its uses."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .types import Type

if TYPE_CHECKING:
    from .operation import Block, Operation


@dataclass(eq=False)
class Use:
    """Operand slot `index` of `operation` reads the value that holds this use."""

    operation: "Operation"
    index: int


class Value:
    __slots__ = ("type", "uses", "name_hint")

    def __init__(self, type: Type, name_hint: str = ""):
        self.type = type
        self.uses: list[Use] = []
        self.name_hint = name_hint

    def replace_all_uses_with(self, other: "Value") -> None:
        for use in list(self.uses):
            use.operation.set_operand(use.index, other)

    @property
    def has_uses(self) -> bool:
        return bool(self.uses)

    def users(self) -> list["Operation"]:
        return [use.operation for use in self.uses]


class OpResult(Value):
    __slots__ = ("owner", "index")

    def __init__(self, type: Type, owner: "Operation", index: int):
        super().__init__(type)
        self.owner = owner
        self.index = index

    def __repr__(self) -> str:
        return f"<result {self.index} of {self.owner.name} : {self.type}>"


class BlockArgument(Value):
    __slots__ = ("block", "index")

    def __init__(self, type: Type, block: "Block", index: int, name_hint: str = ""):
        super().__init__(type, name_hint)
        self.block = block
        self.index = index

    def __repr__(self) -> str:
        return f"<block argument {self.index} : {self.type}>"
