"""NVVM intrinsics for the NVPTX target's hooks: warp shuffles of any scalar width, votes, and
the compare-and-swap loops that stand in for atomics PTX lacks.

Every function takes the lowering context (`backend/llvm/context.py`) and emits at its
builder.
"""
from __future__ import annotations

from typing import Any

from llvmlite import ir as ll

from ..llvm import atomics
from ..llvm.types import I1, I32, I64

# `shfl.sync` mode per zymo mode, and its `c` operand: ((32 - width) << 8) | clamp, for a
# whole warp (width 32) the clamp lane is 31, except for `up`, which clamps at 0.
SHUFFLE_MODES = {"idx": "idx", "down": "down", "up": "up", "xor": "bfly"}
SHUFFLE_CLAMP = {"idx": 31, "down": 31, "up": 0, "xor": 31}

# Atomic ordering with CUDA's scope: relaxed, visible to the whole GPU (`atom.global.add`,
# as atomicAdd emits), not system-wide. llvmlite prints the ordering text verbatim.
DEVICE_RELAXED = 'syncscope("device") monotonic'


def call(ctx: Any, name: str, ret: ll.Type, args: list[ll.Value]) -> ll.Value:
    """Call the intrinsic `name`, declared once per module with the arguments' types."""
    return ctx.builder.call(ctx.lowering.declare(name, ret, [a.type for a in args]), args)


def shuffle(ctx: Any, mode: str, mask: ll.Value, value: ll.Value, lane: ll.Value) -> ll.Value:
    """`shfl.sync` of a value of any scalar type: 32-bit values directly, 64-bit values as two
    halves, narrower values widened to 32 bits."""
    b = ctx.builder
    value_type = value.type
    bits = _bits(value_type)
    if value_type == ll.FloatType() or value_type == I32:
        return _shuffle32(ctx, mode, mask, value, lane)
    word = value if isinstance(value_type, ll.IntType) else b.bitcast(value, ll.IntType(bits))
    if bits == 64:
        low = _shuffle32(ctx, mode, mask, b.trunc(word, I32), lane)
        high = _shuffle32(ctx, mode, mask, b.trunc(b.lshr(word, ll.Constant(I64, 32)), I32),
                          lane)
        joined = b.or_(b.zext(low, I64), b.shl(b.zext(high, I64), ll.Constant(I64, 32)))
    else:
        joined = b.trunc(_shuffle32(ctx, mode, mask, b.zext(word, I32), lane), word.type)
    return joined if joined.type == value_type else b.bitcast(joined, value_type)


def _shuffle32(ctx: Any, mode: str, mask: ll.Value, value: ll.Value,
               lane: ll.Value) -> ll.Value:
    suffix = "f32" if value.type == ll.FloatType() else "i32"
    clamp = ll.Constant(I32, SHUFFLE_CLAMP[mode])
    return call(ctx, f"llvm.nvvm.shfl.sync.{SHUFFLE_MODES[mode]}.{suffix}", value.type,
                [mask, value, lane, clamp])


def vote(ctx: Any, mode: str, mask: ll.Value, predicate: ll.Value) -> ll.Value:
    """`vote.sync.ballot` (an i32 mask) or `vote.sync.all` / `.any` (an i1)."""
    return call(ctx, f"llvm.nvvm.vote.{mode}.sync", I32 if mode == "ballot" else I1,
                [mask, predicate])


def barrier_vote(ctx: Any, mode: str, predicate: ll.Value) -> ll.Value:
    """`bar.red.<mode>` on barrier 0 (`__syncthreads_count`, `_and`, `_or`), as an i32."""
    ret = I32 if mode == "popc" else I1
    reduced = call(ctx, f"llvm.nvvm.barrier.cta.red.{mode}.aligned.all", ret,
                   [ll.Constant(I32, 0), predicate])
    return reduced if mode == "popc" else ctx.builder.zext(reduced, I32)


def match(ctx: Any, mode: str, mask: ll.Value, value: ll.Value) -> ll.Value | list[ll.Value]:
    """`match.any.sync` / `match.all.sync` (sm_70 and later) on the value's bits."""
    b = ctx.builder
    word = ll.IntType(_bits(value.type))
    if value.type != word:
        value = b.bitcast(value, word)
    suffix = f"i{word.width}"
    if mode == "any":
        return call(ctx, f"llvm.nvvm.match.any.sync.{suffix}", I32, [mask, value])
    pair = call(ctx, f"llvm.nvvm.match.all.sync.{suffix}p", ll.LiteralStructType([I32, I1]),
                [mask, value])
    return [b.extract_value(pair, 0), b.extract_value(pair, 1)]


