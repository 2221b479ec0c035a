"""Base classes shared by op families: the typed `Op` and the common op shapes."""
from __future__ import annotations

from ..ir.operation import Operation, attr, operand, result
from ..ir.traits import Pure, Speculatable
from ..ir.types import Scalar, Type
from .mutations import mutable
from .registry import ALL_OPS, TYPING, typing_rule


class Op(Operation):
    """An op whose result types follow from its typing rule."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            ALL_OPS.append(cls)

    @classmethod
    def infer_types(cls, operand_types: list[Type], attrs: dict) -> list[Type]:
        return list(TYPING[cls](operand_types, attrs))

    def verify_(self) -> list[str]:
        try:
            expected = self.infer_types([v.type for v in self.operands], self.attrs)
        except TypeError as error:
            return [str(error)]
        actual = [r.type for r in self.results]
        if expected != actual:
            shown = ", ".join(map(str, expected))
            return [f"result types ({', '.join(map(str, actual))}) should be ({shown})"]
        return []


# Evolution may edit any op anywhere unless its stanza narrows the rule (ops/mutations.py).
mutable(Op)


def same_type(*types: Type) -> Type:
    first = types[0]
    for other in types[1:]:
        if other != first:
            raise TypeError(f"operand types differ: {', '.join(map(str, types))}")
    return first


def require(condition: bool, message: str) -> None:
    if not condition:
        raise TypeError(message)


def scalar(t: Type, what: str = "operand") -> Scalar:
    require(isinstance(t, Scalar), f"{what} must be a scalar, not {t}")
    assert isinstance(t, Scalar)
    return t


class Unary(Op):
    traits = (Pure, Speculatable)
    x = operand()
    result = result()


class Binary(Op):
    traits = (Pure, Speculatable)
    lhs = operand()
    rhs = operand()
    result = result()


def _unary_same(types, attrs):
    return [scalar(types[0])]


def _binary_same(types, attrs):
    return [scalar(same_type(*types))]


typing_rule(Unary, _unary_same)
typing_rule(Binary, _binary_same)


class Nullary(Op):
    """An op without operands whose single result type is fixed by its class or attributes."""

    result = result()
    type = attr(required=False)
