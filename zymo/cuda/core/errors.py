"""numba's error and warning classes, on zymo's.

- `TypingError` (and `NumbaError`, its base in numba) is zymo's `CompileError`: what a kernel
  that cannot compile raises, naming file:line:col and what to write instead.
- `NumbaPerformanceWarning` is zymo's `PerformanceWarning` (a GPU launch copying NumPy
  arguments, a grid too small to fill the GPU).
- The other numba classes are subclasses in numba's relations, for code that raises or
  filters them; zymo's compiler raises `CompileError` itself, not these subclasses.

`NumbaWarning` takes zymo's performance warnings as (virtual) subclasses: `issubclass`,
`warnings` filters and `pytest.warns(NumbaWarning)` see them; an `except NumbaWarning:`
around a warning turned into an error does not (Python's `except` ignores virtual classes).
"""
from __future__ import annotations

import abc

from ...diagnostics import CompileError, InternalError  # noqa: F401
from ...runtime.cuda.launch import PerformanceWarning

NumbaError = CompileError
TypingError = CompileError


class UnsupportedError(CompileError):
    """A feature the compiler does not support."""


class LoweringError(CompileError):
    """Code generation for a typed kernel failed."""


class CompilerError(CompileError):
    """The compiler failed on a kernel it accepted."""


class NumbaTypeError(CompileError, TypeError):
    """A typing failure that is also a TypeError."""


class NumbaValueError(CompileError, ValueError):
    """A typing failure that is also a ValueError."""


class NumbaAttributeError(CompileError, AttributeError):
    """A typing failure that is also an AttributeError."""


class NumbaNotImplementedError(CompileError, NotImplementedError):
    """A typing failure that is also a NotImplementedError."""


class NumbaWarning(Warning, metaclass=abc.ABCMeta):
    """Base of the warnings numba.cuda code filters."""


NumbaWarning.register(PerformanceWarning)
NumbaPerformanceWarning = PerformanceWarning


class NumbaDeprecationWarning(NumbaWarning, DeprecationWarning):
    """A feature that will go away."""


class NumbaPendingDeprecationWarning(NumbaWarning, PendingDeprecationWarning):
    """A feature that will be deprecated."""


class NumbaInvalidConfigWarning(NumbaWarning):
    """Options that contradict each other; one of them is ignored."""


class NumbaDebugInfoWarning(NumbaWarning):
    """Debug information cannot be what was asked for."""


class NumbaExperimentalFeatureWarning(NumbaWarning):
    """A feature whose behaviour may still change."""


class NumbaTypeSafetyWarning(NumbaWarning):
    """A conversion that may lose information."""


class NumbaSystemWarning(NumbaWarning):
    """Something about the system numba runs on."""


class NumbaPedanticWarning(NumbaWarning):
    """A warning for pedantic use."""


class NumbaIRAssumptionWarning(NumbaPedanticWarning):
    """An assumption about the IR did not hold."""
