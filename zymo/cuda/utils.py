"""numba.cuda's `utils` names that code written for numba.cuda imports.

`PYVERSION`: the running Python's (major, minor), which numba code compares against to pick
what a Python version's bytecode looks like (`zymo.cuda.core.bytecode` does the same).
"""
import sys

PYVERSION = sys.version_info[:2]
