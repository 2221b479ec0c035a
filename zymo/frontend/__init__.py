"""Python AST -> typed IR, with source-located diagnostics."""
from .driver import Param, lower_kernel, param_of_value, result_types  # noqa: F401
