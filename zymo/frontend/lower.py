"""Python AST -> typed IR: one visit method per allowed construct, every node located.

Values are typed while they are emitted (argument types are known per specialization);
structured control flow gets its carried values from `scopes`, and break/continue/return
become flags guarding the statements after them.
"""
from __future__ import annotations

import ast
from typing import Any

import numpy as np

from ..diagnostics import Diagnostic, Loc
from ..ir import types as T
from ..ir.builder import Builder
from ..ir.operation import Region
from ..ir.types import Array, Scalar
from ..ir.values import Value
from ..ops import arith, control, memory
from . import (arrayviews, carried, complexes, composites, enums, intrinsics, iteration,
               loop_else, raising, reductions)
from .composites import SliceArgs
from .convert import AST_BINARY, AST_COMPARE, AST_UNARY, Converter, UserError, describe
from .intrinsics import INT_METHODS, BoundIntrinsic
from .resolve import Resolver
from .scopes import BREAK, CONTINUE, RETURNED, RETVAL, assigned, exits
from .values import (Choice, Member, Obj, Poison, PyConst, Rec, RecRef, Tup, Undefined, Unset,
                     View, Weak, holds_array, is_scalar_value)

FLAGS = (BREAK, CONTINUE, RETURNED)


class Lowerer(Converter):
    def __init__(self, source, resolver: Resolver, compiler):
        self.source = source  # frontend.source.Source
        self.resolver = resolver
        self.compiler = compiler  # frontend.driver.FunctionCompiler (device calls, diagnostics)
        self.b = Builder()
        self.env: dict[str, Any] = {}
        self.diags: list[Diagnostic] = []
        self.loop_depth = 0
        # per enclosing block, the names its statements after the current one read: a name
        # first assigned in a loop body is carried out of the loop only when one is
        self.read_later: list[set[str]] = []
        self.captures: dict[int, Value] = {}   # captured GPU arrays (by id) -> their argument
        self.capture_region = None
        self.capture_names: list[str] = []
        self.recursion = None   # frontend.recursion.Pending of the device function lowered
        self.elifs: set[ast.If] = set()   # the `elif`s of the if statements lowered

    # ---- locations and errors ------------------------------------------------------------
    def loc(self, node: ast.AST | None) -> Loc:
        return self.source.loc(node)

    def error(self, node, message: str, hint: str = "") -> UserError:
        return UserError(node, message, hint)

    def report(self, error: UserError, fallback: ast.AST) -> None:
        if not error.message:
            return  # a follow-up of an error reported already
        self.diags.append(Diagnostic(self.loc(error.node or fallback), error.message, error.hint))

    # ---- statements ----------------------------------------------------------------------
    def visit_block(self, stmts: list[ast.stmt]) -> None:
        later = _read_after(stmts)
        for index, stmt in enumerate(stmts):
            if any(_is_true(self.env.get(flag)) for flag in self._active_flags()):
                return  # unreachable: an earlier break/continue/return always ran
            self.read_later.append(later[index])
            try:
                self.visit_stmt(stmt)
            finally:
                self.read_later.pop()
            pending = [f for f in exits(stmt) if f in self._active_flags()
                       and not _is_false(self.env.get(f))]
            rest = stmts[index + 1:]
            if pending and rest and not any(_is_true(self.env.get(f)) for f in pending):
                self.guarded(rest, pending, stmt)
                return

    def _active_flags(self) -> tuple[str, ...]:
        return (BREAK, CONTINUE, RETURNED) if self.loop_depth else (RETURNED,)

    def guarded(self, rest: list[ast.stmt], flags: list[str], node: ast.stmt) -> None:
        """Run `rest` only where none of the exit `flags` is set."""
        with self.b.location(self.loc(node)):
            stop = self.to_bool(self.env[flags[0]])
            for flag in flags[1:]:
                stop = self.binary("or", stop, self.to_bool(self.env[flag]))
            go = self.unary("not", stop)

        def then():
            for flag in flags:
                self.env[flag] = PyConst(False)
            self.visit_block(rest)

        def otherwise():
            if len(flags) == 1:
                self.env[flags[0]] = PyConst(True)

        names = assigned(rest) | set(flags)
        self.emit_if(go, then, otherwise, names, node)

    def visit_stmt(self, stmt: ast.stmt) -> None:
        self.b.loc = self.loc(stmt)
        method = getattr(self, f"stmt_{type(stmt).__name__}", None)
        chosen = self.chosen_array_read(stmt)
        if chosen is not None:
            self.versioned(stmt, chosen)
            return
        try:
            if method is None:
                raise self.error(stmt, f"unsupported statement in a kernel: {_syntax_name(stmt)}",
                                 _STATEMENT_HINTS.get(type(stmt).__name__, ""))
            method(stmt)
        except UserError as error:
            self.report(error, stmt)
            for name in assigned([stmt]):
                if not name.startswith("$"):
                    self.env[name] = Poison()

    def chosen_array_read(self, stmt: ast.stmt) -> str | None:
        """The first name `stmt` reads that holds an array chosen at run time (a Choice),
        unless `stmt` only copies names (`a, b = b, a`: no memory is touched)."""
        if not any(isinstance(value, Choice) for value in self.env.values()):
            return None
        if isinstance(stmt, ast.Assign) and all(
                isinstance(n, ast.Name) for part in (stmt.value, *stmt.targets)
                for n in ast.walk(part) if not isinstance(n, (ast.Tuple, ast.expr_context))):
            return None
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and \
                    isinstance(self.env.get(node.id), Choice):
                return node.id
        return None

    def versioned(self, stmt: ast.stmt, name: str) -> None:
        """`stmt` once per array `name` may hold, under a test of its index: each copy sees
        one array, so each memory op names one (a GPU branches uniformly on the index)."""
        choice = self.env[name]
        names = assigned([stmt])

        def copy(k: int):
            def fill():
                self.env[name] = choice.arrays[k]
                self.visit_stmt(stmt)
                if name not in names:
                    self.env[name] = choice
            return fill

        def cascade(k: int):
            if k == len(choice.arrays) - 1:
                return copy(k)

            def fill():
                with self.b.location(self.loc(stmt)):
                    test = self.b.value(arith.Cmp, choice.index, self.constant(k, T.i32),
                                        predicate="eq")
                self.emit_if(test, copy(k), cascade(k + 1), names, stmt)
            return fill

        cascade(0)()

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.expr(node.value)

    def stmt_Pass(self, node) -> None:
        pass

    def stmt_Assign(self, node: ast.Assign) -> None:
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value, node)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            raise self.error(node, "a declaration without a value", "assign a value: x: zm.f32 = 0")
        value = self.expr(node.value)
        annotation = self.expr(node.annotation)
        if isinstance(annotation, Obj) and isinstance(annotation.obj, Scalar):
            value = self.cast(self.materialize(value, annotation.obj, node), annotation.obj)
        self.assign(node.target, value, node)

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        kind = AST_BINARY.get(type(node.op))
        if kind is None:
            raise self.error(node, f"unsupported operator {_syntax_name(node.op)}=")
        if isinstance(node.target, (ast.Subscript, ast.Attribute)):
            array, indices = self.subscript_target(node.target)
            old = self.b.value(memory.Load, array, *indices)
            new = self.binary(kind, old, self.expr(node.value), node)
            self.store(array, indices, new, node)
        else:
            self.assign(node.target, self.binary(kind, self.expr(node.target),
                                                 self.expr(node.value), node), node)

    def assign(self, target: ast.AST, value, node) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, Value):
                value.name_hint = value.name_hint or target.id
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, Tup):
                raise self.error(node, f"cannot unpack {describe(value)}", "unpack tuples only")
            if len(value.items) != len(target.elts):
                raise self.error(node, f"unpacking {len(value.items)} values into "
                                       f"{len(target.elts)} names")
            for element, item in zip(target.elts, value.items):
                self.assign(element, item, node)
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            composites.store_whole(self, node, self.store_target(target), value)
        else:
            raise self.error(target, f"cannot assign to {_syntax_name(target)}")

    def store(self, array: Value, indices, value, node) -> None:
        if array.type.space == "const":
            raise self.error(node, "constant arrays are read-only",
                             "copy the values into a zm.local.array to change them")
        element = array.type.dtype
        if isinstance(value, Tup) or isinstance(value, Obj):
            raise self.error(node, f"cannot store {describe(value)} in an array of {element}")
        if isinstance(value, PyConst) and isinstance(value.value, float) and element.is_int:
            value = PyConst(int(value.value))
        self.b.create(memory.Store, array, *indices, self.materialize(value, element, node))

    def stmt_Return(self, node: ast.Return) -> None:
        if isinstance(node.value, ast.Constant) and node.value.value is None:
            node = ast.copy_location(ast.Return(value=None), node)   # `return None` is `return`
        if node.value is not None:
            if self.compiler.is_kernel:
                raise self.error(node, "a kernel cannot return a value",
                                 "write results into an output array")
            value = self.expr(node.value)
            if isinstance(value, (Obj, Poison)):
                raise self.error(node, f"cannot return {describe(value)}")
            self.env[RETVAL] = value
        if self.recursion is not None:
            self.recursion.returned(None if node.value is None else self.env[RETVAL], node)
        self.env[RETURNED] = PyConst(True)

    def stmt_Raise(self, node: ast.Raise) -> None:
        raising.statement(self, node)
        self.env[RETURNED] = PyConst(True)

    def stmt_Break(self, node) -> None:
        self.env[BREAK] = PyConst(True)

    def stmt_Continue(self, node) -> None:
        self.env[CONTINUE] = PyConst(True)

    def stmt_If(self, node: ast.If) -> None:
        cond = self.to_bool(self.expr(node.test), node.test)
        if isinstance(cond, PyConst):  # decided at compile time: lower only the taken branch
            self.visit_block(node.body if cond.value else node.orelse)
            return
        names = assigned(node.body) | assigned(node.orelse)
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            self.elifs.add(node.orelse[0])
        # the last `elif` of a chain without `else`: what every branch assigns is taken as
        # assigned, as numba does (the chain usually covers every case, `i % 4 == 0 ... 3`);
        # a path that falls through all of them reads zeros. A lone `if` stays an error.
        falls_through = node in self.elifs and not node.orelse
        self.emit_if(cond, lambda: self.visit_block(node.body),
                     lambda: self.visit_block(node.orelse), names, node, falls_through)

    def emit_if(self, cond: Value, then_fn, else_fn, names: set[str], node,
                falls_through: bool = False) -> None:
        """An if op whose results are the names either branch may assign. `falls_through`:
        the (empty) else branch gives zeros for what the then branch assigns."""
        before = dict(self.env)
        then_region, else_region = Region(), Region()
        ends = []
        for region, fill in ((then_region, then_fn), (else_region, else_fn)):
            self.env = dict(before)
            with self.b.at_end(region.block):
                fill()
            ends.append(self.env)
        self.env = dict(before)
        yielded: list[tuple[str, Any]] = []
        # a branch that surely left (return, break, continue) never uses what it leaves
        # unassigned: the code after the if runs only on the other path
        left = [any(_is_true(end.get(flag)) for flag in FLAGS) for end in ends]
        for name in sorted(names):
            a, b = ends[0].get(name, before.get(name)), ends[1].get(name, before.get(name))
            if left[0] and _missing(a) and not _missing(b):
                a = ends[0][name] = self.placeholder(b, then_region)
            elif (left[1] or falls_through) and _missing(b) and not _missing(a):
                b = ends[1][name] = self.placeholder(a, else_region)
            if a is None or b is None or isinstance(a, Undefined) or isinstance(b, Undefined):
                self.env[name] = Undefined(name, "it is assigned on only one path of an if")
            elif isinstance(a, Poison) or isinstance(b, Poison):
                self.env[name] = Poison()
            elif carried.same(a, b):
                self.env[name] = a
            else:
                shape = carried.join(carried.abstract(a, name, node), b, name, node)
                yielded.append((name, shape))
        leaves_per_branch = []
        for region, end in ((then_region, ends[0]), (else_region, ends[1])):
            with self.b.at_end(region.block):
                leaves = [leaf for name, shape in yielded
                          for leaf in carried.flatten(self, end[name], shape, node)]
                self.b.create(control.Yield, *leaves)
            leaves_per_branch.append(leaves)
        result_types = [v.type for v in leaves_per_branch[0]]
        op = self.b.create(control.If, cond, result_types=result_types,
                           regions=[then_region, else_region])
        results = iter(op.results)
        for name, shape in yielded:
            self.env[name] = carried.rebuild(shape, results)

    def placeholder(self, like, region: Region):
        """A value shaped like `like` for a path that never reads it (zeros), or None."""
        if isinstance(like, PyConst):
            return PyConst(type(like.value)(0))
        if isinstance(like, Weak):
            return Weak(self.placeholder(like.value, region))
        if isinstance(like, Member):
            value = self.placeholder(like.value, region)
            return None if value is None else Member(like.cls, value)
        if isinstance(like, Tup):
            items = tuple(self.placeholder(item, region) for item in like.items)
            return None if any(item is None for item in items) else Tup(items, like.fields)
        if isinstance(like, Value) and isinstance(like.type, Scalar):
            with self.b.at_end(region.block):
                return self.constant(0, like.type)
        return None

    # ---- loops ---------------------------------------------------------------------------
    def stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            self.visit_block(loop_else.split_else(node))
            return
        iterable = self.expr(node.iter)
        if isinstance(iterable, Tup):  # unrolled at compile time
            items = iterable.items
            self.unroll(node, len(items), lambda k: self.assign(node.target, items[k], node))
            return
        if iteration.is_composite_iterable(iterable) or isinstance(iterable, View) or \
                composites.is_array(iterable):
            iteration.lower_for(self, node, iterable)
            return
        if not (isinstance(iterable, Obj) and isinstance(iterable.obj, RangeArgs)):
            raise self.error(node.iter, f"cannot iterate over {describe(iterable)}",
                             "loop over range(...), a tuple, an array, enumerate(...) or "
                             "zip(...)")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "a range loop needs a single loop variable")
        lower, upper, step = iterable.obj.values(self, node.iter)
        body_names = assigned(node.body)
        if body_names & {BREAK, RETURNED}:
            var = node.target.id
            later = self.defined_later(body_names - {var})
            defined = var in self.env and not isinstance(self.env[var], Undefined)
            if var in later and not defined:
                self.env[var] = Unset()
            self.range_as_while(node, lower, upper, step, body_names,
                                keep_var=var in later or defined)
            return
        var = node.target.id
        # Python's loop variable keeps its last value after the loop: carried where read
        # later, or where it had a value before (an enclosing loop may carry it on)
        defined = var in self.env and not isinstance(self.env[var], Undefined)
        keep_var = var in self.defined_later(body_names | {var}) or defined
        names = sorted(n for n in body_names - {CONTINUE, var}
                       if n in self.env and not isinstance(self.env[n], Undefined))
        names += [var] if keep_var else []

        def build(shapes, region: Region):
            iv = region.block.add_arg(lower.type, var)

            def body():
                self.env[var] = iv
                self.visit_block(node.body)
            return self.loop_body(None, names, shapes, region, body_fn=body)

        def make(region, inits, shapes):
            return self.b.create(control.For, lower, upper, step, *inits,
                                 result_types=[t for s in shapes for t in carried.leaf_types(s)],
                                 regions=[region])

        self.emit_loop(node, names, build, make)
        if not keep_var:
            self.env[var] = Undefined(var, "a loop variable is not defined after its loop")

    def unroll(self, node: ast.For, count: int, bind) -> None:
        """A loop unrolled at compile time; `bind(k)` assigns its target for iteration k.
        Its break, continue and return are flags as in a run-time loop: each iteration after
        one that may have left runs only where none did."""
        flags = assigned(node.body) & {BREAK, CONTINUE, RETURNED}
        if not flags:
            for k in range(count):
                bind(k)
                self.visit_block(node.body)
            return
        outer = {flag: self.env.get(flag) for flag in (BREAK, CONTINUE)}
        names = assigned(node.body) | _loads_free(node) | {BREAK}
        self.env[BREAK] = PyConst(False)
        self.loop_depth += 1

        def iteration(k: int) -> None:
            if k == count:
                return
            bind(k)
            self.env[CONTINUE] = PyConst(False)
            self.visit_block(node.body)
            stops = [f for f in (BREAK, RETURNED) if not _is_false(self.env.get(f))]
            if any(_is_true(self.env[f]) for f in stops):
                return
            if not stops:
                iteration(k + 1)
                return
            with self.b.location(self.loc(node)):
                stop = self.to_bool(self.env[stops[0]])
                for flag in stops[1:]:
                    stop = self.binary("or", stop, self.to_bool(self.env[flag]))
                go = self.unary("not", stop)

            def rest():
                for flag in stops:
                    self.env[flag] = PyConst(False)
                iteration(k + 1)
            self.emit_if(go, rest, lambda: None, names | set(stops), node)

        try:
            iteration(0)
        finally:
            self.loop_depth -= 1
            for flag, value in outer.items():
                if value is None:
                    self.env.pop(flag, None)
                else:
                    self.env[flag] = value

    def defined_later(self, body_names: set[str]) -> set[str]:
        """Of the names a loop body assigns, those not yet defined that code after the loop
        reads: they are given a value before the loop (zero, as if the loop had run once),
        so that the loop carries them out. Returns the names read after the loop."""
        later = set().union(*self.read_later) if self.read_later else set()
        for name in body_names & later:
            if not name.startswith("$") and (name not in self.env or
                                             isinstance(self.env[name], Undefined)):
                self.env[name] = Unset()
        return later

    def range_as_while(self, node: ast.For, lower, upper, step, body_names,
                       keep_var: bool) -> None:
        """A range loop that may break or return: a while over (iv, carried...). The loop
        variable is carried out where `keep_var` (it keeps the value it had when the loop
        broke or ended, as in Python)."""
        var = node.target.id
        counter = f"$iv{self.loop_depth}"  # one per nesting level: loops nest
        saved = self.env.get(var)
        saved_break = self.env.get(BREAK)
        self.env[counter] = lower
        self.env[BREAK] = PyConst(False)
        step_value = step

        def condition():
            return self.range_test(self.env[counter], upper, step_value, node)

        def body():
            self.env[var] = self.env[counter]
            self.visit_block(node.body)
            self.env[counter] = self.b.value(arith.Add, self.env[counter], step_value)

        dropped = {CONTINUE} if keep_var else {CONTINUE, var}
        self.emit_while(node, condition, body, body_names | {counter, BREAK, var} - dropped,
                        cond_node=node.iter)
        self.env.pop(counter, None)
        self.env.pop(BREAK, None)
        if saved_break is not None:
            self.env[BREAK] = saved_break
        if not keep_var:
            self.env[var] = Undefined(var, "a loop variable is not defined after its loop") \
                if saved is None else saved

    def range_test(self, iv: Value, upper: Value, step: Value, node):
        constant = _constant_of(step)
        if constant is not None:
            return self.b.value(arith.Cmp, iv, upper, predicate="lt" if constant > 0 else "gt")
        zero = self.constant(0, step.type)
        up = self.b.value(arith.Cmp, iv, upper, predicate="lt")
        down = self.b.value(arith.Cmp, iv, upper, predicate="gt")
        positive = self.b.value(arith.Cmp, step, zero, predicate="gt")
        return self.b.value(arith.Select, positive, up, down)

    def stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            self.visit_block(loop_else.split_else(node))
            return
        body_names = assigned(node.body)
        self.defined_later(body_names)
        saved = self.env.pop(BREAK, None)
        if BREAK in body_names:
            self.env[BREAK] = PyConst(False)
        self.emit_while(node, lambda: self.to_bool(self.expr(node.test), node.test),
                        lambda: self.visit_block(node.body), body_names - {CONTINUE},
                        cond_node=node.test)
        self.env.pop(BREAK, None)
        if saved is not None:
            self.env[BREAK] = saved

    def emit_while(self, node, condition_fn, body_fn, body_names: set[str], cond_node) -> None:
        names = sorted(n for n in body_names if n in self.env and
                       not isinstance(self.env[n], Undefined))
        exit_flags = [f for f in (BREAK, RETURNED) if f in names]

        def build(shapes, region_pair):
            before_region, body_region = region_pair
            with self.b.at_end(before_region.block):
                self.bind_args(before_region, names, shapes)
                stop = None
                for flag in exit_flags:
                    value = self.to_bool(self.env[flag])
                    stop = value if stop is None else self.binary("or", stop, value)
                if stop is None:
                    cond = condition_fn()
                else:
                    go = self.unary("not", stop)
                    cond = self.short_circuit("and", go, condition_fn, cond_node)
                cond = self.materialize(self.to_bool(cond), T.bool_, node)
                self.b.create(control.Condition, cond)
            return self.loop_body(None, names, shapes, body_region, body_fn)

        def make(regions, inits, shapes):
            return self.b.create(control.While, *inits,
                                 result_types=[t for s in shapes for t in carried.leaf_types(s)],
                                 regions=list(regions))

        self.emit_loop(node, names, build, make, two_regions=True)

    def bind_args(self, region: Region, names, shapes) -> None:
        for name, shape in zip(names, shapes):
            args = [region.block.add_arg(t, name) for t in carried.leaf_types(shape)]
            self.env[name] = carried.rebuild(shape, iter(args))

    def loop_body(self, stmts, names, shapes, region: Region, body_fn=None):
        """Fill a loop body; returns the values of the carried names at its end."""
        self.bind_args(region, names, shapes)
        outer_flags = {f: self.env.get(f) for f in (CONTINUE,)}
        self.env[CONTINUE] = PyConst(False)
        self.loop_depth += 1
        try:
            with self.b.at_end(region.block):
                if body_fn is not None:
                    body_fn()
                else:
                    self.visit_block(stmts)
        finally:
            self.loop_depth -= 1
        ends = {name: self.env.get(name) for name in names}
        for flag, value in outer_flags.items():
            if value is None:
                self.env.pop(flag, None)
            else:
                self.env[flag] = value
        return ends

    def emit_loop(self, node, names: list[str], build, make, two_regions: bool = False) -> None:
        """Emit a loop, widening the carried types until the body agrees with them."""
        before = dict(self.env)
        shapes = [carried.abstract(before[n], n, node) for n in names]
        for _attempt in range(5):
            self.env = dict(before)
            diag_count = len(self.diags)
            regions = (Region(), Region()) if two_regions else Region()
            ends = build(shapes, regions)
            widened = []
            for name, shape in zip(names, shapes):
                end = ends[name]
                if isinstance(end, (Poison, Undefined)) or end is None:
                    widened.append(shape)
                    continue
                widened.append(carried.join(shape, end, name, node))
            if widened == shapes:
                break
            for region in (regions if two_regions else (regions,)):
                for op in list(region.walk()):
                    op.drop_operand_uses()
            del self.diags[diag_count:]
            shapes = widened
        else:
            raise self.error(node, "the types of the loop's variables do not settle",
                             "give loop variables an explicit type before the loop")
        body_region = regions[1] if two_regions else regions
        with self.b.at_end(body_region.block):
            leaves = [leaf for name, shape in zip(names, shapes)
                      for leaf in carried.flatten(self, ends[name], shape, node)]
            self.b.create(control.Yield, *leaves)
        self.env = dict(before)
        with self.b.location(self.loc(node)):
            inits = [leaf for name, shape in zip(names, shapes)
                     for leaf in carried.flatten(self, before[name], shape, node)]
            op = make(regions, inits, shapes)
        results = iter(op.results)
        for name, shape in zip(names, shapes):
            self.env[name] = carried.rebuild(shape, results)

    # ---- expressions ---------------------------------------------------------------------
    def expr(self, node: ast.expr):
        saved = self.b.loc
        self.b.loc = self.loc(node)
        try:
            method = getattr(self, f"expr_{type(node).__name__}", None)
            if method is None:
                raise self.error(node, f"unsupported expression in a kernel: {_syntax_name(node)}",
                                 _EXPRESSION_HINTS.get(type(node).__name__, ""))
            value = method(node)
            if isinstance(value, Obj) and (id(value.obj) in self.compiler.captured
                                           or _looks_like_gpu_array(value.obj)):
                value = self.capture(value.obj, node)
        finally:
            self.b.loc = saved
        if isinstance(value, Poison):
            raise UserError(None, "")  # already reported; silently abandon the statement
        return value

    def capture(self, obj, node) -> Value:
        """The argument that passes the captured GPU array `obj` by reference (a device
        function gets one too, which its callers pass on)."""
        key = id(obj)
        value = self.captures.get(key)
        if value is None:
            if key not in self.compiler.captured:
                raise self.error(node, "this GPU array is captured where zymo did not look for "
                                       "it", "pass it to the kernel as an argument")
            param = self.compiler.captured[key][1]
            value = self.captures[key] = self.capture_region.block.add_arg(
                param.type, f"captured{len(self.capture_names)}")
            self.capture_names.append(f"captured{len(self.capture_names)}")
        return value

    def expr_Constant(self, node: ast.Constant):
        if isinstance(node.value, (bool, int, float, complex)):
            return PyConst(node.value)
        if isinstance(node.value, (str, bytes)):   # print's text, a dtype name, a string
            return Obj(node.value)                   # stored into an array of strings
        raise self.error(node, f"unsupported constant {node.value!r}",
                         "kernels compute with numbers only")

    def expr_Name(self, node: ast.Name):
        if node.id in self.env:
            value = self.env[node.id]
            if isinstance(value, Undefined):
                raise self.error(node, f"'{node.id}' may be undefined here: {value.why}",
                                 f"assign '{node.id}' before the if/loop as well")
            return value
        found = self.resolver.lookup(node.id)
        if found is None:
            raise self.error(node, f"name '{node.id}' is not defined"
                                   f"{self.resolver.suggest(node.id, self.env)}",
                             "kernels see their arguments, local names, module-level names "
                             "and closures: define or import it there")
        if isinstance(found, Obj) and isinstance(found.obj, np.generic) and \
                found.obj.dtype.kind in "biuf":   # a module-level NumPy scalar: its own type
            return self.resolver.from_python(found.obj, self)
        return found

    def expr_Tuple(self, node: ast.Tuple):
        return Tup(tuple(self.expr(e) for e in node.elts))

    def expr_Attribute(self, node: ast.Attribute):
        base = self.expr(node.value)
        method = reductions.array_method(base, node.attr)   # a.sum(), a.max(), ...
        if method is not None:
            return method
        found = arrayviews.attribute(self, node, base, node.attr)   # a.reshape, a.real, ...
        if found is not None:
            return found
        if isinstance(base, Value) and isinstance(base.type, Array):
            if node.attr == "shape":
                return self.shape_of(base)
            if node.attr == "ndim":
                return PyConst(base.type.ndim)
            if node.attr == "size":
                size = PyConst(1)
                for extent in self.shape_of(base).items:
                    size = self.binary("mul", size, extent, node)
                return size
            raise self.error(node, f"arrays have no attribute '{node.attr}' in kernels",
                             "use .shape, .ndim, .size, .real, .imag, .reshape(), .view() "
                             "or .copy()")
        if isinstance(base, View):
            return self.view_attribute(base, node)
        if isinstance(base, Member):
            return enums.attribute(self, base, node.attr, node)
        if isinstance(base, Tup) and base.fields:
            item = base.field(node.attr)
            if item is None:
                raise self.error(node, f"the namedtuple has no field '{node.attr}'",
                                 f"its fields are {', '.join(base.fields)}")
            return item
        if isinstance(base, RecRef):
            found = composites.record_field(self, node, base, node.attr)
            if isinstance(found, tuple):
                return self.b.value(memory.Load, found[1], *found[2])
            return found
        if isinstance(base, Rec):
            if node.attr in ("shape", "ndim", "size"):
                return self.view_attribute(composites.records_view(self, base), node)
            return composites.field_of(node, base, node.attr)
        if isinstance(base, Obj):
            return self.resolver.attribute(base, node.attr, node, self)
        scalar = base.value if isinstance(base, Weak) else base
        integer = isinstance(scalar, PyConst) and type(scalar.value) is int or \
            isinstance(scalar, Value) and isinstance(scalar.type, Scalar) and scalar.type.is_int
        if node.attr in INT_METHODS and integer:   # x.bit_count()
            return Obj(BoundIntrinsic(INT_METHODS[node.attr], base))
        if isinstance(base, (PyConst, Weak)) or is_scalar_value(base):
            return complexes.attribute(self, base, node.attr, node)
        raise self.error(node, f"{describe(base)} has no attribute '{node.attr}'")

    def view_attribute(self, view: View, node: ast.Attribute):
        extents = Tup(tuple(axis[3] for axis in view.axes if axis[0] == "slice"))
        if node.attr == "shape":
            return extents
        if node.attr == "ndim":
            return PyConst(view.ndim)
        if node.attr == "size":
            size = PyConst(1)
            for extent in extents.items:
                size = self.binary("mul", size, extent, node)
            return size
        raise self.error(node, f"array views have no attribute '{node.attr}' in kernels",
                         "use .shape, .ndim, .size, .real, .imag, .reshape(), .view() or "
                         ".copy()")

    def shape_of(self, array: Value) -> Tup:
        if array.type.shape is not None:
            return Tup(tuple(PyConst(n) for n in array.type.shape))
        return Tup(tuple(self.b.value(memory.Dim, array, axis=a) for a in range(array.type.ndim)))

    def expr_BinOp(self, node: ast.BinOp):
        kind = AST_BINARY.get(type(node.op))
        if kind is None:
            raise self.error(node, f"unsupported operator {_syntax_name(node.op)}")
        left, right = self.expr(node.left), self.expr(node.right)
        if isinstance(left, Tup) or isinstance(right, Tup):
            if kind == "add" and isinstance(left, Tup) and isinstance(right, Tup):
                return Tup(left.items + right.items)
            raise self.error(node, "arithmetic on tuples", "operate on the elements")
        return self.binary(kind, self.scalar(left, node.left), self.scalar(right, node.right), node)

    def scalar(self, value, node):
        value = enums.plain(value)
        if isinstance(value, (PyConst, Weak)) or (isinstance(value, Value)
                                                 and isinstance(value.type, Scalar)):
            return value
        raise self.error(node, f"expected a number, found {describe(value)}")

    def expr_UnaryOp(self, node: ast.UnaryOp):
        operand = self.scalar(self.expr(node.operand), node)
        return self.unary(AST_UNARY[type(node.op)], operand, node)

    def expr_BoolOp(self, node: ast.BoolOp):
        kind = "and" if isinstance(node.op, ast.And) else "or"
        first = self.expr(node.values[0])
        if not _is_boolean(first):
            return self.operand_choice(kind, first, node)
        result = self.to_bool(first, node)
        for operand in node.values[1:]:
            result = self.short_circuit(kind, result,
                                        lambda o=operand: self.to_bool(self.expr(o), o), operand)
        return result

    def operand_choice(self, kind: str, left, node):
        """`a or b` / `a and b` on numbers: an operand, as Python gives (`x or 7.0` is x
        unless x is 0), the right one evaluated only when chosen."""
        for operand in node.values[1:]:
            cond = self.to_bool(self.scalar(left, node), node)
            if isinstance(cond, PyConst):
                if cond.value != (kind == "or"):
                    left = self.expr(operand)
                continue
            keep = (lambda kept=left: self.bind("$choice", lambda: kept))
            other = (lambda o=operand: self.bind("$choice", lambda: self.scalar(self.expr(o), o)))
            self.emit_if(cond, *((keep, other) if kind == "or" else (other, keep)),
                         {"$choice"}, node)
            left = self.env.pop("$choice")
        return left

    def short_circuit(self, kind: str, left, right_fn, node):
        """`left and right()` / `left or right()`, evaluating right only where it matters."""
        if isinstance(left, PyConst):
            if left.value == (kind == "or"):
                return left
            return right_fn()
        if self.is_simple(node):
            return self.binary(kind, left, self.to_bool(right_fn()), node)
        then_fn = (lambda: self.bind("$sc", lambda: self.to_bool(right_fn()))) \
            if kind == "and" else (lambda: self.bind("$sc", lambda: PyConst(True)))
        else_fn = (lambda: self.bind("$sc", lambda: PyConst(False))) if kind == "and" \
            else (lambda: self.bind("$sc", lambda: self.to_bool(right_fn())))
        self.emit_if(left, then_fn, else_fn, {"$sc"}, node)
        return self.env.pop("$sc")

    def bind(self, name: str, value_fn) -> None:
        """env[name] = value_fn(), in the environment as it is after the call (a nested if
        inside replaces self.env)."""
        value = value_fn()
        self.env[name] = value

    @staticmethod
    def is_simple(node) -> bool:
        """No loads or calls: cheap and safe to evaluate unconditionally."""
        if node is None:
            return False
        return not any(isinstance(n, (ast.Subscript, ast.Call)) for n in ast.walk(node))

    @classmethod
    def is_speculatable(cls, node) -> bool:
        """Simple, and no division or power: both arms can be computed and one selected. A
        guarded `1.0 / x if x != 0.0 else 0.0` stays an if: computed anyway, the untaken arm's
        infinite partial times its zero cotangent would make the derivative NaN."""
        return cls.is_simple(node) and not any(
            isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv, ast.Mod,
                                                           ast.Pow)) for n in ast.walk(node))

    def expr_Compare(self, node: ast.Compare):
        left = self.expr(node.left)
        result = None
        for op, comparator in zip(node.ops, node.comparators):
            predicate = AST_COMPARE.get(type(op))
            if predicate is None and not isinstance(op, (ast.Is, ast.IsNot)):
                raise self.error(node, f"unsupported comparison {_syntax_name(op)}",
                                 "compare numbers with < <= > >= == !=")
            right = self.expr(comparator)
            if predicate is None:   # is, is not: enum members (frontend/enums.py)
                this = enums.identity(self, left, right, node, _syntax_name(op))
                if isinstance(op, ast.IsNot):
                    this = self.unary("not", this, node)
            elif isinstance(left, Member) or isinstance(right, Member):
                this = self.compare(predicate, left, right, node)
            else:
                this = self.compare(predicate, self.scalar(left, node), self.scalar(right, node),
                                    node)
            result = this if result is None else self.binary("and", result, this, node)
            left = right
        return result

    def expr_IfExp(self, node: ast.IfExp):
        cond = self.to_bool(self.expr(node.test), node.test)
        if isinstance(cond, PyConst):
            return self.expr(node.body if cond.value else node.orelse)
        if self.is_speculatable(node.body) and self.is_speculatable(node.orelse):
            a, b = self.expr(node.body), self.expr(node.orelse)
            if isinstance(a, Tup) or isinstance(b, Tup):
                raise self.error(node, "conditional tuples", "use an if statement")
            if isinstance(a, Member) and isinstance(b, Member):
                chosen = enums.select(self, cond, a, b, node)
                if chosen is not None:
                    return chosen
            if not (holds_array(a) or holds_array(b)):   # arrays: a Choice, made by emit_if
                x, y, _, weak = self.unify_pair(a, b, node)
                value = self.b.value(arith.Select, cond, x, y)
                return Weak(value) if weak else value
        self.emit_if(cond, lambda: self.bind("$ifexp", lambda: self.expr(node.body)),
                     lambda: self.bind("$ifexp", lambda: self.expr(node.orelse)),
                     {"$ifexp"}, node)
        return self.env.pop("$ifexp")

    def expr_Subscript(self, node: ast.Subscript):
        base = self.expr(node.value)
        index = self.index_expr(node.slice)
        if isinstance(base, Tup):
            return self.tuple_item(base, index, node)
        if isinstance(base, Obj) and enums.is_enum_class(base.obj):
            return enums.class_item(self, base.obj, index, node)
        found = self.access(node, base, index)
        if isinstance(found, tuple):
            return self.b.value(memory.Load, found[1], *found[2])
        return found

    def index_expr(self, node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return Obj(node.value)     # a record's field name, r['x']: strings go nowhere else
        return self.expr(node)

    def expr_Slice(self, node: ast.Slice):
        return Obj(SliceArgs(*(None if part is None else self.expr(part)
                               for part in (node.lower, node.upper, node.step))))

    def subscript_target(self, node):
        """The array and indices a subscript or record field assignment writes."""
        found = self.store_target(node)
        if not isinstance(found, tuple):
            raise self.error(node, f"this is {describe(found)}, not one element",
                             "index one element: give an integer index per dimension")
        return found[1], found[2]

    def store_target(self, node):
        """What an assignment to a subscript or attribute writes: ("element", array,
        indices), a record (`a[i] = b[j]`) or a view (`r.j = src`, a field that is an
        array)."""
        if isinstance(node, ast.Attribute):
            base = self.expr(node.value)
            if isinstance(base, RecRef):
                return composites.record_field(self, node, base, node.attr)
            raise self.error(node, f"cannot assign to an attribute of {describe(base)}",
                             "assign to array elements or to fields of records, a[i].x = v")
        base = self.expr(node.value)
        if isinstance(base, Tup):
            raise self.error(node, "tuples cannot be changed", "build a new tuple instead")
        found = self.access(node, base, self.index_expr(node.slice))
        if isinstance(found, Value):
            raise self.error(node, f"cannot assign to {describe(found)} as a whole",
                             "assign its elements")
        return found

    def access(self, node, base, index):
        """`base[index]`: ("element", array, indices), or a view, record or field array."""
        if isinstance(base, Obj) and _constant_data(base.obj):
            # a module-level NumPy array is a constant, frozen at compile time (as numba does)
            base = intrinsics.constant_array(self, node, base.obj)
        found = composites.access(self, node, base, index)
        if found is None:
            hint = ("index arrays passed as arguments, or NumPy arrays of numbers defined at "
                    "module level" if isinstance(base, Obj) else "")
            raise self.error(node, f"cannot index {describe(base)}", hint)
        return found

    def tuple_item(self, base: Tup, index, node):
        if isinstance(index, PyConst) and isinstance(index.value, int):
            try:
                return base.items[index.value]
            except IndexError:
                raise self.error(node, f"tuple index {index.value} out of range "
                                       f"(the tuple has {len(base.items)} items)")
        if not base.items:
            raise self.error(node, "indexing an empty tuple")
        position = self.materialize(index, node=node)
        if not position.type.is_int:
            raise self.error(node, "tuple index must be an integer")
        raising.check_tuple_index(self, position, len(base.items))
        if position.type.is_signed:   # from the end, as Python counts negative indices
            negative = self.compare("lt", position, PyConst(0), node)
            position = self.b.value(arith.Select, negative,
                                    self.binary("add", position, PyConst(len(base.items))),
                                    position)
        if all(isinstance(item, Tup) and len(item.items) == len(base.items[0].items)
               for item in base.items):
            # a tuple of tuples at a run-time index: each column chosen at that index
            return Tup(tuple(self.tuple_item(Tup(tuple(item.items[j] for item in base.items)),
                                             position, node)
                             for j in range(len(base.items[0].items))), base.items[0].fields)
        result = base.items[-1]
        for k in range(len(base.items) - 2, -1, -1):
            hit = self.compare("eq", position, PyConst(k), node)
            a, b = base.items[k], result
            if isinstance(a, Tup) or isinstance(a, Obj):
                raise self.error(node, "run-time index into a tuple of non-numbers",
                                 "index with a constant")
            x, y, _, weak = self.unify_pair(a, b, node)
            value = self.b.value(arith.Select, hit, x, y)
            result = Weak(value) if weak else value
        return result

    def array_and_indices(self, node, base, index) -> tuple[Value, list[Value]]:
        """The array and indices of one element, `base[index]`."""
        found = self.access(node, base, index)
        if not isinstance(found, tuple):
            raise self.error(node, f"this is {describe(found)}, not one element",
                             "index one element: give an integer index per dimension")
        return found[1], found[2]

    def expr_Call(self, node: ast.Call):
        callee = self.expr(node.func)
        args = []
        for a in node.args:
            if not isinstance(a, ast.Starred):
                args.append(self.expr(a))
                continue
            spread = self.expr(a.value)   # f(*t): a tuple's items, known when lowering
            if not isinstance(spread, Tup):
                raise self.error(a, f"cannot spread {describe(spread)} into arguments",
                                 "spread a tuple with *, or pass the arguments one by one")
            args.extend(spread.items)
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords if k.arg is not None}
        if isinstance(callee, Obj) and isinstance(callee.obj, iteration.LoopItems):
            return callee.obj.item(self, args[0])
        return self.resolver.call(self, callee, args, kwargs, node)

    def expr_NamedExpr(self, node: ast.NamedExpr):
        value = self.expr(node.value)
        self.assign(node.target, value, node)
        return value


