"""numba's `cuda.libdevice`: libdevice's functions by their names (`libdevice.sincos(x)`,
`libdevice.frexpf(x)`, `libdevice.sad(x, y, z)`; the list and signatures are
`libdevicefuncs.functions`), callable in kernels.

Each is written in the kernel language over zymo's math ops, so it runs on every backend
(the CPU, the interpreter) and on NVPTX lowers to the `__nv_*` call the op maps to. Arguments
are converted to the C parameter types, as numba's typed wrappers do; a function with output
pointers returns the C result and the outputs as a tuple."""
from __future__ import annotations

import math

import zymo as _zm

from ..ir import types as _T
from ..lang.decorators import DeviceFunction
from . import types as _nt
from .libdevicefuncs import BINARY_FLOAT, UNARY_FLOAT, functions

# Python's builtins under names of their own: this module's globals get libdevice's `min`,
# `max` and `abs`, which the functions below must not call
_min, _max, _abs = min, max, abs
_NAMED = {"tgamma": "gamma"}   # zymo's math name where it differs


# ---- implementations, one factory per kind of function; `t` is the C type of the inputs ------
def _unary(fn, t):
    def impl(x):
        return fn(t(x))
    return impl


def _binary(fn, t):
    def impl(x, y):
        return fn(t(x), t(y))
    return impl


def _rsqrt(t):
    def impl(x):
        return t(1.0) / math.sqrt(t(x))
    return impl


def _exp10(t):
    def impl(x):
        return math.pow(t(10.0), t(x))
    return impl


def _fmin(t):
    def impl(x, y):   # a NaN gives way to the other operand
        a, b = t(x), t(y)
        if a != a:
            return b
        if b != b:
            return a
        return _min(a, b)
    return impl


def _fmax(t):
    def impl(x, y):
        a, b = t(x), t(y)
        if a != a:
            return b
        if b != b:
            return a
        return _max(a, b)
    return impl


def _fma(t):
    def impl(x, y, z):
        return _zm.fma(t(x), t(y), t(z))
    return impl


def _ldexp(t):
    def impl(x, y):
        return math.ldexp(t(x), _zm.i32(y))
    return impl


def _frexp(t):
    def impl(x):
        fraction, exponent = math.frexp(t(x))
        return fraction, _zm.i32(exponent)
    return impl


def _sincos(t):
    def impl(x):
        v = t(x)
        return math.sin(v), math.cos(v)
    return impl


def _predicate(fn, t):
    def impl(x):
        return _zm.i32(fn(t(x)))
    return impl


def _signbit(t):
    def impl(x):
        return _zm.i32(math.copysign(t(1.0), t(x)) < 0)
    return impl


def _int_unary(fn, t, out):
    def impl(x):
        return out(fn(t(x)))
    return impl


def _int_binary(fn, t):
    def impl(x, y):
        return fn(t(x), t(y))
    return impl


def _sad(t):
    def impl(x, y, z):   # |x - y| + z, the difference taken without overflow
        d = _zm.i64(t(x)) - _zm.i64(t(y))
        return _zm.u32(_abs(d) + _zm.i64(_zm.u32(z)))
    return impl


_FLOAT_SPECIAL = {"rsqrt": _rsqrt, "exp10": _exp10, "fmin": _fmin, "fmax": _fmax,
                  "fma": _fma, "ldexp": _ldexp, "frexp": _frexp, "sincos": _sincos}
_PREDICATES = {"isnand": math.isnan, "isnanf": math.isnan, "isinfd": math.isinf,
               "isinff": math.isinf, "isfinited": math.isfinite, "finitef": math.isfinite}
_INTRINSICS = {"brev": _zm.brev, "clz": _zm.clz, "popc": _zm.popc, "ffs": _zm.ffs}


def _float_impl(name: str, t):
    base = name[:-1] if t == _T.f32 else name     # sinf is sin on a float32
    if base in _FLOAT_SPECIAL:
        return _FLOAT_SPECIAL[base](t)
    fn = getattr(_zm.math, _NAMED.get(base, base))
    return (_unary if base in UNARY_FLOAT else _binary)(fn, t)


def _other_impl(name: str, t):
    if name in _PREDICATES:
        return _predicate(_PREDICATES[name], t)
    if name.startswith("signbit"):
        return _signbit(t)
    if name in ("abs", "llabs"):
        return _int_unary(_abs, t, t)
    if name.endswith(("min", "max")):
        return _int_binary(_min if name.endswith("min") else _max, t)
    if name in ("sad", "usad"):
        return _sad(t)
    stem = name[:-2] if name.endswith("ll") else name
    return _int_unary(_INTRINSICS[stem], t, t if stem == "brev" else _zm.i32)


def _build(libname: str) -> DeviceFunction:
    name = libname[len("__nv_"):]
    retty, args = functions[libname]
    first = args[0].ty.zymo_type
    floating = first.is_float and retty != _nt.int32
    impl = (_float_impl if floating else _other_impl)(name, first)
    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = f"libdevice's {libname}"
    return DeviceFunction(impl)


globals().update({libname[len("__nv_"):]: _build(libname) for libname in functions})
__all__ = [libname[len("__nv_"):] for libname in functions]
