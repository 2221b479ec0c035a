"""Barrier splitting for the CPU (the MCUDA/POCL method): the plan of a kernel's phases.

A block's threads run one after another in loops, so a barrier or a warp op (a *split
point*) must end the loop over threads. Region by region, an op containing a split point
runs in *block mode* (once per block, with per-thread masks), and each maximal run of other
ops becomes one thread loop. Values used outside the thread loop that defines them live in
per-thread slots.

Values the same in every thread of a block are *uniform* and live in registers of the
block function: parameters, block indices, constants and what is computed from them
(*hoisted*: computed once, before any thread loop), and, at block level, loop-carried
values and results of block-mode ops whose control and yields are uniform (a `while`
over a halving stride: one loop for the block, no masks).
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
from ...ir.values import OpResult, Value

# Longest chain of pure ops a thread loop computes again rather than load from a slot.
REMAT_BUDGET = 8


@dataclass(eq=False)
class Run:
    """Ops of one block that run as one loop over the threads; `live_ins` come from slots
    or are computed again (`recompute`), and the `preamble` (uniform ops at block level) is
    computed once, before the loop."""

    ops: list[Operation] = field(default_factory=list)
    live_ins: list[Value] = field(default_factory=list)
    preamble: list[Operation] = field(default_factory=list)
    recompute: list[Operation] = field(default_factory=list)   # cheap live-ins, again

    @property
    def idle(self) -> bool:
        """Nothing to do per thread: at most the terminator."""
        return all(op.has_trait(Terminator) for op in self.ops)


Item = Run | Operation  # a block-mode op is an Operation


def is_split_point(op: Operation) -> bool:
    return op.has_trait(Barrier) or op.has_trait(Convergent)


class Plan:
    """Split points, uniform values, runs and slot-held values of one kernel."""

    def __init__(self, func: Operation):
        self.func = func
        self._splits: dict[Operation, bool] = {}
        self.uniform: set[Value] = set()
        self.hoisted: list[Operation] = []         # uniform, computed once per block
        self.block_ops: set[Operation] = set()      # uniform, computed where they stand
        self.uniform_regions: set[Operation] = set()  # block-mode ops with uniform control
        self._find_uniform()
        hoisted = set(self.hoisted)
        self.is_hoisted = hoisted.__contains__
        self.items: dict[Block, list[Item]] = {}
        self.run_of: dict[Operation, Run] = {}
        self._partition(func.regions[0].block)
        self._find_remat()
        self.escaping: set[Value] = set()
        for run in {id(r): r for r in self.run_of.values()}.values():
            self._find_escaping(run)
            run.live_ins, run.recompute = self._live_ins(run)

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

    @property
    def independent_threads(self) -> bool:
        """No barrier, no warp op and no memory shared by a block: then threads may run in
        any order, blocks interleaved (the CPU walks the grid row by row)."""
        return not self.splits and not any(
            op.has_trait(Allocates) and not op.has_trait(Pure) and
            not op.has_trait(ThreadVarying) for op in self.func.walk())

    # ---- uniform values -----------------------------------------------------------------
    def _find_uniform(self) -> None:
        """Optimistic fixpoint: block-mode ops are assumed uniform until one of their
        operands or of the values their regions hand back turns out not to be."""
        assumed = {op for op in self.func.walk() if op.regions and self.has_split(op)}
        while True:
            self.uniform = set(self.func.regions[0].block.args)
            self.hoisted, self.block_ops, self.uniform_regions = [], set(), set()
            static = set(self.uniform)
            rejected = self._visit(self.func.regions[0].block, True, assumed, static)
            if not rejected:
                return
            assumed -= rejected

    def _visit(self, block: Block, block_level: bool, assumed: set[Operation],
               static: set[Value]) -> set[Operation]:
        rejected: set[Operation] = set()
        for op in block.ops:
            if not op.regions:
                if op.has_trait(Barrier):   # a block vote: one value for the block's threads
                    self.uniform.update(op.results)
                    continue
                if self._same_everywhere(op, static):          # hoisted to the prologue
                    static.update(op.results)
                    self.uniform.update(op.results)
                    self.hoisted.append(op)
                elif block_level and self._same_everywhere(op, self.uniform):
                    self.uniform.update(op.results)
                    self.block_ops.add(op)
                continue
            candidate = op in assumed and all(v in self.uniform for v in op.operands)
            if candidate:
                self.uniform.update(a for region in op.regions for a in region.block.args)
            inner_level = block_level and self.has_split(op)
            for region in op.regions:
                rejected |= self._visit(region.block, inner_level, assumed, static)
            if not candidate:
                continue
            handed_back = [v for region in op.regions for v in region.block.ops[-1].operands]
            if all(v in self.uniform for v in handed_back):
                self.uniform.update(op.results)
                self.uniform_regions.add(op)
            else:
                rejected.add(op)
        return rejected

    @staticmethod
    def _same_everywhere(op: Operation, uniform: set[Value]) -> bool:
        """A region-free op computing the same value in every thread from `uniform` values,
        safe to compute ahead of where it stands."""
        if op.has_trait(ThreadVarying) or not op.results:
            return False
        if not all(v in uniform for v in op.operands):
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
            if op in self.block_ops:     # uniform operands only: fine before the thread loop
                if current is None:
                    current = Run()
                    items.append(current)
                current.preamble.append(op)
                continue
            if op.has_trait(Barrier):
                current = None          # the end of the thread loop is the barrier itself
                if op.results:          # a block vote: its reduction runs once, in block mode
                    items.append(op)
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
        """Results used outside their run live in slots, unless recomputing them is cheap
        and the user is another run (not block mode, not a warp op reading other lanes)."""
        for op in run.ops:
            for result in op.results:
                for use in result.uses:
                    user = self._user_at(use.operation, op.parent)
                    home = self.run_of.get(user) if user is not None else None
                    if home is run:
                        continue
                    if (result not in self.remat or home is None or user is None or
                            is_split_point(user)):
                        self.escaping.add(result)
                        break

    @staticmethod
    def _user_at(user: Operation, block: Block | None) -> Operation | None:
        """The op of `block` that is or contains `user`."""
        while user is not None and user.parent is not block:
            user = user.parent_op
        return user

    def _find_remat(self) -> None:
        """Thread-varying values cheap to compute again in each thread loop that reads
        them (thread ids and short pure chains from them): recomputed, LLVM sees `tid.x`
        itself rather than a load from a slot, so the optimizer sees contiguous accesses."""
        self.remat: set[Value] = set()
        self.order: dict[Operation, int] = {}
        cost: dict[Value, int] = {}
        for position, op in enumerate(self.func.walk()):
            self.order[op] = position
            if op.regions or not op.results or not op.has_trait(Pure):
                continue
            if not op.has_trait(Speculatable) or op.has_trait(Allocates):
                continue
            if not all(v in self.uniform or v in self.remat for v in op.operands):
                continue
            total = 1 + sum(cost.get(v, 0) for v in op.operands)
            if total <= REMAT_BUDGET:
                for result in op.results:
                    self.remat.add(result)
                    cost[result] = total

    def _live_ins(self, run: Run) -> tuple[list[Value], list[Operation]]:
        """Values the run reads that another thread loop or block mode defined: those to
        load from slots, and the ops to compute again (in program order)."""
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
        loads = [v for v in needed if v not in self.remat]
        again: dict[Operation, None] = {}
        pending = [v for v in needed if v in self.remat]
        while pending:
            value = pending.pop()
            assert isinstance(value, OpResult)
            if value.owner in again:
                continue
            again[value.owner] = None
            pending += [v for v in value.owner.operands if v not in self.uniform]
        return loads, sorted(again, key=self.order.__getitem__)
