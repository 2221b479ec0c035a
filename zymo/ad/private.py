"""Block-private shadows for arrays every thread reads (the weights of a dense layer).

A read whose address is the same in all threads accumulates its cotangent with a warp-level
reduction and one global atomic per warp (`atomic.accumulate`). Inside a loop over the weights
that is one contended atomic per warp and weight: 8192 warps adding into each of W's 1024
elements. Here each block instead keeps a copy of the shadow in shared memory (zeroed at the
start of the reverse sweep), accumulates into it (warp-aggregated, so one shared atomic per warp
and weight), and adds it into the global shadow once at the end: one atomic per block and
element. As in histogram privatization; Enzyme's shared-memory shadows do the same for arrays
that live in shared memory.

Applies to global arrays whose every differentiated read has a uniform address and that the
kernel never writes, of one element type, when their elements fit in `CAPACITY_BYTES` (checked
at launch: the sizes are the arguments' shapes).
"""
from __future__ import annotations

from ..ir.operation import Region
from ..ir.types import i32
from ..ir.values import BlockArgument, Value
from ..ops import arith, atomic, control, memory, sync

CAPACITY_BYTES = 16 * 1024


class Privatized:
    """The block-private copy of some shadows: one shared array, each shadow at an offset."""

    def __init__(self, arrays: list[Value], dtype):
        self.arrays, self.dtype = arrays, dtype
        self.capacity = CAPACITY_BYTES // (dtype.bits // 8)
        self.buffer: Value | None = None
        self.offsets: dict = {}        # primal array -> offset of its shadow in the buffer
        self.sizes: dict = {}          # primal array -> its element count


def plan(func, activity, read_modes: dict, writes: dict) -> Privatized | None:
    reads: dict = {}
    for op, mode in read_modes.items():
        reads.setdefault(op.array, []).append(mode)
    arrays = [a for a, modes in reads.items()
              if set(modes) == {"uniform"} and isinstance(a, BlockArgument)
              and a.block is func.body.block and a.type.space == "global"
              and activity.is_active_array(a) and a not in writes and "arguments" not in writes]
    dtypes = {a.type.dtype for a in arrays}
    if not arrays or len(dtypes) != 1 or dtypes.pop().bits not in (32, 64):
        return None
    return Privatized(arrays, arrays[0].type.dtype)


def budget(private: Privatized) -> tuple:
    """The launch condition: ((("dim", arg, axis), ...) per array, capacity in elements)."""
    shapes = tuple(tuple(("dim", a.index, k) for k in range(a.type.ndim))
                   for a in private.arrays)
    return (shapes, private.capacity)


class PrivateShadows:
    """Mixed into the reverse transform (needs its builder and emitter helpers)."""

    def _private_start(self) -> None:
        """The shared copy, zeroed by the block's threads, behind a barrier."""
        private = self.private
        with self.b.location(self.primal_func.loc):
            private.buffer = self.b.value(memory.SharedAlloc, shape=(private.capacity,),
                                          dtype=private.dtype)
            private.buffer.name_hint = "private"
            offset = self.const(0, i32)
            for array in private.arrays:
                size = self.const(1, i32)
                for k in range(array.type.ndim):
                    size = self.b.value(arith.Mul, size, self.cast(
                        self.b.value(memory.Dim, self.fwd[array], axis=k), i32))
                private.offsets[array], private.sizes[array] = offset, size
                offset = self.b.value(arith.Add, offset, size)
            self._private_loop(offset, lambda k: self.b.create(
                memory.Store, private.buffer, k, self.zero(private.dtype)))
            self.b.create(sync.Barrier)

    def _private_accumulate(self, array: Value, indices: list, ct: Value) -> None:
        private = self.private
        linear = self._linear_index(array, indices)
        self.b.create(atomic.Accumulate, private.buffer,
                      self.b.value(arith.Add, private.offsets[array], linear), ct)

    def _private_flush(self) -> None:
        """After every thread's reverse sweep: one global atomic per block and element."""
        private = self.private
        with self.b.location(self.primal_func.loc):
            self.b.create(sync.Barrier)
            for array in private.arrays:
                def flush(k, array=array):
                    value = self.b.value(memory.Load, private.buffer, self.b.value(
                        arith.Add, private.offsets[array], k))
                    indices, rest = [], k
                    for axis in reversed(range(1, array.type.ndim)):
                        extent = self.cast(self.b.value(memory.Dim, self.fwd[array],
                                                        axis=axis), i32)
                        indices.append(self.b.value(arith.Mod, rest, extent))
                        rest = self.b.value(arith.FloorDiv, rest, extent)
                    indices.append(rest)
                    self.b.create(atomic.AtomicAdd, self.shadows[array], *reversed(indices),
                                  value)
                self._private_loop(private.sizes[array], flush)

    def _linear_index(self, array: Value, indices: list) -> Value:
        linear = self.cast(indices[0], i32)
        for axis in range(1, array.type.ndim):
            extent = self.cast(self.b.value(memory.Dim, self.fwd[array], axis=axis), i32)
            linear = self.b.value(arith.Add, self.b.value(arith.Mul, linear, extent),
                                  self.cast(indices[axis], i32))
        return linear

    def _private_loop(self, count: Value, body) -> None:
        """for k in range(thread's linear index in the block, count, threads per block)."""
        start, stride = self._linear_thread()
        region = Region()
        k = region.block.add_arg(i32, "k")
        with self.b.at_end(region.block):
            body(k)
            self.b.create(control.Yield)
        self.b.create(control.For, start, count, stride, result_types=[], regions=[region])
