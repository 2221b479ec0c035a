"""IR types as LLVM types: scalars, bools (i1 in registers, i8 in memory) and array views.

An array value is the aggregate `{ptr data, [ndim x i64] shape, [ndim x i64] strides}`,
strides counted in elements. Kernel parameters pass its fields separately so that the
pointer can carry `noalias` and a C-layout array can drop its strides.
"""
from __future__ import annotations

from llvmlite import ir as ll

from ...ir.types import Array, FunctionType, Scalar, Type

I1 = ll.IntType(1)
I8 = ll.IntType(8)
I32 = ll.IntType(32)
I64 = ll.IntType(64)
VOID = ll.VoidType()
PTR = ll.PointerType()

_FLOATS = {16: ll.HalfType(), 32: ll.FloatType(), 64: ll.DoubleType()}


def scalar_type(t: Scalar) -> ll.Type:
    if t.is_complex:   # {re, im}: NumPy's complex layout, element type of complex arrays
        part = _FLOATS[t.part.bits]
        return ll.LiteralStructType([part, part])
    if t.is_float:
        return _FLOATS[t.bits]
    return ll.IntType(t.bits)


def array_struct(t: Array, address_space: int) -> ll.LiteralStructType:
    dims = ll.ArrayType(I64, t.ndim)
    return ll.LiteralStructType([ll.PointerType(addrspace=address_space), dims, dims])


def value_type(t: Type, address_space=lambda space: 0) -> ll.Type:
    """The LLVM type of an SSA value of IR type `t`; `address_space` maps array spaces."""
    if isinstance(t, Scalar):
        return scalar_type(t)
    if isinstance(t, Array):
        return array_struct(t, address_space(t.space))
    raise TypeError(f"no LLVM type for {t}")


def memory_type(t: Type, address_space=lambda space: 0) -> ll.Type:
    """The LLVM type of `t` stored in memory (bools take a byte, as NumPy stores them)."""
    if isinstance(t, Scalar) and t.is_bool:
        return I8
    return value_type(t, address_space)


def return_type(t: FunctionType, address_space=lambda space: 0) -> ll.Type:
    outputs = [value_type(o, address_space) for o in t.outputs]
    if not outputs:
        return VOID
    if len(outputs) == 1:
        return outputs[0]
    return ll.LiteralStructType(outputs)
