"""The reference interpreter (the oracle every backend is tested against) and race detector.

`run(module, grid, block, args)` runs a kernel's IR with NumPy over all threads of a launch.
"""
from .driver import Interpreter, run, settings  # noqa: F401