class RangeArgs:
    """The arguments of `range(...)` seen in a for loop."""

    def __init__(self, args: list, node):
        if not 1 <= len(args) <= 3:
            raise UserError(node, f"range takes 1 to 3 arguments, got {len(args)}")
        self.args = args

    def values(self, lw: Lowerer, node) -> tuple[Value, Value, Value]:
        args = self.args
        lower, upper, step = (PyConst(0), args[0], PyConst(1)) if len(args) == 1 else \
            (args[0], args[1], args[2] if len(args) == 3 else PyConst(1))
        for value in (lower, upper, step):
            if isinstance(value, (Tup, Obj)) or (isinstance(value, Value)
                                                 and not isinstance(value.type, Scalar)):
                raise UserError(node, f"range bound must be an integer, not {describe(value)}")
            if isinstance(value, PyConst) and not isinstance(value.value, int):
                raise UserError(node, "range bound must be an integer", "convert with int(...)")
        if isinstance(step, PyConst) and step.value == 0:
            raise UserError(node, "range step must not be zero")
        t = lw.join_all([lower, upper, step], node)
        if not t.is_int:
            raise UserError(node, f"range bounds must be integers, not {t}",
                            "convert with int(...)")
        if not t.is_signed and any(isinstance(v, PyConst) and v.value < 0
                                   for v in (lower, upper, step)):
            # range(n, 0, -1) with an unsigned n: count in i64, as Python's ints would; the
            # -1 converted to n's type would be a huge positive step
            t = T.i64
        return tuple(lw.cast(lw.materialize(v), t) if isinstance(v, Value) else
                     lw.materialize(v, t, node) for v in (lower, upper, step))


