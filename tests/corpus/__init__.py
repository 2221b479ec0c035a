"""The kernel corpus: every case of every topic module, run on every backend by
tests/backend/test_corpus.py.

Importing this package defines the kernels (zm.kernel compiles lazily, at the first launch).
"""
from __future__ import annotations

from . import (
    apps,
    atomics,
    basics,
    control,
    math_kernels,
    memory,
    numba_compat,
    shared,
    tuples_funcs,
    warp,
)
from .case import Case

MODULES = (basics, control, memory, shared, atomics, warp, math_kernels, tuples_funcs,
           numba_compat, apps)

ALL_CASES: list[Case] = [case for module in MODULES for case in module.CASES]

__all__ = ["ALL_CASES", "MODULES", "Case"]
