"""Which array arguments of a kernel the backends may declare `noalias`.

LLVM reads `noalias` on a parameter as a promise about the whole execution of the function:
the memory reached through the pointer is reached through no other pointer, and LLVM knows no
other threads. A call that is not given the pointer (a barrier), a fence and an atomic on
another array are then taken not to touch that memory: a store before a barrier whose only
reader is another thread looks dead and is deleted, a load after it is served from a value
loaded before it. The promise holds for an array only when no element one thread accesses is
accessed by another thread while the kernel runs:

- the kernel never writes the array (reads by many threads commute); or
- every access is a plain load or store of the array itself (not through a view: `a.real`,
  `a.reshape(...)`) whose index tuple maps distinct threads to distinct
  elements (`IndexForms.ownership`, with no launch condition beyond one thread along the axes
  the index does not use), through the same thread-varying index form at every access, so that
  each element belongs to one thread for the whole kernel.

Atomics, calls and anything else that takes the array keep it shared. Both cases also need that
no other argument overlaps the array, and the second that the launch has a single thread
(grid and block) along `PrivateArrays.single`: the launch checks both and otherwise runs a build
without the attribute.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import Module
from ..ir.operation import Operation
from ..ir.traits import Aliases, Atomic, Extent, ReadsMemory, WritesMemory
from ..ir.types import Array
from ..ir.values import BlockArgument
from ..ops.views import array_origin
from .indexing import IndexForms, Uniform

ATTR = "private_arrays"


@dataclass(frozen=True)
class PrivateArrays:
    """The argument positions that may be `noalias`, and the axes along which the launch must
    have one thread for that to hold."""

    arguments: frozenset = frozenset()
    single: frozenset = frozenset()
    written: frozenset = frozenset()    # positions of the array arguments the kernel may write

    def holds(self, grid, block) -> bool:
        return all(grid[k] == 1 and block[k] == 1 for k, axis in enumerate("xyz")
                   if axis in self.single)

    def overlap_pairs(self, arrays: list[int]) -> tuple[tuple[int, int], ...]:
        """The pairs of array arguments (positions among `arrays`) whose overlap would break
        a promise: one of them is `noalias` and one of them is written."""
        pairs = []
        for a_index, a in enumerate(arrays):
            for b in arrays[a_index + 1:]:
                if (a in self.arguments or b in self.arguments) and \
                        (a in self.written or b in self.written):
                    pairs.append((a, b))
        return tuple(pairs)


class AnnotatePrivateArrays:
    """Record `private_arrays(kernel)` in the kernel's attributes (the backends read it). An
    analysis: the IR does not change. Verified IR in, verified IR out."""

    name = "private-arrays"

    def run(self, module: Module) -> bool:
        kernel = module.kernel
        kernel.attrs[ATTR] = private_arrays(kernel)
        return False


def private_arrays(func: Operation) -> PrivateArrays:
    params = [a for a in func.regions[0].block.args if isinstance(a.type, Array)]
    uses: dict[BlockArgument, list[Operation]] = {a: [] for a in params}
    for op in func.walk():
        if op.has_trait(Aliases):
            continue    # a view accesses nothing; the accesses through it count below
        for value in op.operands:
            origin = array_origin(value)
            if origin in uses and op not in uses[origin]:
                uses[origin].append(op)
    forms = IndexForms(func)
    arguments, single, written = set(), set(), set()
    for param in params:
        accesses = [op for op in uses[param] if not op.has_trait(Extent)]
        if any(_may_write(op, param) for op in accesses):
            written.add(param.index)
        else:
            arguments.add(param.index)
            continue
        axes = _owned_axes(accesses, param, forms)
        if axes is not None:
            arguments.add(param.index)
            single |= set("xyz") - axes
    return PrivateArrays(frozenset(arguments), frozenset(single), frozenset(written))


def _may_write(op: Operation, array: BlockArgument) -> bool:
    """Whether `op` may write through `array` or a view of it: a store or atomic into it, or
    any op that is neither a plain read of it nor an extent (a call, a region yielding it)."""
    if op.has_trait(WritesMemory) or op.has_trait(Atomic):
        return True
    return not (op.has_trait(ReadsMemory) and array_origin(op.operands[0]) is array
                and all(array_origin(v) is not array for v in op.operands[1:]))


def _owned_axes(accesses: list[Operation], array: BlockArgument,
                forms: IndexForms) -> frozenset | None:
    """The thread axes through which every access reaches elements of its own thread, with one
    element->thread map for all of them (the same thread-varying form at each position; a
    uniform position selects among a thread's elements); None when that is not provable."""
    signature = None
    axes = None
    for op in accesses:
        if op.has_trait(Atomic) or op.operands[0] is not array:
            return None
        indices = list(getattr(op, "indices", ()))
        if array in indices or len(indices) != array.type.ndim:
            return None
        owned = forms.ownership(indices, array.type.space)
        if owned is None or owned.wraps:
            return None
        shape = tuple(None if isinstance(forms.form(i), Uniform) else forms.form(i)
                      for i in indices)
        if signature is None:
            signature, axes = shape, owned.axes
        elif shape != signature:
            return None
    return axes if axes is not None else frozenset()

