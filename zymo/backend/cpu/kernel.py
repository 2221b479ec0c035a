"""The CPU form of a kernel: a block function running the threads of a block, and the
entry point the runtime calls for a range of work units (blocks, or block rows).

    void zymo_entry(i64* args, i64 first_unit, i64 end_unit, i64* errors)

`args` holds (grid x, y, z, block x, y, z) and then the parameters, packed in 8-byte words
(a scalar in one word; an array as data pointer, shape and strides; see `args.py`). The
block function takes the parameters expanded (array data pointers `noalias`), the block's
geometry and the error buffer; its body follows the phase plan (`phases.py`): uniform
values first, then thread loops and block-mode ops.
"""
from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir as ll

from ...ir.operation import Block, Operation, Region
from ...ir.traits import Terminator
from ...ir.types import Array, Type
from ...ir.values import Value
from ...ops.registry import LOWER
from ..llvm.module import ModuleLowering
from ..llvm.types import I1, I32, I64, PTR, VOID
from .args import LAUNCH_WORDS
from .blockmode import BlockContext
from .layout import exchange_xy, multidimensional
from .phases import Plan, Run
from .threads import (
    AXES,
    KernelContext,
    Slot,
    ThreadContext,
    bool_or_memory,
    counted_loop,
    loop_hint,
    odometer_loop,
)

ENTRY = "zymo_entry"
BLOCK_GEOMETRY = [f"{register}.{axis}" for register in ("ctaid", "nctaid", "ntid")
                  for axis in AXES]


