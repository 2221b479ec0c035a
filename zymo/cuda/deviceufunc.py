"""numba's `deviceufunc.GUFuncEngine`: the schedule of a generalized ufunc call (core shapes,
loop dimensions, broadcast inputs) that zymo's `guvectorize` runs by (cuda/vectorize.py)."""
from __future__ import annotations

from .vectorize import Schedule, _parse_layout, schedule


class GUFuncEngine:
    def __init__(self, inputsig, outputsig):
        self.sin, self.sout = list(inputsig), list(outputsig)

    @classmethod
    def from_signature(cls, signature: str) -> "GUFuncEngine":
        """From a layout such as "(m, n), (n, p) -> (m, p)"."""
        return cls(*_parse_layout(signature))

    def schedule(self, ishapes) -> Schedule:
        return schedule(self.sin, self.sout, [tuple(s) for s in ishapes])
