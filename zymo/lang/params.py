"""How a kernel parameter arrives: its kind and type, the signature a kernel is specialized on.

The frontend lowers a kernel for a tuple of these; the runtime computes them from launch
arguments (NumPy values, GPU arrays), so they live here, below both.
"""
from __future__ import annotations


class Param:
    """`kind` is "value" (a strong scalar), "weak" (a Python number, carried as f64/i64) or
    "array"; `type` is the IR type."""

    def __init__(self, kind: str, type):
        self.kind = kind
        self.type = type

    def key(self):
        return (self.kind, self.type)

    def __repr__(self) -> str:
        return f"{'weak ' if self.kind == 'weak' else ''}{self.type}"