def float_extremum(ctx: Any, which: str, ptr: ll.Value, value: ll.Value,
                   keep_nan: bool = False) -> ll.Value:
    """Atomic float min/max (PTX has none for f32/f64): the shared compare-and-swap loop
    with CUDA's device scope; NaNs as `atomics.float_extremum` says."""
    return atomics.float_extremum(ctx, which, ptr, value, DEVICE_RELAXED, keep_nan)


def vprintf(ctx: Any, format: ll.Value, args: list[ll.Value]) -> None:
    b = ctx.builder
    buffer = ll.Constant(ll.PointerType(), None)
    if args:
        record = ll.LiteralStructType([a.type for a in args])
        slot = ctx.entry_alloca(record, 1, align=8)
        for k, arg in enumerate(args):
            b.store(arg, b.gep(slot, [ll.Constant(I32, 0), ll.Constant(I32, k)]))
        buffer = b.addrspacecast(slot, ll.PointerType()) if slot.type.addrspace else slot
    fn = ctx.lowering.declare("vprintf", I32, [ll.PointerType(), ll.PointerType()])
    b.call(fn, [format, buffer])


GRID_FLIP = 0x80000000   # the top bit of the grid barrier's word flips once all blocks arrive


def grid_barrier(ctx: Any, barrier) -> None:
    """A barrier of all blocks of a cooperative launch: the block's threads meet (`barrier`),
    then thread 0 of each block adds to the barrier word of the workspace the driver gives
    a cooperative launch (address in %envreg2/%envreg1; {size, barrier} as two u32) and waits
    for the word's top bit to flip. Block 0 adds 2**31 - (blocks - 1), the others 1: the sum
    of one round is 2**31 whatever order they come in, so the word needs no reset. Fences on
    either side make the writes before the barrier seen after it, grid-wide."""
    b = ctx.builder
    barrier(ctx)
    sreg = {name: call(ctx, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])
            for name in ("tid.x", "tid.y", "tid.z", "ctaid.x", "ctaid.y", "ctaid.z",
                         "nctaid.x", "nctaid.y", "nctaid.z", "envreg1", "envreg2")}
    zero = ll.Constant(I32, 0)
    thread0 = b.icmp_unsigned("==", b.or_(b.or_(sreg["tid.x"], sreg["tid.y"]), sreg["tid.z"]),
                              zero)
    with b.if_then(thread0):
        i64 = ll.IntType(64)
        base = b.or_(b.shl(b.zext(sreg["envreg1"], i64), ll.Constant(i64, 32)),
                     b.zext(sreg["envreg2"], i64))
        with b.if_then(b.icmp_unsigned("==", base, ll.Constant(i64, 0)), likely=False):
            call(ctx, "llvm.trap", ll.VoidType(), [])   # not launched cooperatively
        word = b.inttoptr(b.add(base, ll.Constant(i64, 4)), ll.PointerType(addrspace=1))
        first = b.icmp_unsigned("==", b.or_(b.or_(sreg["ctaid.x"], sreg["ctaid.y"]),
                                            sreg["ctaid.z"]), zero)
        blocks = b.mul(b.mul(sreg["nctaid.x"], sreg["nctaid.y"]), sreg["nctaid.z"])
        lead = b.sub(ll.Constant(I32, GRID_FLIP), b.sub(blocks, ll.Constant(I32, 1)))
        b.fence("seq_cst", "device")
        old = b.atomic_rmw("add", word, b.select(first, lead, ll.Constant(I32, 1)),
                           DEVICE_RELAXED)
        wait = b.append_basic_block("grid.wait")
        done = b.append_basic_block("grid.done")
        b.branch(wait)
        b.position_at_end(wait)
        now = b.load_atomic(word, DEVICE_RELAXED, 4, typ=I32)
        flipped = b.and_(b.xor(old, now), ll.Constant(I32, GRID_FLIP))
        b.cbranch(b.icmp_unsigned("!=", flipped, zero), done, wait)
        b.position_at_end(done)
        b.fence("seq_cst", "device")
    barrier(ctx)


def _bits(t: ll.Type) -> int:
    if isinstance(t, ll.IntType):
        return t.width
    return {ll.HalfType(): 16, ll.FloatType(): 32, ll.DoubleType(): 64}[t]


FULL_MASK = 0xFFFFFFFF


