"""What the complex functions give where a part of the argument is infinite or NaN (C99
Annex G), as selects on the classes of the two parts.

CPython's cmath (Modules/cmathmodule.c) looks these values up in one 7 x 7 table per function,
indexed by the class of each part: -inf, negative, -0, +0, positive, +inf, NaN. Within a
class the value of the part does not matter there, except in the cells a function computes
itself (exp, cosh, sinh, tanh and rect of an infinite part and a finite nonzero one: the
signs come from the cosine and sine of the finite part). So the tables are read off the
host's cmath once, one number standing for each class; where cmath raises instead (C returns
a value and flags a domain error) NumPy's function, which follows Annex G as well, gives it.
"""
from __future__ import annotations

import cmath
import math

import numpy as np

# one number of each class, in CPython's order
STANDS_FOR = (-math.inf, -1.5, -0.0, 0.0, 1.5, math.inf, math.nan)
NINF, NEG, NZERO, PZERO, POS, PINF, NAN = range(7)
FINITE = (NEG, NZERO, PZERO, POS)


def table(fn, fallback) -> dict[tuple[int, int], complex]:
    """fn(x, y) at each pair of classes with a part not finite; `fallback(x, y)` where fn
    raises ValueError."""
    cells = {}
    for i, x in enumerate(STANDS_FOR):
        for j, y in enumerate(STANDS_FOR):
            if i in FINITE and j in FINITE:
                continue
            try:
                value = fn(x, y)
            except ValueError:
                value = fallback(x, y)
            cells[i, j] = complex(value)
    return cells


def of_cmath(name: str, numpy_fn) -> dict[tuple[int, int], complex]:
    def at(fn):
        return lambda x, y: fn(complex(x, y))

    def numpy_at(x, y):
        with np.errstate(all="ignore"):
            return numpy_fn(np.complex128(complex(x, y)))

    return table(at(getattr(cmath, name)), numpy_at)


# an infinite or nonzero r with an infinite phi: no direction, so no sign (C's domain error)
RECT = table(cmath.rect, lambda r, phi: complex(math.inf if math.isinf(r) else math.nan,
                                                 math.nan))
TABLES = {name: of_cmath(name, fn) for name, fn in (
    ("sqrt", np.sqrt), ("log", np.log), ("exp", np.exp), ("cosh", np.cosh),
    ("sinh", np.sinh), ("tanh", np.tanh), ("acos", np.arccos), ("acosh", np.arccosh),
    ("asinh", np.arcsinh), ("atanh", np.arctanh))}
TABLES["rect"] = RECT

# the cells exp, cosh, sinh, tanh and rect compute from the finite part
INFINITE_BY_FINITE = frozenset((i, j) for i in (NINF, PINF) for j in (NEG, POS))


class Classes:
    """The class tests of one float value (`classes[NEG]`...), each built when first asked
    for, from tests of its sign, zeroness and finiteness shared between them."""

    def __init__(self, p, v):
        self.p, self.v, self.made = p, v, {}

    def __getitem__(self, k):
        if k not in self.made:
            self.made[k] = self._build(k)
        return self.made[k]

    def _build(self, k):
        p, v = self.p, self.v
        simple = {NAN: p.is_nan, "inf": p.is_inf, "finite": p.is_finite,
                  "zero": lambda v: p.eq(v, 0.0), "negative": p.sign_negative}
        if k in simple:
            return simple[k](v)
        if k == "positive":
            return p.not_(self["negative"])
        if k == "nonzero":
            return p.both(self["finite"], p.not_(self["zero"]))
        kind = {NINF: "inf", PINF: "inf", NZERO: "zero", PZERO: "zero"}.get(k, "nonzero")
        return p.both(self[kind], self["negative" if k in (NINF, NEG, NZERO) else "positive"])


def _key(value: float) -> str:
    return repr(value)   # tells -0.0 from 0.0, and a NaN from every number


def _chain(p, groups: dict, classes: Classes, make):
    """A select chain over `groups` (key -> the classes it holds): the largest group is the
    default, each other is chosen where the value is in one of its classes."""
    order = sorted(groups, key=lambda k: -len(groups[k]))
    result = make(order[0])
    for key in order[1:]:
        cond = None
        for k in groups[key]:
            cond = classes[k] if cond is None else p.any(cond, classes[k])
        result = p.select(cond, make(key), result)
    return result


def lookup(p, cells: dict, x, y, computed=frozenset()):
    """(re, im) of the table `cells` at the classes of `x` and `y`; only meaningful where
    one of them is not finite, and not in the `computed` cells."""
    cx, cy = Classes(p, x), Classes(p, y)
    parts = []
    for part in ("real", "imag"):
        rows: dict = {}   # a row's values, as keys, -> its x classes
        for i in range(7):
            row = tuple((j, _key(getattr(cells[i, j], part))) for j in range(7)
                        if (i, j) in cells and (i, j) not in computed)
            rows.setdefault(row, []).append(i)

        def make_row(row):
            groups: dict = {}
            for j, key in row:
                groups.setdefault(key, []).append(j)
            return _chain(p, groups, cy, lambda key: p.c(float(key)))

        parts.append(_chain(p, rows, cx, make_row))
    return tuple(parts)

