"""The shared LLVM lowering: IR modules to llvmlite modules, target-neutral (see `target.py`)."""
from .context import LoweringContext  # noqa: F401
from .module import BoundsSite, ModuleLowering, lower_module  # noqa: F401
