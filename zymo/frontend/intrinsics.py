"""How each kernel-language name lowers: one handler per intrinsic path, in tables.

A handler is `handler(lowerer, node, args, kwargs) -> frontend value`.
"""
from __future__ import annotations

import builtins
import math as pymath

import numpy as np

from ..ir import types as T
from ..ir.types import Array, Scalar
from ..ir.values import Value
from ..ops import arith, atomic, bits, memory, sync, thread, warp
from ..ops import math as zmath
from .convert import UserError
from .values import PyConst, Tup, Weak

HANDLERS: dict[str, object] = {}
# name -> handler taking over `name` (np.sqrt, abs, isnan, ...) when an operand is complex;
# filled by complexes.py
COMPLEX_FORMS: dict[str, object] = {}


def _complex_operand(args) -> bool:
    return any(isinstance(a, Value) and isinstance(a.type, Scalar) and a.type.is_complex
               or isinstance(a, PyConst) and isinstance(a.value, complex) for a in args)


def handler(*paths: str):
    def register(fn):
        for path in paths:
            HANDLERS[path] = fn
        return fn

    return register


def _arity(node, args, low: int, high: int | None = None, name: str = "") -> None:
    high = low if high is None else high
    if not low <= len(args) <= high:
        want = str(low) if low == high else f"{low} to {high}"
        raise UserError(node, f"{name or 'this function'} takes {want} arguments, got {len(args)}")


# ---- thread geometry -----------------------------------------------------------------------
_SPECIAL = {"threadIdx": thread.ThreadIdx, "blockIdx": thread.BlockIdx,
            "blockDim": thread.BlockDim, "gridDim": thread.GridDim}


def special(lw, path: str):
    group, axis = path.split(".")
    return lw.b.value(_SPECIAL[group], axis=axis)


@handler("grid")
def _grid(lw, node, args, kwargs):
    ndim = _static_int(lw, node, args, "zm.grid")
    values = []
    for axis in "xyz"[:ndim]:
        tid = lw.b.value(thread.ThreadIdx, axis=axis)
        bid = lw.b.value(thread.BlockIdx, axis=axis)
        bdim = lw.b.value(thread.BlockDim, axis=axis)
        values.append(lw.b.value(arith.Add, lw.b.value(arith.Mul, bid, bdim), tid))
    return values[0] if ndim == 1 else Tup(tuple(values))


@handler("gridsize")
def _gridsize(lw, node, args, kwargs):
    ndim = _static_int(lw, node, args, "zm.gridsize")
    values = [lw.b.value(arith.Mul, lw.b.value(thread.BlockDim, axis=a),
                         lw.b.value(thread.GridDim, axis=a)) for a in "xyz"[:ndim]]
    return values[0] if ndim == 1 else Tup(tuple(values))


def _static_int(lw, node, args, name):
    _arity(node, args, 1, 1, name)
    if not (isinstance(args[0], PyConst) and args[0].value in (1, 2, 3)):
        raise UserError(node, f"{name} needs a literal 1, 2 or 3")
    return args[0].value


def lane_id(lw):
    return lw.b.value(thread.LaneId)


# ---- memory --------------------------------------------------------------------------------
def parse_dtype(node, value) -> Scalar:
    from .values import Obj
    obj = value.obj if isinstance(value, Obj) else value
    if isinstance(obj, Scalar):
        return obj
    try:
        return T.scalar_of_dtype(np.dtype(obj if not hasattr(obj, "name") else str(obj)))
    except (TypeError, KeyError):
        pass
    try:
        return T.scalar_of_dtype(np.dtype(str(obj)))
    except (TypeError, KeyError):
        raise UserError(node, f"{obj!r} is not an element type",
                        "use zm.f32, zm.i32, ... or a NumPy dtype such as np.float32")


def static_shape(node, value) -> tuple[int, ...]:
    items = value.items if isinstance(value, Tup) else (value,)
    shape = []
    for item in items:
        if not (isinstance(item, PyConst) and isinstance(item.value, int)):
            raise UserError(node, "array shape must be known at compile time",
                            "use integer literals or module-level integer constants")
        shape.append(item.value)
    if not 1 <= len(shape) <= 4:
        raise UserError(node, f"arrays have 1 to 4 dimensions, not {len(shape)}")
    return tuple(shape)


