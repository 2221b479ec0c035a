"""numba's `cudaimpl.lower(func, *argument types)`: records a lowering function (see
zymo/cuda/extending.py for what zymo does with it: nothing runs it)."""
from __future__ import annotations

from .extending import LOWERINGS


def lower(func, *argument_types):
    def decorate(implementation):
        LOWERINGS[(func, argument_types)] = implementation
        return implementation
    return decorate
