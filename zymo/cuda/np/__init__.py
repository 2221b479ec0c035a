"""numba's `numba.np` names code for numba.cuda imports: `numpy_support`."""
from . import numpy_support  # noqa: F401
