"""Per-thread state inside the CPU block function: slots, thread loops and their contexts.

A *slot* is `[nthreads x T]` on the block function's stack, allocated once at its entry; a
value live across thread loops is kept there, indexed by the linear thread id
`x + ntid.x * (y + ntid.y * z)`. A thread loop walks z, y, x with x innermost, so that
neighbouring threads' accesses are neighbouring addresses.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llvmlite import ir as ll

from ...ir.types import Array, Scalar, Type
from ...ir.values import Value
from ..llvm.context import LoweringContext
from ..llvm.control import loop_hint  # noqa: F401  (re-exported for the CPU kernel)
from ..llvm.types import I1, I32, I64

if TYPE_CHECKING:
    from .kernel import KernelBuilder

AXES = ("x", "y", "z")


@dataclass(frozen=True)
class Slot:
    """Per-thread storage of one value of IR type `type`."""

    ptr: ll.Value
    type: Type


def counted_loop(b: ll.IRBuilder, count: ll.Value, body: Callable[[ll.Value], None],
                 name: str, hint: ll.MDValue | None = None) -> None:
    """for (i = 0; i < count; i++) body(i), with `count` >= 0 and the builder left after;
    `hint` is loop metadata for the back edge."""
    odometer_loop(b, count, [], [], lambda index, digits: body(index), name, hint)


def odometer_loop(b: ll.IRBuilder, count: ll.Value, radices: list[ll.Value],
                  starts: list[ll.Value], body: Callable[[ll.Value, list[ll.Value]], None],
                  name: str, hint: ll.MDValue | None = None) -> None:
    """A counted loop that also counts in mixed radix: body(i, [d0, ..., dn]) with d0 in
    [0, radices[0]) the fastest digit and `starts` the digits at i = 0. Carrying digits
    from one iteration to the next spares a division per iteration."""
    before = b.block
    header = b.append_basic_block(f"{name}.header")
    block = b.append_basic_block(f"{name}.body")
    done = b.append_basic_block(f"{name}.exit")
    b.branch(header)
    b.position_at_end(header)
    index = b.phi(count.type)
    index.add_incoming(ll.Constant(count.type, 0), before)
    digits = [b.phi(start.type) for start in starts]
    for digit, start in zip(digits, starts):
        digit.add_incoming(start, before)
    b.cbranch(b.icmp_signed("<", index, count), block, done)
    b.position_at_end(block)
    body(index, list(digits))
    index.add_incoming(b.add(index, ll.Constant(count.type, 1), flags=("nuw", "nsw")), b.block)
    carry: ll.Value = ll.Constant(I1, 1)
    for position, digit in enumerate(digits):
        one = b.zext(carry, digit.type)
        bumped = b.add(digit, one)
        if position < len(radices):
            carry = b.icmp_unsigned("==", bumped, radices[position])
            bumped = b.select(carry, ll.Constant(digit.type, 0), bumped)
        digit.add_incoming(bumped, b.block)
    back = b.branch(header)
    if hint is not None:
        back.set_metadata("llvm.loop", hint)
    b.position_at_end(done)


class KernelContext(LoweringContext):
    """Lowering inside the block function: allocations go to its entry block, and the
    uniform values computed before the thread loops are visible everywhere."""

    def __init__(self, kernel: KernelBuilder, builder: ll.IRBuilder):
        super().__init__(kernel.lowering, kernel.function, builder, kernel.func)
        self.kernel = kernel
        self.implicit = dict(kernel.block_implicit)

    def value(self, v: Value) -> Any:
        found = self.values.get(v)
        if found is None:
            found = self.kernel.uniform_values.get(v)
        if found is None:
            raise self.internal(f"value {v!r} is not available in this thread loop")
        return found

    def entry_alloca(self, llvm_type: ll.Type, count: int | ll.Value = 1,
                     align: int | None = None) -> ll.Value:
        return self.kernel.entry_alloca(llvm_type, count, align)


class ThreadContext(KernelContext):
    """One thread's iteration of a thread loop: its ids, and its mask (None: every thread)."""

    def __init__(self, kernel: KernelBuilder, builder: ll.IRBuilder, tid: list[ll.Value],
                 linear: ll.Value, mask: Slot | None):
        super().__init__(kernel, builder)
        self.linear = linear
        self.mask = mask
        self.storing = True    # values other loops read go to their slots
        for axis, value in zip(AXES, tid):
            self.implicit[f"tid.{axis}"] = value
        user_linear = linear
        if kernel.exchange_xy:   # lanes follow the kernel's own x, not the loop's
            x, y, z = tid
            nx, ny = kernel.ntid[0], kernel.ntid[1]
            user_linear = builder.add(y, builder.mul(ny, builder.add(x, builder.mul(nx, z))))
        self.implicit["laneid"] = builder.and_(builder.trunc(user_linear, I32)
                                               if user_linear.type != I32 else user_linear,
                                               ll.Constant(I32, 31))

    def bind(self, v: Value, llvm_value: Any) -> None:
        self.values[v] = llvm_value
        if self.storing and v in self.kernel.plan.escaping:
            self.kernel.write(self.kernel.slot_of(v), self.linear, llvm_value)

    def lower_op(self, op) -> None:
        if not self.kernel.plan.is_hoisted(op):   # already computed once for the block
            super().lower_op(op)

    def local_array(self, t: Array) -> ll.Value:
        """Threads run one after another, so a local array used only inside its thread loop
        is one buffer for all; one that lives on (in a slot) gets one per thread."""
        element = self.memory_type(t.dtype)
        size = 1
        for extent in t.shape or ():
            size *= extent
        size = max(size, 1)
        if self.op is None or self.op.results[0] not in self.kernel.plan.escaping:
            return self.static_array(t, self.entry_alloca(element, size, align=16))
        buffer = self.kernel.entry_alloca(element, size, align=16, per_thread=True)
        offset = self.builder.mul(self.linear, ll.Constant(I64, size))
        mine = self.builder.gep(buffer, [offset], inbounds=True, source_etype=element)
        return self.static_array(t, mine)

    # ---- what the CPU warp ops read ------------------------------------------------------
    def lane_value(self, v: Value, linear: ll.Value) -> ll.Value:
        """Value `v` as thread `linear` of this block holds it."""
        uniform = self.kernel.uniform_values.get(v)
        if uniform is not None:
            return uniform
        return self.kernel.read(self.kernel.slot_of(v), linear)

    def lane_active(self, linear: ll.Value) -> ll.Value:
        return self.kernel.is_active(self.mask, linear)


def bool_or_memory(b: ll.IRBuilder, t: Type, value: ll.Value, to_memory: bool) -> ll.Value:
    """Bools are i1 in registers and i8 in slots."""
    if isinstance(t, Scalar) and t.is_bool:
        return b.zext(value, ll.IntType(8)) if to_memory else b.trunc(value, I1)
    return value
