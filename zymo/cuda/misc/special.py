"""numba.misc.special: `literal_unroll`, the kernel language's (`zymo.literal_unroll`)."""
from ...lang import literal_unroll  # noqa: F401