class KernelBuilder:
    """Builds the block function of one kernel, then its entry point.

    When the threads of a multi-dimensional kernel are independent (no barrier, warp op or
    shared memory: `Plan.independent_threads`), the function runs one row (fixed y and z)
    of consecutive blocks instead of whole blocks, and the entry point walks the grid row
    by row: a 2-d launch then streams through row-major arrays as a plain loop nest would,
    instead of hopping between tiles (and pages)."""

    def __init__(self, lowering: ModuleLowering, func: Operation):
        self.lowering = lowering
        self.func = func
        self.plan = Plan(func)
        self.by_rows = self.plan.independent_threads and multidimensional(func)
        self.exchange_xy = exchange_xy(func)   # thread y innermost (see layout.py)
        extra = [(name, I32) for name in BLOCK_GEOMETRY] + [("dynsmem", I32), ("errbuf", PTR)]
        if self.by_rows:   # ctaid.x is then the first of `blocks` consecutive blocks
            extra += [("tid.y", I32), ("tid.z", I32), ("blocks", I32)]
        self.function = lowering.kernel_function(
            func, f"zymo.block.{func.attrs['sym_name']}", extra)
        self.function.linkage = "internal"
        hidden = self.function.args[len(self.function.args) - len(extra):]
        self.block_implicit = {name: arg for (name, _), arg in zip(extra, hidden)}
        entry = self.function.append_basic_block("entry")
        self.builder = ll.IRBuilder(entry)
        self.ntid = [self.block_implicit[f"ntid.{axis}"] for axis in AXES]
        wide = [self.builder.zext(n, I64) for n in self.ntid]
        self.nthreads = self.builder.mul(self.builder.mul(wide[0], wide[1]), wide[2])
        body = self.function.append_basic_block("prologue")
        jump = self.builder.branch(body)
        self._allocas = ll.IRBuilder(entry)
        self._allocas.position_before(jump)
        self.builder.position_at_end(body)
        self.slots: dict[Value, Slot] = {}
        self._dynamic: ll.Value | None = None
        self.uniform_values: dict[Value, ll.Value] = {}
        # Loops over threads are never unrolled: unrolling them buys little and costs
        # compile time (user loops inside kernels keep LLVM's defaults).
        self.no_unroll = loop_hint(lowering.llvm, "llvm.loop.unroll.disable")

    # ---- the block function -------------------------------------------------------------
    def build(self) -> ll.Function:
        ctx = KernelContext(self, self.builder)
        ctx.values = self.uniform_values
        explicit = self.function.args[:len(self.function.args) - len(self.block_implicit)]
        params = self.lowering.assemble_params(ctx, self.func, list(explicit))
        for arg, value in zip(self.func.regions[0].block.args, params):
            self.uniform_values[arg] = value
        if self.by_rows:
            first = self.block_implicit["ctaid.x"]
            counted_loop(self.builder, self.block_implicit["blocks"],
                         lambda k: self.build_block(ctx, self.builder.add(first, k)),
                         "blocks", self.no_unroll)
        else:
            self.build_block(ctx, self.block_implicit["ctaid.x"])
        self.builder.ret_void()
        return self.function

    def build_block(self, ctx: KernelContext, block_x: ll.Value) -> None:
        """Block-level values, then the body, for the block (or block row) at x `block_x`."""
        self.block_implicit["ctaid.x"] = ctx.implicit["ctaid.x"] = block_x
        for op in self.plan.hoisted:
            ctx.lower_op(op)
        self.run_block(self.func.regions[0].block, None, None)

    def run_block(self, block: Block, mask: Slot | None, dests: list[Slot] | None) -> None:
        """Lower a block in block mode: thread loops for its runs, block-mode ops between;
        the terminator's operands go to `dests` for the threads in `mask`."""
        for item in self.plan.items[block]:
            if isinstance(item, Run):
                self.emit_run(item, mask, dests)
            else:
                self.lower_block_mode(item, mask)

    def run_region(self, region: Region, args: list[Slot | ll.Value], mask: Slot | None,
                   dests: list[Slot] | None) -> None:
        for arg, handle in zip(region.block.args, args):
            if isinstance(handle, Slot):
                self.slots[arg] = handle
            else:
                self.uniform_values[arg] = handle
        self.run_block(region.block, mask, dests)

    def yields(self, region: Region) -> list[Slot | ll.Value]:
        """What a region lowered in block mode hands back: uniform values or slots."""
        return [self.handle(v) for v in region.block.ops[-1].operands]

    def emit_run(self, run: Run, mask: Slot | None, dests: list[Slot] | None) -> None:
        if run.preamble:
            ctx = KernelContext(self, self.builder)
            ctx.values = self.uniform_values
            for op in run.preamble:
                ctx.lower_op(op)
        if run.idle and not dests:
            return

        def body(ctx: ThreadContext) -> None:
            for value in run.live_ins:
                if value not in self.uniform_values:
                    ctx.values[value] = self.read(self.slot_of(value), ctx.linear)
            ctx.storing = False      # what is computed again is in its slot already
            for op in run.recompute:
                ctx.lower_op(op)
            ctx.storing = True
            for op in run.ops:
                if not op.has_trait(Terminator):
                    ctx.lower_op(op)
                    continue
                for slot, value in zip(dests or [], op.operands):
                    self.write(slot, ctx.linear, ctx.value(value))

        self.thread_loop(mask, body)

    def lower_block_mode(self, op: Operation, mask: Slot | None) -> None:
        handles = [self.handle(v) for v in op.operands]
        results = LOWER[type(op)](BlockContext(self, mask, op), op, *handles)
        if not isinstance(results, (list, tuple)):   # a region-free op: one result or none
            results = [] if results is None else [results]
        for result, handle in zip(op.results, results):
            if isinstance(handle, Slot):
                self.slots[result] = handle
            else:
                self.uniform_values[result] = handle

    # ---- slots --------------------------------------------------------------------------
    def entry_alloca(self, llvm_type: ll.Type, count: int | ll.Value = 1,
                     align: int | None = None, per_thread: bool = False) -> ll.Value:
        """Stack memory of the block function, `count` items (times the threads of the
        block when `per_thread`)."""
        size = count if isinstance(count, ll.Value) else ll.Constant(I64, count)
        if per_thread:
            size = self._allocas.mul(self.nthreads, size)
        slot = self._allocas.alloca(llvm_type, size)
        slot.align = align
        return slot

    def dynamic_shared_memory(self) -> ll.Value:
        """The block's dynamic shared memory: one stack allocation of the launch's bytes,
        where every `shared.array(0, dtype)` starts."""
        if self._dynamic is None:
            size = self._allocas.zext(self.block_implicit["dynsmem"], I64)
            self._dynamic = self.entry_alloca(ll.IntType(8), size, align=64)
        return self._dynamic

    def new_slot(self, t: Type) -> Slot:
        return Slot(self.entry_alloca(self.lowering.memory_type(t), 1, 64, per_thread=True), t)

    def slot_of(self, v: Value) -> Slot:
        slot = self.slots.get(v)
        if slot is None:
            slot = self.slots[v] = self.new_slot(v.type)
        return slot

    def handle(self, v: Value) -> Slot | ll.Value:
        """A block-mode operand: the uniform value, or the slot holding each thread's."""
        uniform = self.uniform_values.get(v)
        return uniform if uniform is not None else self.slot_of(v)

    def read(self, handle: Slot | ll.Value, linear: ll.Value) -> ll.Value:
        if not isinstance(handle, Slot):
            return handle
        b = self.builder
        memory = self.lowering.memory_type(handle.type)
        ptr = b.gep(handle.ptr, [linear], inbounds=True, source_etype=memory)
        return bool_or_memory(b, handle.type, b.load(ptr, typ=memory), to_memory=False)

    def write(self, slot: Slot, linear: ll.Value, value: ll.Value) -> None:
        b = self.builder
        memory = self.lowering.memory_type(slot.type)
        ptr = b.gep(slot.ptr, [linear], inbounds=True, source_etype=memory)
        b.store(bool_or_memory(b, slot.type, value, to_memory=True), ptr)

    def is_active(self, mask: Slot | None, linear: ll.Value) -> ll.Value:
        return ll.Constant(I1, 1) if mask is None else self.read(mask, linear)

    # ---- loops over threads -------------------------------------------------------------
    def thread_loop(self, mask: Slot | None, body: Callable[[ThreadContext], None]) -> None:
        """body(ctx) for each thread in `mask`: a loop over the rows (y, z) of the block
        around a loop over x, the innermost (two loops, not three, keep the optimizer's work
        small)."""
        b = self.builder
        nx, ny = self.ntid[0], self.ntid[1]
        zero = ll.Constant(I32, 0)

        def at_row(row: ll.Value, digits: list[ll.Value]) -> None:
            y, z = digits
            start = b.mul(b.zext(row, I64), b.zext(nx, I64))

            def at_x(x: ll.Value) -> None:
                linear = b.add(start, b.zext(x, I64))
                run = lambda: body(ThreadContext(self, b, [x, y, z], linear, mask))
                if mask is None:
                    run()
                else:
                    with b.if_then(self.read(mask, linear)):
                        run()

            counted_loop(b, nx, at_x, "tx", self.no_unroll)

        if self.by_rows:   # the row is given
            y, z = self.block_implicit["tid.y"], self.block_implicit["tid.z"]
            at_row(b.add(b.mul(z, ny), y), [y, z])
        else:
            rows = b.mul(ny, self.ntid[2])
            odometer_loop(b, rows, [ny], [zero, zero], at_row, "rows", self.no_unroll)

    def each_thread(self, body: Callable[[ll.Value], None], mask: Slot | None = None) -> None:
        """A plain loop over the linear thread ids (block-mode bookkeeping)."""
        b = self.builder

        def step(linear: ll.Value) -> None:
            if mask is None:
                body(linear)
            else:
                with b.if_then(self.read(mask, linear)):
                    body(linear)

        counted_loop(b, self.nthreads, step, "each", self.no_unroll)

    def any_thread(self, test: Callable[[ll.Value], ll.Value]) -> ll.Value:
        """Whether `test(linear)` holds for some thread (every thread is tested)."""
        b = self.builder
        flag = self.entry_alloca(I1)
        b.store(ll.Constant(I1, 0), flag)
        self.each_thread(lambda linear: b.store(b.or_(b.load(flag, typ=I1), test(linear)), flag))
        return b.load(flag, typ=I1)


