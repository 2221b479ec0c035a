"""numba's extension API, as far as zymo can honour it.

numba lets a library teach its compiler a new type: how Python values of a class are typed
(`typeof_impl`), how the type is laid out (`register_model`, e.g. a `StructModel` of members),
which attributes read members (`make_attribute_wrapper`), and how calls are typed and lowered
to LLVM (`type_callable`, `cudaimpl.lower`). zymo records each registration and uses what it
can without numba's compiler: `typeof` gives a registered class's type, and a type with a
`StructModel` has the NumPy record dtype of its members (`dtype`, `as_dtype`). Lowering
functions are written against numba's LLVM builder, which zymo does not have: a kernel that
calls such a function is a compile error at its line (the frontend cannot call the class), and
the way out is a device function (`@cuda.jit(device=True)`) building the value.
"""
from __future__ import annotations

import numpy as np

from . import types

TYPEOF: dict = {}          # Python class -> fn(value, context) -> numba type
MODELS: dict = {}          # numba type class -> data model class
ATTRIBUTES: dict = {}      # numba type class -> {python attribute: member}
TYPERS: dict = {}          # Python callable -> typer factory
LOWERINGS: dict = {}       # (callable, argument types) -> lowering function


class _Registry:
    """`typeof_impl.register(cls)` as a decorator."""

    def __init__(self, table: dict):
        self.table = table

    def register(self, cls):
        def decorate(fn):
            self.table[cls] = fn
            return fn
        return decorate


typeof_impl = _Registry(TYPEOF)


def register_model(type_class):
    def decorate(model_class):
        MODELS[type_class] = model_class
        return model_class
    return decorate


def make_attribute_wrapper(type_class, struct_attr: str, python_attr: str) -> None:
    ATTRIBUTES.setdefault(type_class, {})[python_attr] = struct_attr


def type_callable(func):
    def decorate(typer_factory):
        TYPERS[func] = typer_factory
        return typer_factory
    return decorate


class StructModel:
    """numba's struct data model: named members of numba types, laid out in order."""

    def __init__(self, dmm, fe_type, members):
        self.fe_type = fe_type
        self._members = list(members)

    @property
    def members(self) -> list:
        return list(self._members)

    def dtype(self) -> np.dtype:
        """The NumPy record of the members (aligned as C lays out a struct)."""
        return np.dtype([(name, types.param_of(kind).type.dtype)
                         for name, kind in self._members], align=True)


class _CoreModels:
    StructModel = StructModel


core_models = models = _CoreModels()


def model_of(numba_type):
    """The data model registered for `numba_type`'s class, or None."""
    for klass in type(numba_type).__mro__:
        if klass in MODELS:
            return MODELS[klass](None, numba_type)
    return None


def typeof_registered(value):
    """The numba type a registered `typeof_impl` gives `value`, or None."""
    for klass in type(value).__mro__:
        if klass in TYPEOF:
            return TYPEOF[klass](value, None)
    return None
