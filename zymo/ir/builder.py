"""The builder: an insertion point and a current source location, as context managers."""
from __future__ import annotations

import itertools
from contextlib import contextmanager
from typing import Any

from ..diagnostics import UNKNOWN, Loc
from .operation import Block, Operation, Region
from .types import Type
from .values import Value


class Builder:
    def __init__(self, block: Block | None = None):
        self.block = block
        self.index: int | None = None  # None: append at the end
        self.loc: Loc = UNKNOWN
        self._counter = itertools.count()

    def next_id(self) -> str:
        return f"{self.loc.line}:{self.loc.col}.{next(self._counter)}"

    def insert(self, op: Operation) -> Operation:
        assert self.block is not None, "builder has no insertion point"
        if self.index is None:
            self.block.append(op)
        else:
            self.block.insert(self.index, op)
            self.index += 1
        return op

    def create(self, cls: type[Operation], *operands: Value, result_types: list[Type] | None = None,
               regions: list[Region] | None = None, **attrs: Any) -> Operation:
        if result_types is None:
            result_types = cls.infer_types([v.type for v in operands], attrs)  # type: ignore[attr-defined]
        op = cls(list(operands), result_types, attrs, regions, loc=self.loc, id=self.next_id())
        return self.insert(op)

    def value(self, cls: type[Operation], *operands: Value, **attrs: Any) -> Value:
        """Create a single-result op and return its result."""
        return self.create(cls, *operands, **attrs).result

    @contextmanager
    def at_end(self, block: Block):
        saved = (self.block, self.index)
        self.block, self.index = block, None
        try:
            yield self
        finally:
            self.block, self.index = saved

    @contextmanager
    def before(self, op: Operation):
        saved = (self.block, self.index)
        assert op.parent is not None
        self.block, self.index = op.parent, op.parent.ops.index(op)
        try:
            yield self
        finally:
            self.block, self.index = saved

    @contextmanager
    def location(self, loc: Loc):
        saved = self.loc
        self.loc = loc
        try:
            yield self
        finally:
            self.loc = saved
