"""The source of a kernel or device function: its AST and the map back to file positions."""
from __future__ import annotations

import ast
import inspect
import textwrap

from ..diagnostics import UNKNOWN, CompileError, Diagnostic, Loc


class Source:
    def __init__(self, pyfunc):
        self.pyfunc = pyfunc
        self.name = pyfunc.__name__
        try:
            lines, first_line = inspect.getsourcelines(pyfunc)
            self.file = inspect.getsourcefile(pyfunc) or "<unknown>"
        except (OSError, TypeError):
            raise CompileError(Diagnostic(
                UNKNOWN, f"cannot read the source of {pyfunc.__qualname__}",
                "define kernels in a file (not in an interactive prompt or exec string)"))
        text = "".join(lines)
        dedented = textwrap.dedent(text)
        first = next((line for line in lines if line.strip()), "")
        self.col_shift = len(first) - len(first.lstrip()) - \
            (len(dedented.splitlines()[0]) - len(dedented.splitlines()[0].lstrip()))
        self.line_shift = first_line - 1
        tree = ast.parse(dedented)
        defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if not defs:
            raise CompileError(Diagnostic(Loc(self.file, first_line, 1),
                                          f"{pyfunc.__qualname__} is not a def function",
                                          "kernels must be functions written with def"))
        self.tree: ast.FunctionDef = defs[0]  # type: ignore[assignment]
        self.loc_of_def = self.loc(self.tree)

    def loc(self, node: ast.AST | None) -> Loc:
        if node is None or not hasattr(node, "lineno"):
            return Loc(self.file, self.line_shift + 1, 1)
        return Loc(self.file, node.lineno + self.line_shift, node.col_offset + 1 + self.col_shift)