def _alloc(op_class):
    def lower(lw, node, args, kwargs):
        shape = kwargs.get("shape", args[0] if args else None)
        dtype = kwargs.get("dtype", args[1] if len(args) > 1 else None)
        if shape is None or dtype is None:
            raise UserError(node, "array(shape, dtype) needs a shape and a dtype")
        return lw.b.value(op_class, shape=static_shape(node, shape), dtype=parse_dtype(node, dtype))

    return lower


HANDLERS["shared.array"] = _alloc(memory.SharedAlloc)
HANDLERS["local.array"] = _alloc(memory.LocalAlloc)


@handler("const.array_like")
def _const_array(lw, node, args, kwargs):
    from .values import Obj
    _arity(node, args, 1, 1, "zm.const.array_like")
    data = args[0].obj if isinstance(args[0], Obj) else None
    if not isinstance(data, np.ndarray):
        raise UserError(node, "zm.const.array_like needs a NumPy array known at compile time",
                        "pass a module-level NumPy array")
    return lw.b.value(memory.ConstArray, data=np.ascontiguousarray(data))


# ---- atomics -------------------------------------------------------------------------------
_ATOMICS = {"add": atomic.AtomicAdd, "sub": atomic.AtomicSub, "max": atomic.AtomicMax,
            "min": atomic.AtomicMin, "exch": atomic.AtomicExch}


def _atomic(kind):
    def lower(lw, node, args, kwargs):
        _arity(node, args, 3, 3, f"zm.atomic.{kind}")
        array, indices = lw.array_and_indices(node, args[0], args[1])
        value = lw.materialize(args[2], array.type.dtype, node)
        return lw.b.value(_ATOMICS[kind], array, *indices, value)

    return lower


for _kind in _ATOMICS:
    HANDLERS[f"atomic.{_kind}"] = _atomic(_kind)


@handler("atomic.cas")
def _cas(lw, node, args, kwargs):
    _arity(node, args, 4, 4, "zm.atomic.cas")
    array, indices = lw.array_and_indices(node, args[0], args[1])
    expected = lw.materialize(args[2], array.type.dtype, node)
    new = lw.materialize(args[3], array.type.dtype, node)
    return lw.b.value(atomic.AtomicCas, array, *indices, expected, new)


# ---- synchronization and warps -------------------------------------------------------------
@handler("syncthreads")
def _sync(lw, node, args, kwargs):
    _arity(node, args, 0, 0, "zm.syncthreads")
    lw.b.create(sync.Barrier)
    return PyConst(0)


def _fence(scope: str, path: str):
    def lower(lw, node, args, kwargs):
        _arity(node, args, 0, 0, f"zm.{path}")
        lw.b.create(sync.Fence, scope=scope)
        return PyConst(0)

    return lower


for _path, _scope in (("threadfence", "device"), ("threadfence_block", "block"),
                      ("threadfence_system", "system")):
    HANDLERS[_path] = _fence(_scope, _path)


_SHUFFLES = {"shfl_sync": warp.ShflIdx, "shfl_down_sync": warp.ShflDown,
             "shfl_up_sync": warp.ShflUp, "shfl_xor_sync": warp.ShflXor}


def _shuffle(path):
    def lower(lw, node, args, kwargs):
        _arity(node, args, 3, 3, f"zm.{path}")
        mask = lw.materialize(args[0], T.u32, node)
        value = lw.materialize(args[1], node=node)
        lane = lw.materialize(args[2], T.i32, node)
        return lw.b.value(_SHUFFLES[path], mask, value, lane)

    return lower


for _path in _SHUFFLES:
    HANDLERS[_path] = _shuffle(_path)

_VOTES = {"ballot_sync": warp.Ballot, "all_sync": warp.VoteAll, "any_sync": warp.VoteAny}