def warp_aggregated_add(ctx: Any, ptr: ll.Value, value: ll.Value, laneid: ll.Value,
                        partial: bool = True, segmented: bool = True) -> None:
    """`*ptr += value` for every active lane, with fewer atomics where lanes share an address.
    The addresses are compared at run time, so the sum is right whatever they are.

    `segmented`: the lanes adding to one address (`match.any`) are summed by a segmented
    shuffle tree, and the run's lowest lane makes one atomic, where every run of same-address
    lanes is contiguous in the warp (a 16 x 16 block's warp holds two rows: two runs of 16).
    The tree is a suffix scan (offsets 1, 2, 4, 8, 16): lane l adds lane l + d's partial sum
    only when l + d is in its run, so a partial sum never crosses a run's end, and the run's
    first lane ends with the run's total. Inactive lanes are in no run. Where no two lanes
    share an address, or runs interleave, one atomic per lane.
    Without it, the tree only where every active lane adds to one address and the active
    lanes are the lowest ones (0 .. n - 1).

    `partial`: also in a warp not all of whose lanes are active (the last warp of a block
    whose size is not a multiple of 32; lanes a branch masked). Without it such a warp makes
    one atomic per lane, which a shared-memory float add (a compare-and-swap loop)
    serializes."""
    b = ctx.builder
    full = ll.Constant(I32, FULL_MASK)
    one = ll.Constant(I32, 1)
    zero_value = ll.Constant(value.type, 0.0)
    mask = call(ctx, "llvm.nvvm.activemask", I32, [])
    # a shared-memory address fits 32 bits: one shuffle to compare, not two
    address = b.ptrtoint(ptr, I32 if getattr(ptr.type, "addrspace", 0) == 3 else I64)
    members = mask if partial else full
    if segmented and partial:   # any active lanes: inactive ones are in no run
        eligible = None
    elif segmented or not partial:
        eligible = b.icmp_unsigned("==", mask, full)
    else:   # mask = 2**n - 1 (n = 32 included)
        eligible = b.icmp_unsigned("==", b.and_(mask, b.add(mask, one)), ll.Constant(I32, 0))

    def each_lane():
        b.atomic_rmw("fadd", ptr, value, DEVICE_RELAXED)

    def segmented_tree():
        peers = match(ctx, "any", members, address)
        first = call(ctx, "llvm.cttz.i32", I32, [peers, ll.Constant(I1, 0)])
        run = b.lshr(peers, first)
        contiguous = b.icmp_unsigned("==", b.and_(run, b.add(run, one)), ll.Constant(I32, 0))
        shared = b.icmp_unsigned("!=", run, one)
        worth = b.and_(vote(ctx, "all", members, contiguous), vote(ctx, "any", members, shared))
        with b.if_else(worth) as (tree, single):
            with tree:
                total = value
                for offset in (1, 2, 4, 8, 16):
                    moved = shuffle(ctx, "down", members, total, ll.Constant(I32, offset))
                    source = b.add(laneid, ll.Constant(I32, offset))
                    # bit `source` of peers; a shift by 32 or more would be poison
                    bit = b.and_(b.lshr(peers, b.and_(source, ll.Constant(I32, 31))), one)
                    inside = b.and_(b.icmp_unsigned("<", source, ll.Constant(I32, 32)),
                                    b.icmp_unsigned("!=", bit, ll.Constant(I32, 0)))
                    total = b.fadd(total, b.select(inside, moved, zero_value))
                with b.if_then(b.icmp_unsigned("==", laneid, first)):
                    b.atomic_rmw("fadd", ptr, total, DEVICE_RELAXED)
            with single:
                each_lane()

    def uniform_tree():
        leader = shuffle(ctx, "idx", members, address, ll.Constant(I32, 0))
        same = vote(ctx, "all", members, b.icmp_unsigned("==", address, leader))
        with b.if_else(same) as (uniform, scattered):
            with uniform:
                count = call(ctx, "llvm.ctpop.i32", I32, [mask]) if partial else None
                total = value
                for offset in (16, 8, 4, 2, 1):
                    moved = shuffle(ctx, "down", members, total, ll.Constant(I32, offset))
                    if partial:
                        source = b.add(laneid, ll.Constant(I32, offset))
                        moved = b.select(b.icmp_unsigned("<", source, count), moved,
                                         zero_value)
                    total = b.fadd(total, moved)
                with b.if_then(b.icmp_unsigned("==", laneid, ll.Constant(I32, 0))):
                    b.atomic_rmw("fadd", ptr, total, DEVICE_RELAXED)
            with scattered:
                each_lane()

    tree = segmented_tree if segmented else uniform_tree
    if eligible is None:
        return tree()
    with b.if_else(eligible) as (then, otherwise):
        with then:
            tree()
        with otherwise:
            each_lane()


