"""Op definitions, one family per module; importing this package registers every op."""
from . import arith, atomic, bits, control, math, memory, output, sync, thread, warp  # noqa: F401
from .registry import ALL_OPS, TABLES  # noqa: F401
