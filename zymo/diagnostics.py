"""Source locations, user diagnostics and the two error kinds: the user's and zymo's."""
from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True)
class Loc:
    """A position in a Python source file (line and column are 1-based)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


UNKNOWN = Loc("<unknown>", 0, 0)


@dataclass(frozen=True)
class Diagnostic:
    loc: Loc
    message: str
    hint: str = ""
    severity: str = "error"

    def format(self) -> str:
        lines = [f"{self.loc}: {self.severity}: {self.message}"]
        source = linecache.getline(self.loc.file, self.loc.line).rstrip("\n")
        if source:
            lines.append("    " + source)
            lines.append("    " + " " * max(self.loc.col - 1, 0) + "^")
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class CompileError(Exception):
    """The kernel cannot be compiled; every problem found is listed, each with its location."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = list(diagnostics)
        super().__init__(self._text())

    def _text(self) -> str:
        count = len(self.diagnostics)
        head = "" if count == 1 else f"{count} errors\n"
        return head + "\n\n".join(d.format() for d in self.diagnostics)

    def __reduce__(self):
        return (CompileError, (self.diagnostics,))


class InternalError(Exception):
    """A zymo bug: the message says so and, where it helps, names a file holding an IR dump."""

    def __init__(self, message: str, dump_path: str | None = None):
        self.dump_path = dump_path
        text = f"internal compiler error (this is a zymo bug, please report it): {message}"
        if dump_path:
            text += f"\nIR dump: {dump_path}"
        super().__init__(text)

    def __reduce__(self):
        return (InternalError, (self.args[0], self.dump_path))


class LaunchError(Exception):
    """A launch was malformed (configuration or arguments)."""


class KernelRuntimeError(Exception):
    """A kernel did something invalid while it ran; names the array, index and source line."""


class StepLimitError(KernelRuntimeError):
    """The interpreter stopped a launch that ran past the number of ops it was allowed."""


class RaceError(KernelRuntimeError):
    """Two threads touched one address between barriers, at least one of them writing.
    `ops`: the ids of the two accesses' ops (this one's, then the earlier one's), for tools
    that place a barrier between them."""

    ops: tuple[str, str] = ()


class WarpSyncError(KernelRuntimeError):
    """A warp-synchronous call (shuffle, vote) that CUDA leaves undefined: a caller missing from
    its own mask, a lane the mask names that does not make the call, members whose masks differ,
    or a shuffle reading a lane outside the mask."""


class BoundsError(KernelRuntimeError, IndexError):
    """An array index fell outside the array's shape."""