def _vote(path):
    def lower(lw, node, args, kwargs):
        _arity(node, args, 2, 2, f"zm.{path}")
        mask = lw.materialize(args[0], T.u32, node)
        predicate = lw.materialize(lw.to_bool(args[1], node), T.bool_, node)
        return lw.b.value(_VOTES[path], mask, predicate)

    return lower


for _path in _VOTES:
    HANDLERS[_path] = _vote(_path)


@handler("activemask")
def _activemask(lw, node, args, kwargs):
    _arity(node, args, 0, 0, "zm.activemask")
    return lw.b.value(warp.ActiveMask)


# ---- math ----------------------------------------------------------------------------------
UNARY_MATH = {
    "sqrt": zmath.Sqrt, "exp": zmath.Exp, "exp2": zmath.Exp2, "log": zmath.Log,
    "log2": zmath.Log2, "log10": zmath.Log10, "log1p": zmath.Log1p, "expm1": zmath.Expm1,
    "sin": zmath.Sin, "cos": zmath.Cos, "tan": zmath.Tan, "asin": zmath.Asin,
    "acos": zmath.Acos, "atan": zmath.Atan, "sinh": zmath.Sinh, "cosh": zmath.Cosh,
    "tanh": zmath.Tanh, "fabs": zmath.Fabs, "floor": zmath.Floor, "ceil": zmath.Ceil,
    "trunc": zmath.Trunc, "erf": zmath.Erf, "asinh": zmath.Asinh, "acosh": zmath.Acosh,
    "atanh": zmath.Atanh, "cbrt": zmath.Cbrt,
}
BINARY_MATH = {"atan2": zmath.Atan2, "pow": zmath.Pow, "fmod": zmath.Fmod,
               "copysign": zmath.Copysign, "hypot": zmath.Hypot}


def _standin(name: str, numpy_fn):
    """Python's `math.<name>` for Pythons without it: numpy's, raising OverflowError where the
    result overflows as the math module does."""
    def fn(x):
        with np.errstate(all="ignore"):
            y = float(numpy_fn(float(x)))
        if pymath.isinf(y) and pymath.isfinite(x):
            raise OverflowError("math range error")
        return y

    fn.__name__ = fn.__qualname__ = name
    return fn


# math functions newer than the oldest Python zymo supports (cbrt and exp2 came in 3.11):
# kernels may write `math.cbrt` on every Python; where the math module lacks one, its stand-in
# takes its place (for the kernel only: Python's math module is left as it is)
PYMATH_STANDINS = {name: _standin(name, numpy_fn)
                   for name, numpy_fn in (("cbrt", np.cbrt), ("exp2", np.exp2))
                   if not hasattr(pymath, name)}


def python_math(name: str):
    """Python's `math.<name>`, or its stand-in on an older Python; None when neither exists."""
    return getattr(pymath, name, None) or PYMATH_STANDINS.get(name)


def python_attribute(obj, attr: str):
    """`getattr(obj, attr)`, except that Python's math module has every function of
    PYMATH_STANDINS on every Python."""
    if obj is pymath and attr in PYMATH_STANDINS:
        return PYMATH_STANDINS[attr]
    return getattr(obj, attr)


def float_operand(lw, node, value, to: Scalar | None = None) -> tuple[Value, bool]:
    """A float IR value for a math function and whether the result stays weak."""
    if isinstance(value, Weak):
        carrier = value.value if value.value.type.is_float else lw.cast(value.value, T.f64)
        return carrier, True
    if isinstance(value, PyConst):
        return lw.constant(float(value.value), to or T.f32), False
    v = lw.materialize(value, node=node)
    if not v.type.is_float:
        v = lw.cast(v, T.f64 if v.type.bits == 64 else T.f32)
    return v, False


def _unary_math(name):
    def lower(lw, node, args, kwargs):
        _arity(node, args, 1, 1, f"math.{name}")
        if name in COMPLEX_FORMS and _complex_operand(args):
            return COMPLEX_FORMS[name](lw, node, args, kwargs)
        fold = python_math(name)
        if isinstance(args[0], PyConst) and fold is not None:
            try:
                return PyConst(float(fold(args[0].value)))
            except (ValueError, OverflowError):
                pass
        x, weak = float_operand(lw, node, args[0])
        result = lw.b.value(UNARY_MATH[name], x)
        return Weak(result) if weak else result

    return lower


