"""Barrier splitting for the CPU (the MCUDA/POCL method): the plan of a kernel's phases.

A block's threads run one after another in loops, so a barrier or a warp op (a *split
point*) must end the loop over threads. Region by region, an op containing a split point
runs in *block mode* (once per block, with per-thread masks), and each maximal run of other
ops becomes one thread loop. Values used outside the thread loop that defines them live in
per-thread slots. Values that are the same in every thread of a block (parameters, block
indices, constants and what is computed from them) are *uniform*: computed once per block,
before any thread loop, and read from everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...ir.operation import Block, Operation
from ...ir.traits import (
    Allocates,
    Barrier,
    Convergent,
    Pure,
    Speculatable,
    Terminator,
    ThreadVarying,
)
from ...ir.values import Value


@dataclass(eq=False)
class Run:
    """Ops of one block that run as one loop over the threads; `live_ins` come from slots."""

    ops: list[Operation] = field(default_factory=list)
    live_ins: list[Value] = field(default_factory=list)

    @property
    def idle(self) -> bool:
        """Nothing to do per thread: only a terminator that hands back nothing."""
        return all(op.has_trait(Terminator) and not op.operands for op in self.ops)


Item = Run | Operation  # a block-mode op is an Operation


def is_split_point(op: Operation) -> bool:
    return op.has_trait(Barrier) or op.has_trait(Convergent)


class Plan:
    """Split points, uniform values, runs and slot-held values of one kernel."""

    def __init__(self, func: Operation):
        self.func = func
        self._splits: dict[Operation, bool] = {}
        self.uniform: set[Value] = set(func.regions[0].block.args)
        self.hoisted: list[Operation] = []
        self._find_uniform()
        self.items: dict[Block, list[Item]] = {}
        self.run_of: dict[Operation, Run] = {}
        self._partition(func.regions[0].block)
        self.escaping: set[Value] = set()
        for run in {id(r): r for r in self.run_of.values()}.values():
            self._find_escaping(run)
            run.live_ins = self._live_ins(run)

    # ---- split points -------------------------------------------------------------------
    def has_split(self, op: Operation) -> bool:
        """The op is a split point or contains one."""
        known = self._splits.get(op)
        if known is None:
            known = is_split_point(op) or any(
                self.has_split(inner) for region in op.regions for inner in region.block.ops)
            self._splits[op] = known
        return known

    @property
    def splits(self) -> bool:
        return self.has_split(self.func)

    # ---- uniform values -----------------------------------------------------------------
    def _find_uniform(self) -> None:
        hoisted = set()
        for op in self.func.walk():
            if op is self.func or not self._hoistable(op):
                continue
            self.uniform.update(op.results)
            self.hoisted.append(op)
            hoisted.add(op)
        self.is_hoisted = hoisted.__contains__

    def _hoistable(self, op: Operation) -> bool:
        """Same in every thread and safe to compute once per block ahead of everything."""
        if op.regions or op.has_trait(ThreadVarying) or not op.results:
            return False
        if not all(v in self.uniform for v in op.operands):
            return False
        if op.has_trait(Allocates):     # shared and constant arrays: one per block
            return True
        return op.has_trait(Pure) and op.has_trait(Speculatable)

    # ---- runs ---------------------------------------------------------------------------
    def _partition(self, block: Block) -> None:
        items: list[Item] = []
        current: Run | None = None
        for op in block.ops:
            if self.is_hoisted(op):
                continue
            if op.has_trait(Barrier):
                current = None          # the end of the thread loop is the barrier itself
            elif op.regions and self.has_split(op):
                items.append(op)
                current = None
                for region in op.regions:
                    self._partition(region.block)
            elif is_split_point(op):
                alone = Run([op])           # a warp op reads the other lanes' slots
                items.append(alone)
                self.run_of[op] = alone
                current = None
            else:
                if current is None:
                    current = Run()
                    items.append(current)
                current.ops.append(op)
                self.run_of[op] = current
        self.items[block] = items

    def _find_escaping(self, run: Run) -> None:
        for op in run.ops:
            for result in op.results:
                if any(self._user_at(use.operation, op.parent) is None or
                       self.run_of.get(self._user_at(use.operation, op.parent)) is not run
                       for use in result.uses):
                    self.escaping.add(result)

    @staticmethod
    def _user_at(user: Operation, block: Block | None) -> Operation | None:
        """The op of `block` that is or contains `user`."""
        while user is not None and user.parent is not block:
            user = user.parent_op
        return user

    def _live_ins(self, run: Run) -> list[Value]:
        """Values the run reads that another thread loop or block mode defined."""
        defined: set[Value] = set()
        needed: dict[Value, None] = {}
        for top in run.ops:
            for op in top.walk():
                for value in op.operands:
                    if value not in defined and value not in self.uniform:
                        needed[value] = None
                defined.update(op.results)
                for region in op.regions:
                    defined.update(region.block.args)
        return list(needed)
