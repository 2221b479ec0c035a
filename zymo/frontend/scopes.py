"""Analysis before emission: which names a statement list assigns and whether it can leave
its block early (break, continue, return), so loops and ifs know their carried values."""
from __future__ import annotations

import ast

BREAK = "$break"
CONTINUE = "$continue"
RETURNED = "$returned"
RETVAL = "$retval"


def _targets(target: ast.AST, out: set[str]) -> None:
    if isinstance(target, ast.Name):
        out.add(target.id)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            _targets(element, out)
    elif isinstance(target, ast.Starred):
        _targets(target.value, out)


class _Assigned(ast.NodeVisitor):
    def __init__(self, loop_depth: int):
        self.names: set[str] = set()
        self.loop_depth = loop_depth

    def visit_Assign(self, node):
        for target in node.targets:
            _targets(target, self.names)

    def visit_AugAssign(self, node):
        _targets(node.target, self.names)

    def visit_AnnAssign(self, node):
        _targets(node.target, self.names)

    def visit_For(self, node):
        _targets(node.target, self.names)
        self._loop(node)

    def visit_While(self, node):
        self._loop(node)

    def _loop(self, node):
        self.loop_depth += 1
        for stmt in node.body:
            self.visit(stmt)
        self.loop_depth -= 1
        for stmt in node.orelse:   # a loop's else runs after it: its break leaves our loop
            self.visit(stmt)

    def visit_Break(self, node):
        if self.loop_depth == 0:
            self.names.add(BREAK)

    def visit_Continue(self, node):
        if self.loop_depth == 0:
            self.names.add(CONTINUE)

    def visit_Return(self, node):
        self.names.update((RETURNED, RETVAL))

    def visit_Raise(self, node):   # the raising thread returns (frontend/raising.py)
        self.names.add(RETURNED)

    def visit_FunctionDef(self, node):
        pass  # nested functions are rejected by the frontend

    def visit_Lambda(self, node):
        pass

    def visit_NamedExpr(self, node):
        _targets(node.target, self.names)


def assigned(stmts: list[ast.stmt]) -> set[str]:
    """Names (and exit flags) a statement list may assign, seen from its enclosing loop."""
    finder = _Assigned(loop_depth=0)
    for stmt in stmts:
        finder.visit(stmt)
    return finder.names


def exits(stmt: ast.stmt) -> set[str]:
    """The exit flags a statement may set: BREAK/CONTINUE (of the enclosing loop), RETURNED."""
    return assigned([stmt]) & {BREAK, CONTINUE, RETURNED}
