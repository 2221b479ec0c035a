"""numba.cuda's library modules for zymo kernels (random, reduce, vectorize)."""
from . import random  # noqa: F401
from .reduction import Reduce, reduce  # noqa: F401
from .vectorize import guvectorize, vectorize  # noqa: F401