def tile_add(ctx: Any, value: ll.Value, element: Any, lane: ll.Value, index: ll.Value,
             warp: ll.Value, slot: ll.Value, flush: ll.Value) -> None:
    """One iteration of `atomic.accumulate_in_tile` for a warp whose 32 lanes all run it:
    the value summed with lane r ^ 16's into row `slot`, column r % 16 of the warp's rows of
    the tile (lanes r and r + 16 store the same sum), the index into `keys`; at a flush, after
    `bar.warp.sync`, lane r (r <= slot) adds up row r and makes its iteration's atomic, and a
    second `bar.warp.sync` keeps the next chunk's stores after every lane's reads."""
    from ...ops.atomic import TILE_COLUMNS, TILE_STRIDE
    b = ctx.builder
    full = ll.Constant(I32, FULL_MASK)
    const = lambda n: ll.Constant(I32, n)   # noqa: E731
    pair = b.fadd(value, shuffle(ctx, "xor", full, value, const(16)))
    rows = b.mul(warp, const(32))
    base = b.mul(rows, const(TILE_STRIDE))
    column = b.and_(lane, const(TILE_COLUMNS - 1))
    b.store(pair, element("tile", b.add(b.add(base, b.mul(slot, const(TILE_STRIDE))), column)))
    b.store(index, element("keys", b.add(rows, slot)))
    with b.if_then(flush):
        call(ctx, "llvm.nvvm.bar.warp.sync", ll.VoidType(), [full])
        with b.if_then(b.icmp_unsigned("<=", lane, slot)):
            row = b.add(base, b.mul(lane, const(TILE_STRIDE)))
            total = b.load(element("tile", row), typ=value.type)
            for m in range(1, TILE_COLUMNS):
                total = b.fadd(total, b.load(element("tile", b.add(row, const(m))),
                                             typ=value.type))
            key = b.load(element("keys", b.add(rows, lane)), typ=I32)
            b.atomic_rmw("fadd", element("array", key), total, DEVICE_RELAXED)
        call(ctx, "llvm.nvvm.bar.warp.sync", ll.VoidType(), [full])


# Inline-assembly register constraints of a cache-hinted access per element width: PTX has no
# 8-bit registers, and `ld.b8` / `st.b8` may use a wider one (the low byte is what moves).
HINT_REGISTERS = {8: ("r", 32), 16: ("h", 16), 32: ("r", 32), 64: ("l", 64)}


def cached_load(ctx: Any, element: ll.Type, ptr: ll.Value, hint: str) -> ll.Value:
    """`ld.global.<hint>.b<bits>` of the element at `ptr` (an integer or float of 8 to 64
    bits), moved as raw bits as numba's cache-hint intrinsics do. The memory clobber keeps the
    load after this thread's earlier stores (LLVM cannot see the asm read memory)."""
    b = ctx.builder
    bits = _bits(element)
    constraint, width = HINT_REGISTERS[bits]
    asm = ll.InlineAsm(ll.FunctionType(ll.IntType(width), [ptr.type]),
                       f"ld.global.{hint}.b{bits} $0, [$1];", f"={constraint},l,~{{memory}}",
                       side_effect=True)
    word = b.call(asm, [ptr])
    if width != bits:
        word = b.trunc(word, ll.IntType(bits))
    return word if isinstance(element, ll.IntType) else b.bitcast(word, element)


def cached_store(ctx: Any, ptr: ll.Value, value: ll.Value, hint: str) -> None:
    """`st.global.<hint>.b<bits> [ptr], value`, the counterpart of `cached_load`."""
    b = ctx.builder
    bits = _bits(value.type)
    constraint, width = HINT_REGISTERS[bits]
    word = value if isinstance(value.type, ll.IntType) else b.bitcast(value, ll.IntType(bits))
    if width != bits:
        word = b.zext(word, ll.IntType(width))
    asm = ll.InlineAsm(ll.FunctionType(ll.VoidType(), [ptr.type, word.type]),
                       f"st.global.{hint}.b{bits} [$0], $1;", f"l,{constraint},~{{memory}}",
                       side_effect=True)
    b.call(asm, [ptr, word])
