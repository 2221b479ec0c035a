"""Automatic differentiation on the IR: activity analysis, the forward and reverse transforms."""
from .activities import (Active, Activity, BatchDuplicated, Const, Duplicated,  # noqa: F401
                         DuplicatedNoNeed, activity_of)
from .reverse import derivation_switches, differentiate  # noqa: F401
from .expand import expand_derivative_calls  # noqa: F401
from .forward import tangent_module  # noqa: F401
