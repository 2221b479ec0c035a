"""Random edits (GEVO's mutation operators) with the repairs that keep the IR valid.

A proposal is worked out on a scratch copy of the variant: the structural change is made, every
operand slot left without a value in scope is given a random in-scope value of the same type or
a constant, and every choice is written into the edit. The edit is then replayed on a fresh copy
and verified; mutation retries until an edit passes (GEVO's "mutate until valid", here without
running the variant: run-time validity is the evaluator's job).

GEVO picks the op an edit acts on uniformly. Given a profile (`heat`: how many threads executed
each op of the original, see `zymo.runtime.evolution.heat`), the Mutator picks it in proportion
to that count for most edits: an edit to code that rarely runs cannot make the kernel much
faster, while a kernel's time goes to a few hot loops. A share of the picks stays uniform
(`UNIFORM_SHARE`), so no op is out of reach. Where an edit goes (a copy's or a move's position)
and what an operand becomes stay uniform.
"""
from __future__ import annotations

import re
from collections import OrderedDict

import numpy as np

from ..ir.module import Module
from ..ir.operation import Operation
from ..ir.traits import Barrier, Convergent, Terminator, WritesMemory
from ..ops.mutations import EDIT_KINDS, rule_of
from .edits import (Conflict, Copy, Delete, Edit, Fill, Move, Operand, Replace, Rewire, Swap,
                    _carry, _place_copy, check_structure, replay, synchronizes)
from .ids import (constant_refs, dominated_by, inside, ops_by_id, ref_of, unscoped_operands,
                  visible_before)


REPAIR_TAG = "r"       # the tags of race repairs begin with it (a search's other edits: "e")
UNIFORM_SHARE = 0.25   # of the picks of an edit's op, when a profile guides the rest
HOIST_SHARE = 0.5      # of guided moves, to right before an enclosing op
CARRY_SHARE = 0.5      # of hoists, taking along the ops that compute their operands


class Mutator:
    """Proposes valid random edits to variants of `base` (the kernel's optimized IR); `heat`
    (op id -> threads that executed it) weights which ops are edited."""

    def __init__(self, base: Module, kinds=EDIT_KINDS, tries: int = 50,
                 heat: dict[str, float] | None = None):
        unknown = set(kinds) - set(EDIT_KINDS)
        if unknown:
            raise ValueError(f"unknown edit kinds {sorted(unknown)}: choose from {EDIT_KINDS}")
        self.base = base
        self.kinds = tuple(kinds)
        self.tries = tries
        self.guide = Guided(dict(heat)) if heat else Uniform()
        # replayed variants by edit list: children mostly extend a parent's list, so replaying
        # from the longest known prefix spares the search's parent most of its work
        self._replayed: OrderedDict[tuple, Module] = OrderedDict({(): base})

    def variant(self, edits) -> Module:
        """The IR of the variant `edits` (shared: not to be modified)."""
        edits = tuple(edits)
        known = next(n for n in range(len(edits), -1, -1) if edits[:n] in self._replayed)
        module = self._replayed[edits[:known]]
        self._replayed.move_to_end(edits[:known])
        if known < len(edits):
            module = replay(module, edits[known:]).module
            self._keep(edits, module)
        return module

    def _keep(self, edits: tuple, module: Module) -> None:
        self._replayed[edits] = module
        if len(self._replayed) > 512:
            self._replayed.popitem(last=False)
            self._replayed[()] = self.base   # the base stays

    def mutate(self, edits: list[Edit], rng: np.random.Generator, tag: str) -> Edit | None:
        """One new edit that applies to the variant `edits` and verifies, or None."""
        current = self.variant(edits)
        for _ in range(self.tries):
            kind = self.kinds[rng.integers(len(self.kinds))]
            try:
                edit = propose(current, kind, rng, tag, self.guide)
                trial = current.clone()
                edit.apply(trial)
                check_structure(trial)
            except Conflict:
                continue
            # the checked trial is what replaying the longer list gives: a child that breeds
            # later (mutated children often do) is then not replayed again
            self._keep(tuple(edits) + (edit,), trial)
            return edit
        return None


    def race_repairs(self, edits, race, tags) -> list[Edit]:
        """Edits that each place a copy of a barrier between the two accesses of a data race
        the interpreter found in the variant `edits` (`race`: their op ids; `tags()` names
        each edit): before and after each access's enclosing op in the innermost block that
        holds both and where a barrier may go. A race within one pass through that block
        needs a barrier between the two; one across iterations of a loop, a barrier after
        the later or before the earlier. Which candidate holds is the race check's to say.

        An edit that removes a synchronization a variant was spending (a second buffer, a
        barrier) is often faster and racy; its repair keeps the saving at the cost of a
        barrier, a step that two random edits would rarely take together."""
        current = self.variant(edits)
        ops = ops_by_id(current)
        accesses = [ops.get(id) for id in race]
        barriers = sorted((op for op in current.walk() if op.has_trait(Barrier)),
                          key=lambda op: "@" in op.id)    # an original one, where there is
        if len(accesses) != 2 or None in accesses or not barriers:
            return []
        block = _common_block(*accesses)
        while block is not None and not synchronizes(block):
            owner = block.parent_op
            block = owner.parent if owner is not None else None
        if block is None:
            return []
        anchors = []
        for access in accesses:
            anchor = next(a for a in (access, *access.ancestors()) if a.parent is block)
            if all(anchor is not a for a in anchors):
                anchors.append(anchor)
        places = []
        for anchor in sorted(anchors, key=block.ops.index):
            for place in (anchor, _next(anchor)):
                if place is not None and all(place is not p for p in places):
                    places.append(place)
        repairs = []
        for place in places:
            edit = Copy(tags(), barriers[0].id, place.id)
            try:
                trial = current.clone()
                edit.apply(trial)
                check_structure(trial)
            except Conflict:
                continue
            repairs.append(edit)
        return repairs