def _binary_math(name):
    def lower(lw, node, args, kwargs):
        _arity(node, args, 2, 2, f"math.{name}")
        if all(isinstance(a, PyConst) for a in args):
            try:
                return PyConst(float(python_math(name)(args[0].value, args[1].value)))
            except (ValueError, OverflowError, ZeroDivisionError):
                pass
        t, weak = lw.join(args[0], args[1], node)
        if not t.is_float:
            t = T.f64 if t.bits == 64 else T.f32
        x = lw.materialize(args[0], t, node) if not isinstance(args[0], PyConst) \
            else lw.constant(float(args[0].value), t)
        y = lw.materialize(args[1], t, node) if not isinstance(args[1], PyConst) \
            else lw.constant(float(args[1].value), t)
        result = lw.b.value(BINARY_MATH[name], x, y)
        return Weak(result) if weak else result

    return lower


for _name in UNARY_MATH:
    HANDLERS[_name] = _unary_math(_name)
for _name in BINARY_MATH:
    HANDLERS[_name] = _binary_math(_name)


def _predicate(op_class):
    def lower(lw, node, args, kwargs):
        _arity(node, args, 1, 1)
        form = COMPLEX_FORMS.get("isnan" if op_class is zmath.IsNan else "isinf")
        if _complex_operand(args) and form is not None:
            return form(lw, node, args, kwargs)
        if isinstance(args[0], PyConst):
            return PyConst(False if isinstance(args[0].value, int) else
                         bool(op_class is zmath.IsNan and pymath.isnan(args[0].value)
                              or op_class is zmath.IsInf and pymath.isinf(args[0].value)))
        x, _ = float_operand(lw, node, args[0])
        return lw.b.value(op_class, x)

    return lower


HANDLERS["isnan"] = _predicate(zmath.IsNan)
HANDLERS["isinf"] = _predicate(zmath.IsInf)


@handler("fma")
def _fma(lw, node, args, kwargs):
    _arity(node, args, 3, 3, "zm.fma")
    t = lw.join_all(args, node)
    if not t.is_float:
        t = T.f64 if t.bits == 64 else T.f32
    a, b, c = (lw.materialize(x, t, node) if not isinstance(x, PyConst)
               else lw.constant(float(x.value), t) for x in args)
    return lw.b.value(zmath.Fma, a, b, c)


def _bits(name, op_class):
    def lower(lw, node, args, kwargs):
        _arity(node, args, 1, 1, f"zm.{name}")
        value = args[0]
        value = lw.materialize(value.value if isinstance(value, Weak) else value, node=node)
        if not value.type.is_int:
            raise UserError(node, f"zm.{name} takes an integer, not {value.type}",
                            "convert with int(...) or zm.u32(...)")
        return lw.b.value(op_class, value)
    return lower


for _name, _cls in (("popc", bits.PopCount), ("clz", bits.LeadingZeros),
                    ("ffs", bits.FirstSet), ("brev", bits.BitReverse)):
    handler(_name)(_bits(_name, _cls))


def _minmax(kind):
    op_class = arith.Min if kind == "min" else arith.Max

    def lower(lw, node, args, kwargs):
        if len(args) == 1 and isinstance(args[0], Tup):
            args = list(args[0].items)
        if len(args) < 2:
            raise UserError(node, f"{kind}() needs at least two arguments")
        result = args[0]
        for other in args[1:]:
            if isinstance(result, PyConst) and isinstance(other, PyConst):
                result = PyConst(getattr(builtins, kind)(result.value, other.value))
                continue
            x, y, _, weak = lw.unify_pair(result, other, node)
            value = lw.b.value(op_class, x, y)
            result = Weak(value) if weak else value
        return result

    return lower


HANDLERS["min"] = _minmax("min")
HANDLERS["max"] = _minmax("max")


