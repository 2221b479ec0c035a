"""The forward transform: a kernel's (or device function's) tangent as one new function.

Every value that carries a derivative gets W tangents, IR values living next to it (the
multivariate dual numbers of width W: in registers after SROA, like ForwardDiff's `Dual` or
Enzyme's `[W x T]` shadows). Each op's tangent rule (`JVP` in `zymo/ops`) is applied once per
direction; the partials it emits are shared between directions by CSE. Arrays with tangents get
W tangent arrays: loads load them, stores store them (a zero where the stored value carries no
derivative), atomic adds add into them; shared and local arrays that hold active values get
tangent arrays of their own. `if`s yield tangents beside their results and loops carry them
beside their carried values. Nothing is recomputed or cached: forward mode follows the primal.

Expressions are preaccumulated (ADIFOR's statement-level reverse mode): a value whose only use
is a scalar op of the same block, where both have partials (`from_partials`), gets no tangents
of its own while its tree stays small (`MAX_LEAVES`). At the root of the tree, one reverse sweep
over scalars gives d root / d leaf for every leaf (a value with tangents), and each direction
costs one multiply-add per distinct leaf, where dual numbers cost W operations per node and
operand: `u*u + v*v` is 2 per direction instead of 5. Every direction is computed alike
whatever W, so a width-W JVP equals W width-1 JVPs bit for bit.

Tangents are given per argument: as arguments (W per argument, after it) or as constants
(`seeds`: the identity basis of `jacfwd`, with symbolic zeros where a direction does not touch
the argument, so the seeded code starts sparse).
"""
from __future__ import annotations

import os

from ..diagnostics import CompileError, Diagnostic, Loc
from ..ir.builder import Builder
from ..ir.operation import Operation, Region
from ..ir.traits import Aliases, Allocates, Atomic, Convergent, Pure, Terminator, WritesMemory
from ..ir.types import Array, FunctionType
from ..ir.values import Value
from ..ops import control, memory
from ..ops.registry import JVP
from ..ops.structural import (FORWARD_ATOMIC, FORWARD_IF, FORWARD_LOAD, FORWARD_LOOP,
                              FORWARD_MODE, FORWARD_STORE, FORWARD_VIEW, handles, is_structural,
                              transform)
from .activity import ActivityAnalysis, accessed_array, is_float, lost_derivatives, reject_calls
from .emit import Emitter


