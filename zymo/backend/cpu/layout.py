"""Which thread axis the CPU runs innermost: the one along which the kernel's arrays are
contiguous.

Kernels written as `i, j = grid(2); out[i, j] = ...` index the last (contiguous) axis of
their arrays with `threadIdx.y`. The thread loop over x would then stride through memory
(and through pages); with x and y exchanged, the innermost loop walks contiguous memory.
Exchanging the axes only relabels threads, which is invisible unless warps are involved
(their lanes follow x), so kernels with warp ops keep x innermost.
"""
from __future__ import annotations

from ...ir.operation import Operation
from ...ir.traits import Barrier, Convergent, ReadsMemory, ThreadVarying, WritesMemory
from ...ir.types import Array
from ...ir.values import Value


def exchange_xy(func: Operation) -> bool:
    """Whether running threadIdx.y innermost reads and writes memory more contiguously."""
    if any(op.has_trait(Convergent) and not op.has_trait(Barrier) for op in func.walk()):
        return False
    axes = _thread_axes(func)
    along_x = along_y = 0
    for op in func.walk():
        if not (op.has_trait(ReadsMemory) or op.has_trait(WritesMemory)) or not op.operands:
            continue
        array = op.operands[0]      # accesses are (array, *indices, ...)
        if not isinstance(array.type, Array) or array.type.ndim < 2:
            continue
        indices = op.operands[1:1 + array.type.ndim]
        last, others = axes.get(indices[-1], set()), set().union(
            *(axes.get(v, set()) for v in indices[:-1]))
        if "x" in last:
            along_x += 1
        elif "y" in last and "x" in others:
            along_y += 1
    return along_y > along_x


def _thread_axes(func: Operation) -> dict[Value, set[str]]:
    """For each value, the thread axes it varies along (a forward approximation)."""
    axes: dict[Value, set[str]] = {}
    for op in func.walk():
        axis = getattr(op, "axis", None)   # thread registers name their axis
        if op.has_trait(ThreadVarying) and not op.operands and isinstance(axis, str):
            own = {axis}
        else:
            own = set().union(*(axes.get(v, set()) for v in op.operands))
        for result in op.results:
            axes[result] = own
        for region in op.regions:
            for arg in region.block.args:
                axes[arg] = own
    return axes


def multidimensional(func: Operation) -> bool:
    """Whether the kernel reads a thread or block index other than x (a 1-d kernel runs
    one row per block anyway)."""
    return any(getattr(op, "axis", None) in ("y", "z") for op in func.walk())