@handler("abs")
def _abs(lw, node, args, kwargs):
    _arity(node, args, 1, 1, "abs")
    if _complex_operand(args) and isinstance(args[0], Value):
        return COMPLEX_FORMS["abs"](lw, node, args, kwargs)
    if isinstance(args[0], PyConst):
        return PyConst(abs(args[0].value))
    weak = isinstance(args[0], Weak)
    x = args[0].value if weak else lw.materialize(args[0], node=node)
    result = lw.b.value(zmath.Fabs if x.type.is_float else zmath.Abs, x)
    return Weak(result) if weak else result


# ---- casts ---------------------------------------------------------------------------------
def cast_to(lw, node, value, target: Scalar):
    if _complex_operand([value]) and not target.is_complex:
        raise UserError(node, f"cannot convert a complex number to {target}",
                        "take its .real or .imag, or abs(...)")
    if isinstance(value, PyConst):
        v = value.value
        if target.is_int and isinstance(v, float):
            if not pymath.isfinite(v):
                raise UserError(node, f"cannot convert {v} to {target}")
            v = int(v)
        return lw.constant(v, target)
    if isinstance(value, Weak):
        return lw.cast(value.value, target)
    return lw.cast(lw.materialize(value, node=node), target)


@handler("int")
def _int(lw, node, args, kwargs):
    _arity(node, args, 1, 1, "int")
    if _complex_operand(args):
        raise UserError(node, "int() of a complex number", "take its .real or abs(...) first")
    if isinstance(args[0], PyConst):
        return PyConst(int(args[0].value))
    if isinstance(args[0], Weak):
        return Weak(lw.cast(args[0].value, T.i64))
    x = lw.materialize(args[0], node=node)
    if x.type.is_int:
        return x
    return lw.cast(x, T.i64 if x.type.bits == 64 else T.i32)


@handler("float")
def _float(lw, node, args, kwargs):
    _arity(node, args, 1, 1, "float")
    if _complex_operand(args):
        raise UserError(node, "float() of a complex number", "take its .real or abs(...)")
    if isinstance(args[0], PyConst):
        return PyConst(float(args[0].value))
    if isinstance(args[0], Weak):
        return Weak(lw.cast(args[0].value, T.f64))
    x = lw.materialize(args[0], node=node)
    if x.type.is_float:
        return x
    return lw.cast(x, T.f64 if x.type.bits == 64 else T.f32)


@handler("bool")
def _bool(lw, node, args, kwargs):
    _arity(node, args, 1, 1, "bool")
    return lw.to_bool(args[0], node)


@handler("len")
def _len(lw, node, args, kwargs):
    _arity(node, args, 1, 1, "len")
    if isinstance(args[0], Tup):
        return PyConst(len(args[0].items))
    if isinstance(args[0], Value) and isinstance(args[0].type, Array):
        return lw.shape_of(args[0]).items[0]
    raise UserError(node, "len() of something that is not an array or tuple")


BUILTIN_PATHS = {builtins.abs: "abs", builtins.min: "min", builtins.max: "max",
                 builtins.int: "int", builtins.float: "float", builtins.bool: "bool",
                 builtins.len: "len"}
PYMATH_PATHS = {python_math(name): name for name in list(UNARY_MATH) + list(BINARY_MATH)
                + ["isnan", "isinf"] if python_math(name) is not None}
NUMPY_PATHS = {getattr(np, alias): name for alias, name in [
    ("sqrt", "sqrt"), ("exp", "exp"), ("log", "log"), ("sin", "sin"), ("cos", "cos"),
    ("tan", "tan"), ("tanh", "tanh"), ("arctan2", "atan2"), ("abs", "abs"), ("fabs", "fabs"),
    ("floor", "floor"), ("ceil", "ceil"), ("hypot", "hypot"), ("isnan", "isnan"),
    ("isinf", "isinf"), ("minimum", "min"), ("maximum", "max"), ("power", "pow"),
    ("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan"), ("log1p", "log1p"),
    ("expm1", "expm1"), ("arcsinh", "asinh"), ("arccosh", "acosh"), ("arctanh", "atanh"),
    ("cbrt", "cbrt"), ("sinh", "sinh"), ("cosh", "cosh"), ("log2", "log2"), ("log10", "log10"),
    ("exp2", "exp2")]}
