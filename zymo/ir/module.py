"""A module: the functions of one compilation (a kernel and the device functions it calls)."""
from __future__ import annotations

from typing import Iterator

from .operation import Operation


class Module:
    def __init__(self, entry: str = ""):
        self.functions: dict[str, Operation] = {}
        self.entry = entry

    def add(self, func: Operation) -> None:
        self.functions[func.attrs["sym_name"]] = func

    def __getitem__(self, name: str) -> Operation:
        return self.functions[name]

    def __iter__(self) -> Iterator[Operation]:
        return iter(list(self.functions.values()))

    @property
    def kernel(self) -> Operation:
        return self.functions[self.entry]

    def clone(self) -> "Module":
        """A deep copy; ops keep their ids."""
        copy = Module(self.entry)
        mapping: dict = {}
        for func in self:
            copy.add(func.clone(mapping))
        return copy

    def walk(self) -> Iterator[Operation]:
        for func in self:
            yield from func.walk()

    def any_op(self, trait) -> bool:
        """Whether an op of the module carries `trait` (e.g. GridSync: the launch must be
        cooperative)."""
        return any(op.has_trait(trait) for op in self.walk())

    def __str__(self) -> str:
        from .printer import print_module
        return print_module(self)