def build_entry(lowering: ModuleLowering, func: Operation, block_function: ll.Function,
                boundscheck: bool, name: str = ENTRY, by_rows: bool = False) -> ll.Function:
    """The exported entry point: unpack parameters, then run the work units [first, end):
    blocks in the order x, y, z; or, `by_rows`, (block x, block row) pairs with block x
    fastest, each row (thread y, block y, thread z, block z) one call for its blocks."""
    entry = ll.Function(lowering.llvm, ll.FunctionType(VOID, [PTR, I64, I64, PTR]), name)
    args_ptr, first, end, errors = entry.args
    b = ll.IRBuilder(entry.append_basic_block("entry"))
    word = lambda base, k: b.gep(base, [ll.Constant(I64, k)], source_etype=I64)
    launch = [b.trunc(b.load(word(args_ptr, k), typ=I64), I32) for k in range(LAUNCH_WORDS)]
    params: list[ll.Value] = []
    position = LAUNCH_WORDS
    for t in func.attrs["function_type"].inputs:
        if isinstance(t, Array):
            params.append(b.inttoptr(b.load(word(args_ptr, position), typ=I64), PTR))
            dims = len(lowering.param_types(t)) - 1
            params += [b.load(word(args_ptr, position + 1 + k), typ=I64) for k in range(dims)]
            position += 1 + 2 * t.ndim
        elif t.is_complex:   # two words: the real part, then the imaginary part
            part = lowering.memory_type(t.part)
            params += [b.load(word(args_ptr, position + k), typ=part) for k in (0, 1)]
            position += 2
        else:
            memory = lowering.memory_type(t)
            value = bool_or_memory(b, t, b.load(word(args_ptr, position), typ=memory), False)
            params.append(value)
            position += 1

    def call(arguments: list[ll.Value]) -> None:
        b.call(block_function, params + arguments)
        if boundscheck:   # the first error stops the launch
            failed = b.icmp_unsigned("!=", b.load(errors, typ=I64), ll.Constant(I64, 0))
            with b.if_then(failed, likely=False):
                b.ret_void()

    hint = loop_hint(lowering.llvm, "llvm.loop.unroll.disable")
    if by_rows:
        _row_loop(b, launch, first, end, errors, call, hint)
    else:
        starts = _digits(b, first, launch[:2])
        odometer_loop(b, b.sub(end, first), launch[:2], starts,
                      lambda _, block: call(block + launch + [errors]), "block", hint)
    b.ret_void()
    return entry


