"""The lowering context: what an op's lower rule sees while it emits LLVM for one thread.

A rule is `rule(ctx, op, *operands) -> value | list[value] | None`, dispatched through
`LOWER[type(op)]`. The interface rules may use:

- `ctx.builder` (llvmlite IRBuilder at the insertion point), `ctx.target`, `ctx.op`;
- types and constants: `value_type(t)`, `memory_type(t)`, `constant(t, value)`;
- conversions: `cast(x, from_type, to_type)`, `index(x, int_type)` (to i64);
- calls: `call_intrinsic(name, ret, args, overloads=None)`, `call_external(symbol, ret, args)`,
  `call_function(callee, args)`;
- memory: `element_pointer(array_value, array, index_values, indices)`, `load(array_type, ptr)`,
  `store(array_type, ptr, value)`, `dim(array, axis)`, `shared_array(t)`, `local_array(t)`,
  `const_array(data)`, `entry_alloca(type, count, align)`;
- structured control flow (`control.py`): `branch`, `range_loop`, `while_loop`.

Backends subclass it (the CPU thread loops keep per-thread values in slots) by overriding
`value`, `bind` and the allocation hooks; rules never see the difference.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from llvmlite import ir as ll

from ...diagnostics import CompileError, Diagnostic
from ...ir.operation import Block, Operation, Region
from ...ir.types import Array, Scalar, Type
from ...ir.values import BlockArgument, Value
from ...ops.raising import host_exception
from ...ops.registry import LOWER, MissingRule
from .control import StructuredControl
from ..target import generic
from .types import I1, I32, I64, scalar_type

if TYPE_CHECKING:
    from .module import ModuleLowering

# Layout of the error buffer bounds checks write (i64 words); read by the runtime.
ERROR_CODE, ERROR_SITE, ERROR_NDIM, ERROR_INDEX, ERROR_SHAPE = 0, 1, 2, 3, 7
ERROR_WORDS = 11
OUT_OF_BOUNDS = 1
# A raise (ops/raising.py): ERROR_SITE is its number among the module's raises, the index words
# hold the thread's tid (x, y, z) and the shape words its block's ctaid.
RAISED = 3


class LoweringContext(StructuredControl):
    """Emits one function's ops at `builder`'s insertion point; IR values map to LLVM values."""

    def __init__(self, lowering: ModuleLowering, function: ll.Function,
                 builder: ll.IRBuilder, func: Operation | None = None):
        self.lowering = lowering
        self.target = lowering.target
        self.function = function
        self.builder = builder
        self.func = func                      # the IR func.func being lowered
        self.op: Operation | None = None      # the op whose rule runs now
        self.values: dict[Value, Any] = {}
        self.implicit: dict[str, ll.Value] = {}  # target-defined hidden values (geometry, ...)
        self._alloca_builder: ll.IRBuilder | None = None

    # ---- values -------------------------------------------------------------------------
    def value(self, v: Value) -> Any:
        try:
            return self.values[v]
        except KeyError:
            raise self.internal(f"value {v!r} used before it was lowered") from None

    def bind(self, v: Value, llvm_value: Any) -> None:
        self.values[v] = llvm_value

    # ---- ops and regions ----------------------------------------------------------------
    def lower_op(self, op: Operation) -> None:
        try:
            rule = LOWER[type(op)]
        except MissingRule as missing:
            raise CompileError(Diagnostic(op.loc, str(missing), "this op has no LLVM lowering "
                                          f"for the {self.target.name} target yet")) from None
        operands = [self.value(v) for v in op.operands]
        saved, self.op = self.op, op
        try:
            produced = rule(self, op, *operands)
        finally:
            self.op = saved
        self.bind_results(op, produced)

    def bind_results(self, op: Operation, produced: Any) -> None:
        if not op.results:
            return
        values = produced if isinstance(produced, (list, tuple)) else [produced]
        if len(values) != len(op.results):
            raise self.internal(f"{op.name} lowered to {len(values)} values, "
                                f"expected {len(op.results)}")
        for result, value in zip(op.results, values):
            self.bind(result, value)

    def lower_block(self, block: Block, args: list[Any]) -> list[Any]:
        """Lower the ops of `block` with its arguments bound to `args`; returns the values
        its terminator hands back."""
        for arg, value in zip(block.args, args):
            self.bind(arg, value)
        for op in block.ops[:-1]:
            self.lower_op(op)
        terminator = block.ops[-1]
        return [self.value(v) for v in terminator.operands]

    def lower_region(self, region: Region, args: list[Any]) -> list[Any]:
        return self.lower_block(region.block, args)

    # ---- types and constants ------------------------------------------------------------
    def value_type(self, t: Type) -> ll.Type:
        return self.lowering.value_type(t)

    def memory_type(self, t: Type) -> ll.Type:
        return self.lowering.memory_type(t)

    def constant(self, t: Scalar, value: Any) -> ll.Constant:
        llvm_type = scalar_type(t)
        if t.is_complex:
            value = complex(value)
            return ll.Constant(llvm_type, [self.constant(t.part, value.real),
                                           self.constant(t.part, value.imag)])
        if t.is_float:
            return ll.Constant(llvm_type, float(value))
        if t.is_bool:
            return ll.Constant(I1, int(bool(value)))
        wrapped = int(value) & ((1 << t.bits) - 1)   # LLVM spells every integer signed
        if wrapped >= 1 << (t.bits - 1):
            wrapped -= 1 << t.bits
        return ll.Constant(llvm_type, wrapped)

    # ---- conversions --------------------------------------------------------------------
    def index(self, x: ll.Value, t: Type) -> ll.Value:
        """An integer index widened to i64 (sign-extended when its type is signed)."""
        assert isinstance(t, Scalar)
        if t.bits == 64:
            return x
        return self.builder.sext(x, I64) if t.is_signed else self.builder.zext(x, I64)

    def cast(self, x: ll.Value, source: Scalar, target: Scalar) -> ll.Value:
        """`arith.cast` semantics: wrap/extend ints, saturating float->int (NaN -> 0)."""
        b = self.builder
        if source == target:
            return x
        if source.is_complex or target.is_complex:
            return self._complex_cast(x, source, target)
        to = scalar_type(target)
        if target.is_bool:
            if source.is_float:
                return b.fcmp_unordered("!=", x, ll.Constant(x.type, 0.0))
            return b.icmp_unsigned("!=", x, ll.Constant(x.type, 0))
        if source.is_float and target.is_float:
            return b.fpext(x, to) if target.bits > source.bits else \
                self.target.float_truncate(self, x, to)
        if source.is_float:
            name = "llvm.fptosi.sat" if target.is_signed else "llvm.fptoui.sat"
            return self.call_intrinsic(name, to, [x], overloads=[to, x.type])
        if target.is_float:
            return b.sitofp(x, to) if source.is_signed else b.uitofp(x, to)
        if target.bits < source.bits:
            return b.trunc(x, to)
        if target.bits == source.bits:
            return x
        return b.sext(x, to) if source.is_signed else b.zext(x, to)

    def _complex_cast(self, x: ll.Value, source: Scalar, target: Scalar) -> ll.Value:
        """Complex casts as NumPy's: a real becomes (x, 0), a complex to a real keeps its real
        part (to bool: nonzero when either part is), complex to complex casts each part."""
        b = self.builder
        if not target.is_complex:
            if target.is_bool:
                parts = [self.cast(b.extract_value(x, k), source.part, target) for k in (0, 1)]
                return b.or_(*parts)
            return self.cast(b.extract_value(x, 0), source.part, target)
        if source.is_complex:
            parts = [self.cast(b.extract_value(x, k), source.part, target.part) for k in (0, 1)]
        else:
            parts = [self.cast(x, source, target.part), self.constant(target.part, 0.0)]
        return self.complex_value(target, *parts)

    def complex_value(self, t: Scalar, real: ll.Value, imag: ll.Value) -> ll.Value:
        """The LLVM value of complex type `t` with parts `real` and `imag`."""
        b = self.builder
        pair = ll.Constant(scalar_type(t), ll.Undefined)
        return b.insert_value(b.insert_value(pair, real, 0), imag, 1)

    # ---- calls --------------------------------------------------------------------------
    def call_intrinsic(self, name: str, ret: ll.Type, args: list[ll.Value],
                       overloads: list[ll.Type] | None = None) -> ll.Value:
        """Call LLVM intrinsic `name`, suffixed with the overload types (default: the first
        argument's), e.g. llvm.sqrt.f32."""
        suffix = "".join("." + t.intrinsic_name for t in (overloads or [args[0].type]))
        fn = self.lowering.declare(name + suffix, ret, [a.type for a in args])
        return self.builder.call(fn, args)

    def call_external(self, symbol: str, ret: ll.Type, args: list[ll.Value]) -> ll.Value:
        fn = self.lowering.declare(symbol, ret, [a.type for a in args])
        return self.builder.call(fn, args)

    def call_foreign(self, callee, out_type: ll.Type | None, args: list[ll.Value]):
        """Call foreign device function `callee` (lang/foreign.py). numba's ABI: the result
        comes back through a pointer passed first, the returned status is ignored; the C
        ABI: a plain call."""
        symbol = self.target.foreign_symbol(self, callee)
        if callee.abi == "c":
            fn = self.lowering.declare(symbol, out_type or ll.VoidType(), [a.type for a in args])
            returned = self.builder.call(fn, args)
            return returned if out_type is not None else None
        slot = self.entry_alloca(out_type or ll.IntType(8))
        pointer = generic(self.builder, slot)
        fn = self.lowering.declare(symbol, ll.IntType(32), [pointer.type] + [a.type for a in args])
        self.builder.call(fn, [pointer, *args])
        return self.builder.load(slot, typ=out_type) if out_type is not None else None

    def generic_pointer(self, pointer: ll.Value) -> ll.Value:
        """`pointer` in the generic address space, as C functions take pointers."""
        return generic(self.builder, pointer)

    def call_function(self, callee: str, args: list[Any]) -> Any:
        """Call the module's function `callee`; returns its results as a list."""
        fn = self.lowering.functions[callee]
        hidden = [self.implicit[name] for name, _ in self.target.implicit_params()]
        returned = self.builder.call(fn, list(args) + hidden)
        outputs = self.lowering.module[callee].attrs["function_type"].outputs
        if not outputs:
            return []
        if len(outputs) == 1:
            return [returned]
        return [self.builder.extract_value(returned, i) for i in range(len(outputs))]

    # ---- memory -------------------------------------------------------------------------
    def entry_alloca(self, llvm_type: ll.Type, count: int | ll.Value = 1,
                     align: int | None = None) -> ll.Value:
        """Stack memory allocated once, at the entry of the current function."""
        size = count if isinstance(count, ll.Value) else ll.Constant(I64, count)
        if self.builder.block is self.function.entry_basic_block:
            # inserting at the block's start would shift the main builder's stale position
            slot = self.builder.alloca(llvm_type, size)
            slot.align = align
            return slot
        if self._alloca_builder is None:
            entry = self.function.entry_basic_block
            self._alloca_builder = ll.IRBuilder(entry)
            self._alloca_builder.position_at_start(entry)
        slot = self._alloca_builder.alloca(llvm_type, size)
        slot.align = align
        return slot

    def make_array(self, t: Array, data: ll.Value, shape: list[ll.Value],
                   strides: list[ll.Value] | None = None) -> ll.Value:
        """The array aggregate; C-layout strides follow from the shape when not given."""
        if strides is None:
            strides = [ll.Constant(I64, 1)] * t.ndim
            for axis in range(t.ndim - 2, -1, -1):
                strides[axis] = _mul(self.builder, strides[axis + 1], shape[axis + 1])
        aggregate = ll.Constant(self.value_type(t), ll.Undefined)
        aggregate = self.builder.insert_value(aggregate, data, 0)
        for axis in range(t.ndim):
            aggregate = self.builder.insert_value(aggregate, shape[axis], [1, axis])
            aggregate = self.builder.insert_value(aggregate, strides[axis], [2, axis])
        return aggregate

    def static_array(self, t: Array, data: ll.Value) -> ll.Value:
        shape = [ll.Constant(I64, n) for n in t.shape or ()]
        return self.make_array(t, data, shape)

    def shared_array(self, t: Array) -> ll.Value:
        if t.shape is None:   # dynamic shared memory: its extent is the launch's
            data, count = self.target.dynamic_shared(self, t)
            return self.make_array(t, data, [count])
        return self.static_array(t, self.target.shared_array(self, t))

    def local_array(self, t: Array) -> ll.Value:
        return self.static_array(t, self.target.local_array(self, t))

    def const_array(self, t: Array, data: np.ndarray) -> ll.Value:
        return self.static_array(t, self.lowering.constant_global(data, t))

    def dim(self, array: ll.Value, axis: int) -> ll.Value:
        return self.builder.extract_value(array, [1, axis])

    def element_pointer(self, array_value: Value, array: ll.Value, index_values: list[Value],
                        indices: list[ll.Value]) -> ll.Value:
        """Address of array[indices]; with bounds checking an index outside the shape records
        an error and leaves the function."""
        b = self.builder
        t = array_value.type
        assert isinstance(t, Array)
        if t.narrow_offsets and not self.lowering.boundscheck and indices:
            offset = self._narrow_offset(t, array, index_values, indices)
        else:
            wide = [self.index(x, v.type) for x, v in zip(indices, index_values)]
            if self.lowering.boundscheck:
                self._check_bounds(array_value, array, wide)
            offset = None
            for axis, position in enumerate(wide):
                term = _mul(b, position, b.extract_value(array, [2, axis]))
                offset = term if offset is None else b.add(offset, term)
        base = b.extract_value(array, 0)
        return b.gep(base, [offset if offset is not None else ll.Constant(I64, 0)],
                     inbounds=True, source_etype=self.memory_type(t.dtype))

    def _narrow_offset(self, t: Array, array: ll.Value, index_values: list[Value],
                       indices: list[ll.Value]) -> ll.Value:
        """The element offset computed in i32, as CUDA C does with `int` indices: for an
        array whose offsets fit in i32, every in-bounds position and partial sum does, so
        nothing wraps (`nsw nuw`), and an out-of-bounds access is an error either way.
        On the GPU a 64-bit multiply costs several 32-bit ones."""
        b = self.builder
        exact = ("nsw", "nuw")
        offset = None
        for axis, (x, v) in enumerate(zip(indices, index_values)):
            position = self.narrow_index(x, v.type)
            if t.layout == "C" and axis == t.ndim - 1:
                term = position
            else:
                stride = b.trunc(b.extract_value(array, [2, axis]), I32)
                term = b.mul(position, stride, flags=exact)
            offset = term if offset is None else b.add(offset, term, flags=exact)
        return b.sext(offset, I64)

    def narrow_index(self, x: ll.Value, t: Type) -> ll.Value:
        """An integer index as i32 (exact for in-bounds indices of a `narrow_offsets` array)."""
        assert isinstance(t, Scalar)
        if t.bits == 32:
            return x
        if t.bits > 32:
            return self.builder.trunc(x, I32)
        return self.builder.sext(x, I32) if t.is_signed else self.builder.zext(x, I32)

    def load(self, t: Array, ptr: ll.Value) -> ll.Value:
        value = self.builder.load(ptr, typ=self.memory_type(t.dtype), align=t.element_align)
        return self.from_memory(t.dtype, value)

    def store(self, t: Array, ptr: ll.Value, value: ll.Value) -> None:
        self.builder.store(self.to_memory(t.dtype, value), ptr, align=t.element_align)

    def to_memory(self, t: Type, value: ll.Value) -> ll.Value:
        if isinstance(t, Scalar) and t.is_bool:
            return self.builder.zext(value, self.memory_type(t))
        return value

    def from_memory(self, t: Type, value: ll.Value) -> ll.Value:
        if isinstance(t, Scalar) and t.is_bool:
            return self.builder.trunc(value, I1)
        return value

    # ---- errors -------------------------------------------------------------------------
    def _check_bounds(self, array_value: Value, array: ll.Value, indices: list[ll.Value]):
        b = self.builder
        outside = None
        for axis, position in enumerate(indices):
            bad = b.icmp_unsigned(">=", position, self.dim(array, axis))
            outside = bad if outside is None else b.or_(outside, bad)
        if outside is None:
            return
        site = self.lowering.add_site(self.array_name(array_value), self.op)
        with b.if_then(outside, likely=False):
            self.report_error(OUT_OF_BOUNDS, site, indices,
                              [self.dim(array, axis) for axis in range(len(indices))])
            self.abort()

    def raise_where(self, op: Operation, cond: ll.Value) -> None:
        """Where `cond` holds, the thread raises `op`'s exception: a checked build records it
        (the launch raises it on the host) and leaves the function; an unchecked one emits
        nothing (the frontend ends the thread, or a check's value stays clamped)."""
        if not self.lowering.boundscheck:
            return
        b = self.builder
        number = self.lowering.raise_number(op)
        with b.if_then(cond, likely=False):
            position = [[b.zext(self.target.special_register(self, register, axis), I64)
                         for axis in "xyz"] for register in ("tid", "ctaid")]
            self.report_error(RAISED, number, *position)
            self.abort()

    def report_error(self, code: int, site: int, indices: list[ll.Value],
                     shape: list[ll.Value]) -> None:
        """Record the first error of a launch in the error buffer (later ones are dropped)."""
        b = self.builder
        buffer = self.implicit["errbuf"]
        word = lambda k: b.gep(buffer, [ll.Constant(I64, k)], source_etype=I64)
        pair = b.cmpxchg(word(ERROR_CODE), ll.Constant(I64, 0), ll.Constant(I64, code),
                         "monotonic", "monotonic")
        with b.if_then(b.extract_value(pair, 1)):
            b.store(ll.Constant(I64, site), word(ERROR_SITE))
            b.store(ll.Constant(I64, len(indices)), word(ERROR_NDIM))
            for axis, (position, extent) in enumerate(zip(indices, shape)):
                b.store(position, word(ERROR_INDEX + axis))
                b.store(extent, word(ERROR_SHAPE + axis))

    def abort(self) -> None:
        """Leave the current function after an error (returning zeros where it has results)."""
        ret = self.function.function_type.return_type
        if isinstance(ret, ll.VoidType):
            self.builder.ret_void()
        else:
            self.builder.ret(ll.Constant(ret, None))

    def array_name(self, array_value: Value) -> str:
        """The user's name for an array: its kernel parameter name where it is one."""
        if isinstance(array_value, BlockArgument) and self.func is not None \
                and array_value.block is self.func.regions[0].block:
            names = self.func.attrs.get("arg_names") or ()
            if array_value.index < len(names):
                return names[array_value.index]
        return array_value.name_hint or f"array<{array_value.type}>"

    def internal(self, message: str) -> Exception:
        from ...diagnostics import InternalError
        where = f" (lowering {self.op.name} at {self.op.loc})" if self.op is not None else ""
        return InternalError(message + where)


def raised_exception(raises: list[Operation], errors) -> BaseException:
    """The exception a checked launch raises on the host for an error buffer that holds a
    raise (code RAISED); `raises`: the launched module's raises (`ops.raising.raises`)."""
    return host_exception(raises[int(errors[ERROR_SITE])],
                          errors[ERROR_INDEX:ERROR_INDEX + 3], errors[ERROR_SHAPE:ERROR_SHAPE + 3])


def _mul(builder: ll.IRBuilder, a: ll.Value, b: ll.Value) -> ll.Value:
    """a * b, skipping multiplications by a constant 1 (keeps the emitted IR small)."""
    if isinstance(b, ll.Constant) and b.constant == 1:
        return a
    if isinstance(a, ll.Constant) and a.constant == 1:
        return b
    return builder.mul(a, b)