@transform(FORWARD_MODE)
class Forward(Emitter):
    def __init__(self, func, arg_kinds: list[str], width: int = 1, extra_types=None,
                 seeds: dict | None = None):
        """`arg_kinds[i]`: "const", "dup" (W tangent arguments of the types `extra_types[i]`,
        the argument's own type when None) or "seed" (`seeds[i]`: W floats or None, one per
        direction)."""
        self.func = func
        self.kinds = list(arg_kinds)
        self.width = width
        self.extra_types = list(extra_types or [None] * len(arg_kinds))
        self.seeds = dict(seeds or {})
        activity_kinds = ["const" if k == "const" else "dup" if isinstance(a.type, Array)
                          else "active" for a, k in zip(func.args, self.kinds)]
        self.activity_kinds = activity_kinds
        returned = func.body.block.ops[-1].operands if func.body.block.ops else ()
        self.activity = ActivityAnalysis(func, activity_kinds, outputs=returned)
        self.b = Builder()
        self.errors: list[Diagnostic] = []
        self.fwd: dict = {}       # primal value -> value of the new function
        self.tan: dict = {}       # primal value (scalar or array) -> W tangents (None: zero)
        self.absorbed: dict = {}  # value -> (its op, leaves of its tree): no tangents of its own

    # ---- the whole function -----------------------------------------------------------------
    def run(self):
        func, W = self.func, self.width
        self._validate()
        region = Region()
        block = region.block
        names: list[str] = []
        for index, (arg, kind, name) in enumerate(zip(func.args, self.kinds, func.arg_names)):
            self.fwd[arg] = block.add_arg(arg.type, name)
            names.append(name)
            if kind == "dup":
                extra = self.extra_types[index] or [arg.type] * W
                tangents = []
                for k in range(W):
                    tname = f"t{name}" if W == 1 else f"t{k}_{name}"
                    tangents.append(block.add_arg(extra[k], tname))
                    names.append(tname)
                self.tan[arg] = tangents
        self.b.block, self.b.index = block, None
        with self.b.location(func.loc):
            for index, seed in self.seeds.items():
                arg = func.args[index]
                self.tan[arg] = [None if s is None else self.const(s, arg.type) for s in seed]
        term = self._block(func.body.block, block)
        results = [self.fwd.get(v, v) for v in term.operands]
        tangent_results = []
        for value in term.operands:
            if is_float(value):
                tangent_results += [self._or_zero(t, value.type) for t in self.tangent(value)]
        with self.b.at_end(block), self.b.location(term.loc):
            self.b.create(control.Return, *results, *tangent_results)
        if self.errors:
            raise CompileError(sorted(set(self.errors), key=lambda d: (d.loc.line, d.loc.col)))
        ftype = FunctionType(tuple(a.type for a in block.args),
                             tuple(v.type for v in results + tangent_results))
        attrs = dict(func.attrs, function_type=ftype, arg_names=tuple(names))
        return control.Func([], [], attrs, [region], loc=func.loc, id=func.id)

    def error(self, loc: Loc, message: str, hint: str = "") -> None:
        self.errors.append(Diagnostic(loc, message, hint))

    def _validate(self) -> None:
        for arg, kind in zip(self.func.args, self.kinds):
            if kind != "const" and not (isinstance(arg.type, Array) and arg.type.dtype.kind == "f"
                                        or is_float(arg)):
                self.error(self.func.loc, f"argument `{arg.name_hint}` is {arg.type}, which "
                           f"carries no tangent", "pass it without a tangent (Const)")
        for store, load, arg in lost_derivatives(self.func, self.activity_kinds, self.activity):
            self.error(store.loc, f"array `{arg.name_hint}` has no tangent but stores values "
                       f"that carry one and is read back (line {load.loc.line}): their "
                       f"tangents would be lost", f"pass it as zm.Duplicated({arg.name_hint}, "
                       f"t{arg.name_hint})")

    # ---- values -------------------------------------------------------------------------------
    def primal(self, value: Value) -> Value:
        return self.fwd.get(value, value)

    def tangent(self, value: Value) -> list:
        return self.tan.get(value) or [None] * self.width

    def _or_zero(self, tangent, type):
        return tangent if tangent is not None else self.zero(type)

    def _carries(self, value: Value) -> bool:
        return self.activity.active(value)

    # ---- blocks and ops ----------------------------------------------------------------------
    def _block(self, pblock, nblock):
        """Clone `pblock` into `nblock` with tangents; returns its (unmapped) terminator."""
        terminator = None
        with self.b.at_end(nblock):
            for op in pblock.ops:
                if op.has_trait(Terminator):
                    terminator = op
                    continue
                with self.b.location(op.loc):
                    self._op(op)
        return terminator

    def _op(self, op: Operation) -> None:
        rule = JVP.find(op)
        if op.regions:
            if rule is None:
                self.error(op.loc, f"cannot differentiate `{op.name}`")
                return
            rule(self, op)
            return
        self.b.insert(op.clone(self.fwd))
        if op.has_trait(Allocates) and op.results and self.activity.is_active_array(op.result):
            self.tan[op.result] = [self.b.insert(op.clone({})).result for _ in range(self.width)]
        if not self._needs_tangent(op):
            return
        if rule is None:
            reason = JVP.absence_reason(type(op))
            self.error(op.loc, f"cannot differentiate `{op.name}`" +
                       (f": {reason}" if reason else ""),
                       "compute it from values that carry no derivative, or restructure")
            return
        if is_structural(rule):
            rule(self, op)
            return
        if _pointwise(op, rule):
            leaves = self._leaf_count(op)
            if self._absorbed_by_user(op) and leaves <= MAX_LEAVES:
                self.absorbed[op.result] = (op, leaves)
            elif self._carries(op.result):
                self.tan[op.result] = self._accumulated(op)
            return
        per_direction = [rule(self, op, [self.tangent(v)[k] for v in op.operands])
                         for k in range(self.width)]
        for i, res in enumerate(op.results):
            if self._carries(res):
                self.tan[res] = [d[i] for d in per_direction]

    # ---- preaccumulation ---------------------------------------------------------------------
    def _absorbed_by_user(self, op: Operation) -> bool:
        uses = op.result.uses
        if len(uses) != 1:
            return False
        user = uses[0].operation
        return user.parent is op.parent and _pointwise(user, JVP.find(user))

    def _leaf_count(self, op: Operation) -> int:
        """At most how many leaves the tree of `op` has (a leaf repeated counts each time)."""
        return sum(self.absorbed[v][1] if v in self.absorbed else 1
                   for v in op.operands if self._carries(v))

    def _accumulated(self, root: Operation) -> list:
        """The W tangents of `root`'s result from one reverse sweep over the tree of absorbed
        values below it: sum over leaves of (d root / d leaf) * tangent of the leaf."""
        adjoints: dict = {}
        stack = [(root, self.one(root.result.type))]
        while stack:
            node, adjoint = stack.pop()
            for operand, contribution in zip(node.operands, JVP.find(node).partials):
                if contribution is None or not self._carries(operand):
                    continue
                term = contribution(self, node, adjoint)
                if operand in self.absorbed:
                    stack.append((self.absorbed[operand][0], term))
                elif any(t is not None for t in self.tangent(operand)):
                    known = adjoints.get(operand)
                    adjoints[operand] = term if known is None else self.add(known, term)
        tangents = []
        for k in range(self.width):
            total = None
            for leaf, adjoint in adjoints.items():
                t = self.tangent(leaf)[k]
                if t is not None:
                    term = self.mul(adjoint, t)
                    total = term if total is None else self.add(total, term)
            tangents.append(total)
        return tangents

    def _needs_tangent(self, op: Operation) -> bool:
        if op.has_trait(Aliases):   # a view of an array with tangents
            return op.operands[0] in self.tan or self.activity.is_active_array(op.result)
        if op.has_trait(Atomic) and any(self._carries(r) and r.has_uses for r in op.results):
            self.error(op.loc, "the old value returned by an atomic on differentiated data "
                       "cannot be differentiated", "do not use the atomic's result")
        array = accessed_array(op)
        if array is not None and op.has_trait(WritesMemory):
            return array in self.tan
        return any(self._carries(r) for r in op.results)

    # ---- memory: the structural JVP rules of loads, stores and atomics ---------------------
    @handles(FORWARD_LOAD)
    def forward_load(self, op: Operation) -> None:
        arrays = self.tan.get(op.array)
        if arrays is None:
            return
        indices = [self.primal(i) for i in op.indices]
        self.tan[op.result] = [self.b.value(memory.Load, a, *indices) for a in arrays]

    @handles(FORWARD_VIEW)
    def forward_view(self, op: Operation) -> None:
        """A view (a slice as an array, a reshape) of an array with tangents: the same view of
        each tangent array, so that loads and stores through it reach the tangents' elements
        as the primal's reach the array's (the tangent memory aliases as the primal's does)."""
        arrays = self.tan.get(op.operands[0])
        if arrays is None:
            if self.activity.is_active_array(op.result):
                self.error(op.loc, f"cannot differentiate `{op.name}`: the viewed array "
                           "carries no tangent", "view a differentiated array")
            return
        rest = {v: self.primal(v) for v in op.operands[1:]}
        self.tan[op.result] = [self.b.insert(op.clone({**rest, op.operands[0]: a})).result
                               for a in arrays]

    @handles(FORWARD_STORE)
    def forward_store(self, op: Operation) -> None:
        indices = [self.primal(i) for i in op.indices]
        dtype = op.array.type.dtype
        for array, t in zip(self.tan[op.array], self.tangent(op.value)):
            self.b.create(memory.Store, array, *indices, self._or_zero(t, dtype))

    @handles(FORWARD_ATOMIC)
    def forward_atomic(self, op: Operation) -> None:
        indices = [self.primal(i) for i in op.indices]
        for array, t in zip(self.tan[op.array], self.tangent(op.value)):
            if t is not None:
                self.b.create(getattr(op, "plain", type(op)), array, *indices, t,
                              **({} if hasattr(op, "plain") else op.attrs))

    # ---- control flow -------------------------------------------------------------------------
    @handles(FORWARD_IF)
    def forward_if(self, op: Operation) -> None:
        carried = [r for r in op.results if self._carries(r)]
        regions = []
        for preg in op.regions:
            nreg = Region()
            term = self._block(preg.block, nreg.block)
            with self.b.at_end(nreg.block), self.b.location(term.loc):
                values = [self.primal(v) for v in term.operands]
                for res, v in zip(op.results, term.operands):
                    if res in carried:
                        values += [self._or_zero(t, res.type) for t in self.tangent(v)]
                self.b.create(control.Yield, *values)
            regions.append(nreg)
        types = [r.type for r in op.results]
        types += [r.type for r in carried for _ in range(self.width)]
        new = self.b.create(type(op), self.primal(op.cond), result_types=types,
                            regions=regions, **op.attrs)
        self._map_results(op, new, carried)

    @handles(FORWARD_LOOP)
    def forward_loop(self, op: Operation) -> None:
        """`for` and `while`: the tangents of carried values are carried beside them."""
        n = len(op.inits)
        body_offset = len(op.regions[-1].block.args) - n   # for: the induction variable
        carried = [k for k in range(n) if self._carries(op.results[k])
                   or self._carries(op.regions[-1].block.args[body_offset + k])]
        inits = [self.primal(v) for v in op.operands]
        for k in carried:
            inits += [self._or_zero(t, op.inits[k].type) for t in self.tangent(op.inits[k])]
        regions = []
        for preg in op.regions:
            old = preg.block
            nreg = Region()
            lead = len(old.args) - n
            for arg in old.args:
                self.fwd[arg] = nreg.block.add_arg(arg.type, arg.name_hint)
            for k in carried:
                arg = old.args[lead + k]
                self.tan[arg] = [nreg.block.add_arg(arg.type, f"t{arg.name_hint}")
                                 for _ in range(self.width)]
            term = self._block(old, nreg.block)
            with self.b.at_end(nreg.block), self.b.location(term.loc):
                values = [self.primal(v) for v in term.operands]
                if isinstance(term, control.Yield):
                    for k in carried:
                        values += [self._or_zero(t, op.inits[k].type)
                                   for t in self.tangent(term.operands[k])]
                self.b.create(type(term), *values)
            regions.append(nreg)
        types = [r.type for r in op.results]
        types += [op.results[k].type for k in carried for _ in range(self.width)]
        new = type(op)(inits, types, dict(op.attrs), regions, loc=op.loc, id=op.id)
        self.b.insert(new)
        self._map_results(op, new, [op.results[k] for k in carried])

    def _map_results(self, op: Operation, new: Operation, carried: list) -> None:
        for old, res in zip(op.results, new.results):
            self.fwd[old] = res
        extra = iter(new.results[len(op.results):])
        for res in carried:
            self.tan[res] = [next(extra) for _ in range(self.width)]


