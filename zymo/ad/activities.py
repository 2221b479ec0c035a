"""How a launch argument takes part in differentiation (Enzyme's vocabulary).

An argument without a wrapper is `Const`. Output shadows are seeded by the caller and consumed
(zeroed) by the reverse sweep; input shadows are accumulated into, never overwritten.
"""
from __future__ import annotations


class Activity:
    kind = ""

    def __repr__(self) -> str:
        fields = ", ".join(type(v).__name__ for v in self.values())
        return f"zm.{type(self).__name__}({fields})"

    def values(self) -> tuple:
        raise NotImplementedError


class Const(Activity):
    """Not differentiated: no derivative flows into or out of it."""

    kind = "const"

    def __init__(self, value):
        self.value = value

    def values(self):
        return (self.value,)


class Active(Activity):
    """A scalar passed by value whose adjoint (summed over all threads) the launch returns."""

    kind = "active"

    def __init__(self, value):
        self.value = value

    def values(self):
        return (self.value,)


class Duplicated(Activity):
    """An array and its shadow of the same shape: the shadow holds the output cotangent on
    entry (consumed) and receives the accumulated input adjoint."""

    kind = "dup"

    def __init__(self, value, shadow):
        self.value = value
        self.shadow = shadow

    def values(self):
        return (self.value, self.shadow)


class DuplicatedNoNeed(Duplicated):
    """As `Duplicated`, where the caller does not need the primal result afterwards."""

    kind = "dup_noneed"


class BatchDuplicated(Activity):
    """An array with W shadows (forward mode of width W)."""

    kind = "batch_dup"

    def __init__(self, value, shadows):
        self.value = value
        self.shadows = tuple(shadows)

    def values(self):
        return (self.value, *self.shadows)


def activity_of(arg) -> Activity:
    return arg if isinstance(arg, Activity) else Const(arg)
