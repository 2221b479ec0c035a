"""`for ... else` and `while ... else`, rewritten before lowering into a loop and an `if`:

    for target in it:            $nobreak = True
        ...break...        ->    for target in it:
    else:                            ...$nobreak = False; break...
        tail                     if $nobreak:
                                     tail

Only the breaks of the loop itself set the flag (a nested loop's breaks are its own, but a
break in a nested loop's `else` leaves this loop). A body without such a break runs `tail`
unconditionally after the loop. The tail sits after the loop, so its own break/continue
belong to the enclosing loop, as in Python.
"""
from __future__ import annotations

import ast
import copy


class _MarkBreaks(ast.NodeTransformer):
    """Puts `flag = False` before each break that leaves the loop being rewritten."""

    def __init__(self, flag: str):
        self.flag = flag
        self.found = False

    def visit_Break(self, node):
        self.found = True
        clear = ast.copy_location(
            ast.Assign(targets=[ast.Name(self.flag, ast.Store())], value=ast.Constant(False)),
            node)
        ast.fix_missing_locations(clear)
        return [clear, node]

    def _loop(self, node):
        # the nested loop's body breaks out of the nested loop; its else runs in ours
        node.orelse = self._statements(node.orelse)
        return node

    visit_For = visit_While = _loop

    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def _statements(self, stmts):
        out = []
        for stmt in stmts:
            new = self.visit(stmt)
            out.extend(new if isinstance(new, list) else [new])
        return out


def split_else(loop: ast.For | ast.While) -> list[ast.stmt]:
    """The statements that run `loop` (which has an `else`) without one."""
    flag = f"$nobreak{loop.lineno}_{loop.col_offset}"   # one per loop of the function
    bare = copy.copy(loop)
    marker = _MarkBreaks(flag)
    bare.body = marker._statements(copy.deepcopy(loop.body))
    bare.orelse = []
    if not marker.found:
        return [bare, *loop.orelse]
    start = ast.copy_location(
        ast.Assign(targets=[ast.Name(flag, ast.Store())], value=ast.Constant(True)), loop)
    test = ast.copy_location(ast.Name(flag, ast.Load()), loop)
    tail = ast.copy_location(ast.If(test=test, body=list(loop.orelse), orelse=[]),
                             loop.orelse[0])
    for made in (start, tail):
        ast.fix_missing_locations(made)
    return [start, bare, tail]
