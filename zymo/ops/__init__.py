"""Op definitions, one family per module; importing this package registers every op."""
from . import (  # noqa: F401
    arith, atomic, bits, cachehint, complex, control, foreign, math, memory, output, raising,
    sync, thread, views, warp,
)
from .registry import ALL_OPS, TABLES  # noqa: F401
