"""Complex values as pairs of reals (`complex.*`): building one from its parts and reading them.

Only these ops, the componentwise `arith.add/sub/neg`, selects, casts, constants, loads and
stores see complex types. Products, quotients, `abs` and the `cmath` functions are real
arithmetic on the parts, written by the frontend (frontend/complexes.py), as clang lowers C's
`_Complex`. Derivatives therefore treat a complex value as the pair (re, im): the cotangent of
a complex value z is dL/d(re z) + i dL/d(im z), the conjugate of JAX's convention (JAX's
`grad` of a real function of z gives dL/dx - i dL/dy) and the one PyTorch documents. A shadow
array of complex values holds exactly that pair per element.
"""
from __future__ import annotations

import numpy as np

from ..ir.traits import Pure, Speculatable
from ..ir.operation import operand, result
from ..ir.types import complex_of
from .base import Op, Unary, require, same_type, scalar
from . import tangents
from .adjoints import cotangents
from .registry import interp_rule, lower_rule, typing_rule


class MakeComplex(Op):
    """%z = complex.make(%re, %im) : c64 (parts f32) or c128 (parts f64)"""

    name = "complex.make"
    traits = (Pure, Speculatable)
    real = operand()
    imag = operand()
    result = result()


def _make_types(types, attrs):
    t = scalar(same_type(*types))
    require(t.is_float and t.bits in (32, 64), f"complex parts must be f32 or f64, not {t}")
    return [complex_of(t)]


def _make_jvp(fw, op, ts):
    if all(t is None for t in ts):
        return [None]
    part = op.real.type
    return [fw.emit(MakeComplex, *(t if t is not None else fw.zero(part) for t in ts))]


typing_rule(MakeComplex, _make_types)
def _make_interp(ctx, op, re, im):
    """The parts stored as they are: re + 1j * im would turn an infinite part into NaNs
    (1j * inf = nan + inf j) and lose the sign of a zero one."""
    re, im = np.broadcast_arrays(np.asarray(re), np.asarray(im))
    z = np.empty(re.shape, op.result.type.dtype)
    z.real, z.imag = re, im
    return z


interp_rule(MakeComplex, _make_interp)
lower_rule(MakeComplex, lambda ctx, op, re, im: ctx.complex_value(op.result.type, re, im))
cotangents(MakeComplex, lambda ad, op, ct: ad.emit(RealPart, ct),
           lambda ad, op, ct: ad.emit(ImagPart, ct), jvp=_make_jvp)


class RealPart(Unary):
    """%x = complex.real(%z) : the float type of z's parts"""

    name = "complex.real"


class ImagPart(Unary):
    """%y = complex.imag(%z)"""

    name = "complex.imag"


def _part_types(types, attrs):
    t = scalar(types[0])
    require(t.is_complex, f"operand must be complex, not {t}")
    return [t.part]


def _part_of(which: int):
    """The adjoint of reading part `which`: the cotangent placed in that part, 0 in the other."""

    def contribution(ad, op, ct):
        zero = ad.zero(ct.type)
        return ad.emit(MakeComplex, *((ct, zero) if which == 0 else (zero, ct)))

    return contribution


for _cls, _which, _numpy in ((RealPart, 0, np.real), (ImagPart, 1, np.imag)):
    typing_rule(_cls, _part_types)
    interp_rule(_cls, lambda ctx, op, z, fn=_numpy: np.asarray(fn(z)))
    lower_rule(_cls, lambda ctx, op, z, k=_which: ctx.builder.extract_value(z, k))
    cotangents(_cls, _part_of(_which), jvp=tangents.linear_in(0))
