"""How a kernel parameter arrives: its kind and type, the signature a kernel is specialized on.

The frontend lowers a kernel for a tuple of these; the runtime computes them from launch
arguments (NumPy values, GPU arrays), so they live here, below both.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Records:
    """The `type` of a "record" Param: `ndim` dimensions of records (0 for one record),
    `scalar` for one record passed as a number is (a NumPy record, `a[0]` on the host: the
    kernel reads and writes it by name), `subshapes` each field's shape inside one record (()
    for a number, (3, 2) for a field `('j', 'f4', (3, 2))`), `dtype` the structured NumPy
    dtype (kernels are specialized per dtype, as numba's record types are: two dtypes of the
    same fields, one of them aligned, are two signatures)."""

    ndim: int
    scalar: bool = False
    subshapes: tuple = ()
    dtype: object = None


class Param:
    """`kind` is "value" (a strong scalar), "weak" (a Python number, carried as f64/i64),
    "array", or one of the composites a launch flattens into their leaves: "tuple" (a tuple or
    namedtuple: `items` are its elements' Params, `fields` a namedtuple's names) and "record"
    (an array of a structured dtype: `items` are its fields' strided arrays, `fields` their
    names), and "enum" (a member of a Python enum: `items` is its value's Param, `type` the
    enum class; a launch passes the value), and "chars" (an array of NumPy strings, `type`
    its dtype: `items` is the array of its characters, one axis more); `type` is the IR type
    (None for tuples and records)."""

    def __init__(self, kind: str, type, items: tuple = (), fields: tuple | None = None):
        self.kind = kind
        self.type = type
        self.items = tuple(items)
        self.fields = fields

    @property
    def is_composite(self) -> bool:
        return bool(self.kind in ("tuple", "record", "enum", "chars"))

    def key(self):
        if self.is_composite:
            return (self.kind, tuple(item.key() for item in self.items), self.fields,
                    self.type)
        return (self.kind, self.type)

    def leaves(self) -> list["Param"]:
        """The Params a launch passes for this one, in order."""
        if self.is_composite:
            return [leaf for item in self.items for leaf in item.leaves()]
        return [self]

    def rebuilt(self, leaves) -> "Param":
        """This Param's structure over the next of `leaves` (an iterator of Params)."""
        if self.is_composite:
            return Param(self.kind, self.type, tuple(item.rebuilt(leaves) for item in self.items),
                         self.fields)
        return next(leaves)

    def __repr__(self) -> str:
        if self.kind == "tuple":
            return f"tuple({', '.join(map(repr, self.items))})"
        if self.kind == "record":
            return "record(" + ", ".join(f"{n}: {i!r}" for n, i in zip(self.fields, self.items)) \
                + ")"
        if self.kind == "enum":
            return f"{self.type.__name__}({self.items[0]!r})"
        return f"{'weak ' if self.kind == 'weak' else ''}{self.type}"
