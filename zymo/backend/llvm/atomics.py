"""Atomics LLVM has no `atomicrmw` for, as compare-and-swap loops every target can run."""
from __future__ import annotations

from typing import Any

from llvmlite import ir as ll


def float_extremum(ctx: Any, which: str, ptr: ll.Value, value: ll.Value, ordering: str,
                   keep_nan: bool) -> ll.Value:
    """Atomic float min or max (`which`) as a compare-and-swap loop that stops as soon as
    memory already holds the result; returns the old value. A NaN operand is ignored, as
    `llvm.minnum` does; a NaN in memory is replaced (`np.fmin`) or, `keep_nan`, kept (numba's
    `atomic.min`/`max`)."""
    b = ctx.builder
    bits = {ll.HalfType(): 16, ll.FloatType(): 32, ll.DoubleType(): 64}[value.type]
    word_type = ll.IntType(bits)
    entry = b.block
    loop = b.append_basic_block(f"atomic.{which}.loop")
    swap = b.append_basic_block(f"atomic.{which}.swap")
    done = b.append_basic_block(f"atomic.{which}.done")
    first = b.load_atomic(ptr, ordering, bits // 8, typ=value.type)
    b.branch(loop)
    b.position_at_end(loop)
    old = b.phi(value.type)
    old.add_incoming(first, entry)
    new = ctx.call_intrinsic(f"llvm.{which}num", value.type, [old, value])
    if keep_nan:
        new = b.select(b.fcmp_unordered("uno", old, old), old, new)
    old_word, new_word = b.bitcast(old, word_type), b.bitcast(new, word_type)
    b.cbranch(b.icmp_unsigned("==", old_word, new_word), done, swap)
    b.position_at_end(swap)
    pair = b.cmpxchg(ptr, old_word, new_word, ordering, "monotonic")
    seen = b.bitcast(b.extract_value(pair, 0), value.type)
    old.add_incoming(seen, swap)
    b.cbranch(b.extract_value(pair, 1), done, loop)
    b.position_at_end(done)
    return old
