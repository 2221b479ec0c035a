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
import numbers

from ...diagnostics import CompileError, InternalError, LaunchError  # noqa: F401
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


class LaunchDimensionsError(LaunchError, ValueError):
    """A grid or block of more than three dimensions (a ValueError, as numba raises)."""


class LaunchDimensionsTypeError(LaunchError, TypeError):
    """A grid or block dimension that is not an integer (a TypeError, as numba raises)."""


def normalize_kernel_dimensions(griddim, blockdim) -> tuple[tuple, tuple]:
    """numba's check of `kernel[griddim, blockdim]`: each an integer or a sequence of one to
    three integers; both as 3-tuples."""
    def check(dims, name):
        dims = list(dims) if isinstance(dims, (tuple, list)) else [dims]
        if len(dims) > 3:
            raise LaunchDimensionsError(f"{name} must be a sequence of 1, 2 or 3 integers, got "
                                        f"{dims!r}: fold the extra dimensions into three")
        if not all(isinstance(d, numbers.Integral) for d in dims):
            raise LaunchDimensionsTypeError(f"{name} must be a sequence of integers, got "
                                            f"{dims!r}: convert with int(...)")
        return tuple(dims) + (1,) * (3 - len(dims))
    return check(griddim, "griddim"), check(blockdim, "blockdim")
