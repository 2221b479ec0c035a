"""The libdevice functions `zymo.cuda.libdevice` offers, by their libdevice names, with their
C signatures as numba's `numba.cuda.libdevicefuncs` lists them: `functions[name]` is
(return type, [arg(name, type, is_ptr)]); a pointer argument is an output, which the Python
function returns (after the C result, if any) instead of taking."""
from __future__ import annotations

from collections import namedtuple

from . import types as nt

arg = namedtuple("arg", ("name", "ty", "is_ptr"))

_TYPES = {"f4": nt.float32, "f8": nt.float64, "i4": nt.int32, "u4": nt.uint32,
          "i8": nt.int64, "u8": nt.uint64, "void": nt.void}

UNARY_FLOAT = ("acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "ceil", "cos",
               "cosh", "erf", "erfc", "exp", "exp10", "exp2", "expm1", "fabs", "floor",
               "lgamma", "log", "log10", "log1p", "log2", "rint", "rsqrt", "sin", "sinh",
               "sqrt", "tan", "tanh", "tgamma", "trunc")
BINARY_FLOAT = ("atan2", "copysign", "fmax", "fmin", "fmod", "hypot", "nextafter", "pow",
                "remainder")


def _float_pairs() -> list[tuple[str, str, str]]:
    """Each float function in its double (`sin`) and float (`sinf`) spelling."""
    rows = []
    for t, suffix in (("f8", ""), ("f4", "f")):
        rows += [(name + suffix, t, f"x:{t}") for name in UNARY_FLOAT]
        rows += [(name + suffix, t, f"x:{t} y:{t}") for name in BINARY_FLOAT]
        rows += [("fma" + suffix, t, f"x:{t} y:{t} z:{t}"),
                 ("ldexp" + suffix, t, f"x:{t} y:i4"),
                 ("frexp" + suffix, t, f"x:{t} *b:i4"),
                 ("sincos" + suffix, "void", f"x:{t} *sptr:{t} *cptr:{t}")]
    return rows


# (name without __nv_, return type, arguments "name:type", "*name:type" for an output)
_ROWS = _float_pairs() + [
    ("isnand", "i4", "x:f8"), ("isnanf", "i4", "x:f4"),
    ("isinfd", "i4", "x:f8"), ("isinff", "i4", "x:f4"),
    ("isfinited", "i4", "x:f8"), ("finitef", "i4", "x:f4"),
    ("signbitd", "i4", "x:f8"), ("signbitf", "i4", "x:f4"),
    ("abs", "i4", "x:i4"), ("llabs", "i8", "x:i8"),
    ("min", "i4", "x:i4 y:i4"), ("umin", "u4", "x:u4 y:u4"),
    ("llmin", "i8", "x:i8 y:i8"), ("ullmin", "u8", "x:u8 y:u8"),
    ("max", "i4", "x:i4 y:i4"), ("umax", "u4", "x:u4 y:u4"),
    ("llmax", "i8", "x:i8 y:i8"), ("ullmax", "u8", "x:u8 y:u8"),
    ("sad", "u4", "x:i4 y:i4 z:u4"), ("usad", "u4", "x:u4 y:u4 z:u4"),
    ("brev", "i4", "x:i4"), ("brevll", "i8", "x:i8"),
    ("clz", "i4", "x:i4"), ("clzll", "i4", "x:i8"),
    ("popc", "i4", "x:i4"), ("popcll", "i4", "x:i8"),
    ("ffs", "i4", "x:i4"), ("ffsll", "i4", "x:i8"),
]


def _args(text: str) -> list:
    out = []
    for item in text.split():
        name, ty = item.split(":")
        out.append(arg(name.lstrip("*"), _TYPES[ty], name.startswith("*")))
    return out


functions = {f"__nv_{name}": (_TYPES[ret], _args(args)) for name, ret, args in _ROWS}


def create_signature(retty, args) -> nt.Signature:
    """The signature of the Python function for a libdevice function: its arguments are the
    C inputs; it returns the C result and the outputs, a tuple when there are several."""
    returns = ([] if retty == nt.void else [retty]) + [a.ty for a in args if a.is_ptr]
    inputs = tuple(a.ty for a in args if not a.is_ptr)
    if not returns:
        return nt.Signature(nt.void, inputs)
    if len(returns) == 1:
        return nt.Signature(returns[0], inputs)
    if all(r == returns[0] for r in returns):
        return nt.Signature(nt.UniTuple(returns[0], len(returns)), inputs)
    return nt.Signature(nt.Tuple(tuple(returns)), inputs)