def _common_block(first: Operation, second: Operation):
    """The innermost block that holds both ops (at any depth)."""
    around = [first.parent] + [a.parent for a in first.ancestors()]
    inner = {id(second.parent)} | {id(a.parent) for a in second.ancestors()}
    return next((b for b in around if b is not None and id(b) in inner), None)


class Uniform:
    """GEVO's choices: the op an edit acts on uniformly, a move's destination too."""

    hoist_share = 0.0

    def target(self, rng, ops: list[Operation]) -> Operation:
        return _pick(rng, ops)


class Guided(Uniform):
    """Choices led by a profile (`heat`: op id -> threads that executed it): the op an edit
    acts on in proportion to its heat (a share `UNIFORM_SHARE` uniformly), and a share
    `HOIST_SHARE` of moves go right before one of the op's enclosing loops or branches (code
    motion out of a hot region, which a compiler may not prove legal but a test can)."""

    hoist_share = HOIST_SHARE

    def __init__(self, heat: dict[str, float]):
        self.heat = heat

    def target(self, rng, ops):
        if not ops:
            raise Conflict("nothing to choose from")
        if rng.random() < UNIFORM_SHARE:
            return ops[rng.integers(len(ops))]
        weights = np.array([self.heat.get(original_id(op.id), 0.0) for op in ops], float)
        total = weights.sum()
        if total <= 0:
            return ops[rng.integers(len(ops))]
        chosen = np.searchsorted(np.cumsum(weights), rng.random() * total, side="right")
        return ops[min(int(chosen), len(ops) - 1)]


def original_id(id: str) -> str:
    """The id of the original op that an op of a variant is (or copies, or serves)."""
    return re.split("[@~]", id, maxsplit=1)[0]


def op_heat(counts: dict[Operation, int]) -> dict[str, float]:
    """Heat by op id from an interpreter profile: the threads that executed the op, and for an
    op with regions (a loop) also the times its regions ran to their end (its iterations).
    An op whose result a loop or a branch takes as an operand (a bound, a condition) is as
    hot as that loop or branch: editing it changes how often the region runs, and it is
    often the one edit that removes a hot loop's work (a trip count of 0 or 1)."""
    heat: dict[str, float] = {}
    for op, count in counts.items():
        heat[op.id] = heat.get(op.id, 0.0) + count
        owner = op.parent_op if op.has_trait(Terminator) else None
        if owner is not None:
            heat[owner.id] = heat.get(owner.id, 0.0) + count
    for op in counts:
        if op.regions:
            for value in op.operands:
                definer = getattr(value, "owner", None)
                if definer is not None:
                    heat[definer.id] = max(heat.get(definer.id, 0.0), heat[op.id])
    return heat