def _looks_like_gpu_array(obj) -> bool:
    """Whether `obj` looks like an array captured by reference (a CUDA array interface, or a
    device array kept in host memory where there is no GPU). The runtime decides what is
    captured (runtime/captured.py: the `captured` the frontend is given); this guess only lets
    an array it did not find be reported as such."""
    if getattr(type(obj), "zymo_by_reference", False):
        return True
    return not isinstance(obj, (np.ndarray, type)) and \
        hasattr(type(obj), "__cuda_array_interface__")


def _read_after(stmts: list[ast.stmt]) -> list[set[str]]:
    """For each statement, the names the statements after it may read before assigning them
    (live names; a loop variable the next loop rebinds is not)."""
    live: set[str] = set()
    out = []
    for stmt in reversed(stmts):
        out.append(set(live))
        live = _live_before(stmt, live)
    return out[::-1]


def _loads(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)} if node is not None else set()


def _live_in(stmts: list[ast.stmt], live: set[str]) -> set[str]:
    for stmt in reversed(stmts):
        live = _live_before(stmt, live)
    return live


def _live_before(stmt: ast.stmt, live: set[str]) -> set[str]:
    """Live names before `stmt`, given those live after it (a loop may run no time, so it
    kills nothing; its body's reads before its own assignments are live)."""
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        killed = {n.id for t in targets for n in ast.walk(t)
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        return (live - killed) | _loads(stmt.value) | set().union(*map(_loads, targets))
    if isinstance(stmt, (ast.For, ast.While)):
        live = live | _live_in(stmt.orelse, set(live))   # the else runs after the loop
    if isinstance(stmt, ast.For):
        return live | _loads(stmt.iter) | (_live_in(stmt.body, set()) - _loads_free(stmt))
    if isinstance(stmt, ast.While):
        return live | _loads(stmt.test) | _live_in(stmt.body, set())
    if isinstance(stmt, ast.If):
        return _loads(stmt.test) | _live_in(stmt.body, set(live)) | \
            _live_in(stmt.orelse, set(live))
    return live | _loads(stmt)


def _loads_free(loop: ast.For) -> set[str]:
    """The names a for statement binds before its body runs (its target)."""
    return {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}


def _constant_data(obj) -> bool:
    return (isinstance(obj, np.ndarray) and 1 <= obj.ndim <= 4 and
            (obj.dtype.kind in "biufc" and obj.dtype.itemsize in (1, 2, 4, 8, 16)
             or obj.dtype.names is not None))


def _is_boolean(value) -> bool:
    if isinstance(value, PyConst):
        return isinstance(value.value, bool)
    return isinstance(value, Value) and isinstance(value.type, Scalar) and value.type.is_bool


def _missing(value) -> bool:
    return value is None or isinstance(value, Undefined)


def _is_true(value) -> bool:
    return isinstance(value, PyConst) and value.value is True


def _is_false(value) -> bool:
    return value is None or (isinstance(value, PyConst) and value.value is False)


def _constant_of(value: Value):
    owner = getattr(value, "owner", None)
    if owner is not None and isinstance(owner, arith.Constant):
        return owner.value
    return None


def _syntax_name(node) -> str:
    name = type(node).__name__
    return _SYNTAX_NAMES.get(name, name)


_SYNTAX_NAMES = {
    "List": "list literal", "Dict": "dict literal", "Set": "set literal",
    "ListComp": "list comprehension", "DictComp": "dict comprehension",
    "SetComp": "set comprehension", "GeneratorExp": "generator expression",
    "Lambda": "lambda", "JoinedStr": "f-string", "Await": "await", "Yield": "yield",
    "YieldFrom": "yield from", "Starred": "starred expression", "Try": "try/except",
    "TryStar": "try/except*", "With": "with", "Raise": "raise", "Assert": "assert",
    "Global": "global", "Nonlocal": "nonlocal", "Delete": "del", "Import": "import",
    "ImportFrom": "import", "Match": "match", "ClassDef": "class definition",
    "FunctionDef": "nested function definition", "AsyncFunctionDef": "async function",
    "AsyncFor": "async for", "AsyncWith": "async with", "MatMult": "@",
    "Is": "is", "IsNot": "is not", "In": "in", "NotIn": "not in",
}


_STATEMENT_HINTS = {
    "FunctionDef": "define device functions at module level with @zm.func",
    "Lambda": "define device functions at module level with @zm.func",
    "ClassDef": "define classes outside kernels",
    "With": "kernels have no context managers",
    "Try": "kernels cannot catch exceptions; check conditions with if",
    "Assert": "kernels cannot assert; write an error flag into an output array",
    "Global": "module-level names are read-only constants in kernels",
    "Nonlocal": "kernels cannot rebind outer variables",
    "Delete": "kernel variables cannot be deleted",
    "Import": "import at module level",
    "ImportFrom": "import at module level",
    "Match": "use if/elif/else",
    "AsyncFunctionDef": "kernels are not coroutines",
}
_EXPRESSION_HINTS = {
    "List": "use a tuple, or zm.local.array for a per-thread array",
    "Dict": "kernels have no dictionaries",
    "Set": "kernels have no sets",
    "ListComp": "write a for loop over range(...)",
    "DictComp": "write a for loop",
    "SetComp": "write a for loop",
    "GeneratorExp": "write a for loop",
    "Lambda": "define a module-level @zm.func",
    "JoinedStr": "kernels have no strings",
    "Await": "kernels are not coroutines",
    "Yield": "kernels are not generators",
    "Starred": "unpack tuples into names instead",
}
