"""The IR: types, values, operations with regions, builder, printer and verifier."""
from .builder import Builder  # noqa: F401
from .module import Module  # noqa: F401
from .operation import Block, Operation, Region  # noqa: F401
from .types import Array, FunctionType, Scalar, Type  # noqa: F401
from .values import BlockArgument, OpResult, Value  # noqa: F401