def editable(module: Module, kind: str) -> list[Operation]:
    out = []
    for op in module.kernel.walk():
        rule = rule_of(op)
        if rule is not None and rule.allows(kind):
            out.append(op)
    return out


def _pick(rng, items):
    if not items:
        raise Conflict("nothing to choose from")
    return items[rng.integers(len(items))]


def propose(module: Module, kind: str, rng: np.random.Generator, tag: str,
            guide: Uniform = Uniform()) -> Edit:
    """A random edit of `kind`, its op chosen by `guide`."""
    return _PROPOSERS[kind](module, rng, tag, guide)


def _positions(module: Module, op: Operation) -> list[Operation]:
    """Ops before which a copy of `op` may go."""
    synchronizing = rule_of(op).placement == "synchronizing"
    return [p for p in module.kernel.walk() if p.parent is not None and p.parent_op is not None
            and not inside(p, op) and (not synchronizing or synchronizes(p.parent))]


def _propose_delete(module, rng, tag, guide) -> Edit:
    target = guide.target(rng, [op for op in editable(module, "delete")
                         if not op.has_trait(Terminator)])
    return Delete(tag, target.id, _fills(target, rng))


def _propose_copy(module, rng, tag, guide) -> Edit:
    source = guide.target(rng, [op for op in editable(module, "copy")
                                if not op.has_trait(Terminator)])
    before = _pick(rng, _positions(module, source))
    scratch = module.clone()
    ops = ops_by_id(scratch)
    copy = _place_copy(ops, ops[source.id], ops[before.id], tag)
    rewires = list(_repairs(copy, rng))
    slots = [(user, index, result.index) for user in dominated_by(copy)
             for index, value in enumerate(user.operands) for result in copy.results
             if value.type == result.type and not inside(user, copy)]
    if slots:
        user, index, result_index = _pick(rng, slots)
        rewires.append(Rewire(user.id, index, ("r", copy.id, result_index)))
    return Copy(tag, source.id, before.id, tuple(rewires))


def _propose_move(module, rng, tag, guide) -> Edit:
    source = guide.target(rng, [op for op in editable(module, "move")
                                if not op.has_trait(Terminator)])
    positions = [p for p in _positions(module, source)
                 if p is not source and p is not _next(source)]
    enclosing = [p for p in positions if any(p is a for a in source.ancestors())]
    hoist = enclosing and guide.hoist_share and rng.random() < guide.hoist_share
    before = _pick(rng, enclosing if hoist else positions)
    # half the hoists take along the ops that compute what the source reads, where they can
    # go too (a loop with its bound); the others repair those operands at random, as GEVO's
    # moves do, which changes what the op computes (a loop bound that becomes a row's length)
    carry = hoist and rng.random() < CARRY_SHARE
    carried = tuple(op.id for op in _carriable(source, before)) if carry else ()
    scratch = module.clone()
    ops = ops_by_id(scratch)
    for id in carried:
        _carry(ops, ops[id], ops[before.id], tag)
    ops = ops_by_id(scratch)
    copy = _place_copy(ops, ops[source.id], ops[before.id], tag)
    return Move(tag, source.id, before.id, tuple(_repairs(copy, rng)),
                _fills(ops[source.id], rng, copy), carried)


