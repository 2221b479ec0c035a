"""Automatic differentiation on the IR: activity analysis and the reverse transform."""
from .activities import (Active, Activity, BatchDuplicated, Const, Duplicated,  # noqa: F401
                         DuplicatedNoNeed, activity_of)
from .reverse import differentiate  # noqa: F401
