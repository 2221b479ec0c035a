"""The source of a kernel or device function: its AST and the map back to file positions."""
from __future__ import annotations

import ast
import inspect
import linecache
import sys
import textwrap
import types
import weakref

from ..diagnostics import UNKNOWN, CompileError, Diagnostic, Loc


class Source:
    def __init__(self, pyfunc):
        self.pyfunc = pyfunc
        self.name = pyfunc.__name__
        lines, first_line = _source_lines(pyfunc)
        self.file = getattr(getattr(pyfunc, "__code__", None), "co_filename", "<unknown>")
        text = "".join(lines)
        dedented = textwrap.dedent(text)
        first = next((line for line in lines if line.strip()), "")
        self.col_shift = len(first) - len(first.lstrip()) - \
            (len(dedented.splitlines()[0]) - len(dedented.splitlines()[0].lstrip()))
        self.line_shift = first_line - 1
        tree = ast.parse(dedented)
        defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if not defs and self.name == "<lambda>":
            defs = _lambda_as_def(tree, pyfunc.__code__, self.line_shift, self.file)
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


# The lines of strings given to exec, by the code objects they define (zymo.cuda records them,
# since numba, which compiles bytecode, lets its users build kernels with exec); weak: a code
# object that is gone needs no source
EXEC_SOURCES: "weakref.WeakKeyDictionary[types.CodeType, list[str]]" = \
    weakref.WeakKeyDictionary()


def register_source(code: types.CodeType, text: str) -> None:
    """Remember `text` as the source of `code` and of every function it defines."""
    lines = text.splitlines(True)
    stack = [code]
    while stack:
        each = stack.pop()
        EXEC_SOURCES[each] = lines
        stack.extend(c for c in each.co_consts if isinstance(c, types.CodeType))


def _source_lines(pyfunc) -> tuple[list[str], int]:
    """The lines of `pyfunc`'s definition and the number of the first: from its file, from
    linecache (notebooks and IPython register their cells there), or, under `python -c`, from
    the command line."""
    code = getattr(pyfunc, "__code__", None)
    filename = getattr(code, "co_filename", "<unknown>")
    if filename == "<string>" and not linecache.getlines(filename) and \
            "-c" in getattr(sys, "orig_argv", ())[:-1]:
        command = sys.orig_argv[sys.orig_argv.index("-c") + 1]
        lines = command.splitlines(True)
        first = code.co_firstlineno
        # an exec string is "<string>" too: take the command only where the def is there
        if _defines(lines, first, code.co_name):
            linecache.cache[filename] = (len(command), None, lines, filename)
    recorded = EXEC_SOURCES.get(code) if code is not None else None
    if recorded is not None:
        first = code.co_firstlineno
        return inspect.getblock(recorded[first - 1:]), first
    try:
        return inspect.getsourcelines(pyfunc)
    except (OSError, TypeError):
        pass
    raise CompileError(Diagnostic(
        UNKNOWN, f"cannot read the source of {pyfunc.__qualname__}: it was defined in "
        f"{filename}, which is no file",
        "zymo compiles kernels from their source: define them in a file or a notebook cell, "
        "or, for a string given to exec, register it first: "
        "`linecache.cache[name] = (len(src), None, src.splitlines(True), name)` and "
        "`exec(compile(src, name, \"exec\"))`"))


def _lambda_as_def(tree: ast.AST, code, line_shift: int, file: str) -> list[ast.FunctionDef]:
    """The lambda `code` was made from, in its statement's `tree`, as `def` returning its body
    (numba's users give lambdas to cuda.reduce and call them in kernels)."""
    params = list(code.co_varnames[:code.co_argcount])
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
             and [a.arg for a in n.args.args] == params and n.lineno + line_shift ==
             code.co_firstlineno]
    if len(found) > 1:
        raise CompileError(Diagnostic(Loc(file, code.co_firstlineno, 1),
                                      "two lambdas with these parameters on one line",
                                      "give the one a kernel calls a name with def"))
    if not found:
        return []
    lam = found[0]
    body = ast.copy_location(ast.Return(value=lam.body), lam.body)
    fields = {"name": "lambda_", "args": lam.args, "body": [body], "decorator_list": [],
              "returns": None, "type_comment": None}
    if "type_params" in ast.FunctionDef._fields:
        fields["type_params"] = []
    return [ast.copy_location(ast.FunctionDef(**fields), lam)]


def _defines(lines: list[str], first: int, name: str) -> bool:
    """Whether `def name` starts at line `first` of `lines`, after its decorators."""
    for line in lines[first - 1:] if first > 0 else ():
        text = line.strip()
        if text.startswith("@") or not text:
            continue
        return text.startswith((f"def {name}(", f"async def {name}("))
    return False