def _carriable(source: Operation, before: Operation) -> list[Operation]:
    """The ops, in a valid order, whose results `source` reads (directly or through one
    another) that are not in scope before `before` and can be moved there: no regions, no
    writes to memory, nothing convergent, movable by their rule, each reading only values in
    scope there or of other such ops. Values with any other definition are left to repair."""
    visible = set(visible_before(before))
    chosen: list[Operation] = []

    def reach(value) -> bool:
        if value in visible:
            return True
        owner = getattr(value, "owner", None)
        if owner is None or inside(owner, source) or owner.regions or \
                owner.has_trait(WritesMemory) or owner.has_trait(Convergent):
            return False
        rule = rule_of(owner)
        if rule is None or not rule.allows("move"):
            return False
        if any(owner is c for c in chosen):
            return True
        if not all(reach(v) for v in owner.operands):
            return False
        chosen.append(owner)
        visible.update(owner.results)
        return True

    for op in source.walk():
        for value in op.operands:
            owner = getattr(value, "owner", None)
            if owner is None or not inside(owner, source):
                reach(value)
    return chosen


def _propose_replace(module, rng, tag, guide) -> Edit:
    target = guide.target(rng, [op for op in editable(module, "replace")
                         if not op.has_trait(Terminator)])
    types = [r.type for r in target.results]
    source = _pick(rng, [op for op in editable(module, "copy") if op is not target
                         and not op.has_trait(Terminator)
                         and [r.type for r in op.results] == types])
    scratch = module.clone()
    ops = ops_by_id(scratch)
    copy = _place_copy(ops, ops[source.id], ops[target.id], tag)
    return Replace(tag, target.id, source.id, tuple(_repairs(copy, rng)))


def _propose_swap(module, rng, tag, guide) -> Edit:
    candidates = [op for op in editable(module, "swap") if not op.has_trait(Terminator)]
    first = guide.target(rng, candidates)
    second = _pick(rng, [op for op in candidates if not inside(op, first)
                         and not inside(first, op) and op is not _next(first)
                         and first is not _next(op)])
    scratch = module.clone()
    ops = ops_by_id(scratch)
    a, b = ops[first.id], ops[second.id]
    copy_a = _place_copy(ops, a, b, tag)
    copy_b = _place_copy(ops, b, a, tag)
    rewires = _repairs(copy_b, rng)
    fills = _fills(a, rng, copy_a) + _fills(b, rng, copy_b)
    return Swap(tag, first.id, second.id, rewires, fills)


def _propose_operand(module, rng, tag, guide) -> Edit:
    target = guide.target(rng, [op for op in editable(module, "operand") if op.operands])
    index = int(rng.integers(len(target.operands)))
    current = target.operands[index]
    refs = [ref_of(v) for v in visible_before(target) if v.type == current.type
            and v is not current]
    refs += constant_refs(current.type)
    return Operand(tag, target.id, index, _pick(rng, refs))


_PROPOSERS = {"delete": _propose_delete, "copy": _propose_copy, "move": _propose_move,
              "replace": _propose_replace, "swap": _propose_swap, "operand": _propose_operand}


def _repairs(any_op: Operation, rng) -> tuple[Rewire, ...]:
    """A random in-scope value (or constant) for every operand slot out of scope."""
    rewires = []
    for op, index in unscoped_operands(any_op):
        wanted = op.operands[index].type
        refs = [ref_of(v) for v in visible_before(op) if v.type == wanted]
        rewires.append(Rewire(op.id, index, _pick(rng, refs + constant_refs(wanted))))
    return tuple(rewires)


def _fills(target: Operation, rng, moved: Operation | None = None) -> tuple[Fill, ...]:
    """What the uses of each used result of `target` read once it is removed: the same result
    of `moved` (target's copy at its new place) where that dominates them, as a move keeps
    what it moves connected (a loop-invariant value hoisted out of its loop still feeds its
    uses), else a random value in scope or a constant."""
    fills = []
    for result in target.results:
        if not result.uses:
            continue
        visible = [v for v in visible_before(target) if v.type == result.type
                   and not inside(getattr(v, "owner", None) or v.block.parent_op, target)]
        if moved is not None and any(v is moved.results[result.index] for v in visible):
            fills.append(Fill(target.id, result.index, ref_of(moved.results[result.index])))
            continue
        refs = [ref_of(v) for v in visible]
        fills.append(Fill(target.id, result.index,
                          _pick(rng, refs + constant_refs(result.type))))
    return tuple(fills)


def _next(op: Operation) -> Operation | None:
    ops = op.parent.ops
    position = ops.index(op)
    return ops[position + 1] if position + 1 < len(ops) else None