# Trees of at most this many leaves: larger ones keep more partials and leaf tangents live up to
# their root. On the width-5 Roe flux Jacobian (bench/cfd), 2 leaves cut the float64 operations
# per thread from 721 to 673 and the registers from 172 to 164; unbounded trees cut them to 636
# but needed 240 registers, and ran slower. ZYMO_TREE_LEAVES=0 turns preaccumulation off (for
# comparisons).
MAX_LEAVES = int(os.environ.get("ZYMO_TREE_LEAVES", "2"))


def _pointwise(op: Operation, rule) -> bool:
    """Whether the op's tangent is a sum of (scalar partial) * (operand tangent): a rule from
    partials on a pure op of one thread (a shuffle's partial is a shuffle, not a factor), on
    real values: a complex value's tangent is a pair, which no real partial multiplies."""
    return hasattr(rule, "partials") and op.has_trait(Pure) and not op.has_trait(Convergent) \
        and not any(getattr(v.type, "is_complex", False) for v in (*op.operands, *op.results))


def tangent_module(module, arg_kinds: list[str], width: int = 1, extra_types=None):
    """The forward-mode derivative of `module`'s kernel (optimized, inlined) as a new module."""
    from ..ir.module import Module
    reject_calls(module.kernel)
    func = Forward(module.kernel, arg_kinds, width, extra_types).run()
    out = Module(module.entry)
    out.add(func)
    return out


def tangent_function(func, arg_kinds: list[str], width: int = 1, seeds: dict | None = None,
                     name: str | None = None):
    """The forward-mode derivative of a device function: results, then W tangents per float
    result (result-major)."""
    new = Forward(func, arg_kinds, width, seeds=seeds).run()
    if name is not None:
        new.attrs["sym_name"] = name
    return new