def _digits(b: ll.IRBuilder, number: ll.Value, radices: list[ll.Value]) -> list[ll.Value]:
    """`number` (i64) in mixed radix, fastest digit first, as i32 digits."""
    digits = []
    for radix in radices:
        digits.append(b.trunc(b.urem(number, b.zext(radix, I64)), I32))
        number = b.udiv(number, b.zext(radix, I64))
    return digits + [b.trunc(number, I32)]


def _row_loop(b: ll.IRBuilder, launch: list[ll.Value], first: ll.Value, end: ll.Value,
              errors: ll.Value, call: Callable[[list[ll.Value]], None],
              hint: ll.MDValue) -> None:
    """Units are (block x, row): one call per row runs its blocks in [first, end)."""
    blocks_x = b.zext(launch[0], I64)
    first_row, first_x = b.udiv(first, blocks_x), b.urem(first, blocks_x)
    last_row = b.udiv(b.sub(end, ll.Constant(I64, 1)), blocks_x)
    rows = b.select(b.icmp_unsigned(">", end, first),
                    b.add(b.sub(last_row, first_row), ll.Constant(I64, 1)), ll.Constant(I64, 0))
    radices = [launch[4], launch[1], launch[5]]   # thread y, block y, thread z (block z)

    def row(index: ll.Value) -> None:
        # a few divisions per row of the grid (rows are long) keep the loop simple
        thread_y, block_y, thread_z, block_z = _digits(b, b.add(first_row, index), radices)
        start = b.mul(b.add(first_row, index), blocks_x)
        low = b.select(b.icmp_unsigned("==", index, ll.Constant(I64, 0)), first_x,
                       ll.Constant(I64, 0))
        high = b.select(b.icmp_unsigned("<", b.sub(end, start), blocks_x), b.sub(end, start),
                        blocks_x)
        call([b.trunc(low, I32), block_y, block_z] + launch +
             [errors, thread_y, thread_z, b.trunc(b.sub(high, low), I32)])

    counted_loop(b, rows, row, "rows", hint)
