"""How each kernel-language name lowers: one handler per intrinsic path, in tables.

A handler is `handler(lowerer, node, args, kwargs) -> frontend value`.
"""
from __future__ import annotations

import builtins
import warnings
import math as pymath

import numpy as np

from ..ir import types as T
from ..ir.types import Array, Scalar
from ..ir.values import Value
from ..lang import intrinsics as lang_intrinsics
from ..lang.intrinsics import Namespace
from ..ops import arith, atomic, bits, memory, output, sync, thread, warp
from ..ops import math as zmath
from .convert import UserError, describe
from .values import Obj, PyConst, Tup, Weak

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
        raise UserError(node, f"{name} needs a literal 1, 2 or 3 (RequireLiteralValue: the "
                              f"number of dimensions is fixed when the kernel compiles)",
                        hint=f"write {name}(1), {name}(2) or {name}(3)")
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
        records = record_dtype(dtype)
        if records is not None:
            return _record_alloc(lw, node, op_class, static_shape(node, shape), records)
        return lw.b.value(op_class, shape=static_shape(node, shape), dtype=parse_dtype(node, dtype))

    return lower


def record_dtype(value) -> np.dtype | None:
    """The structured NumPy dtype `value` names (a dtype, or numba's Record type), else None."""
    from .values import Obj
    obj = value.obj if isinstance(value, Obj) else value
    dtype = obj if isinstance(obj, np.dtype) else getattr(obj, "dtype", None)
    return dtype if isinstance(dtype, np.dtype) and dtype.names else None


def _record_alloc(lw, node, op_class, shape: tuple, dtype: np.dtype):
    """A shared or local array of records: one array per field (a field that is an array of
    numbers adds its dimensions), read and written as a record array argument is."""
    from .values import Rec
    fields, subshapes = [], []
    for name in dtype.names:
        field = dtype.fields[name][0]
        base = field.base if field.subdtype is not None else field
        try:
            element = T.scalar_of_dtype(base)
        except KeyError:
            raise UserError(node, f"field '{name}' of the record dtype is {base}, which "
                                  f"kernels do not take in shared or local arrays",
                            "use fields of numbers or arrays of numbers") from None
        full = shape + field.shape
        if len(full) > 4:
            raise UserError(node, f"field '{name}' makes a {len(full)}-d array; arrays have "
                                  f"1 to 4 dimensions")
        fields.append((name, lw.b.value(op_class, shape=full, dtype=element)))
        subshapes.append(field.shape)
    return Rec(tuple(fields), len(shape), tuple(subshapes))


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
    return constant_array(lw, node, data)


def constant_array(lw, node, data: np.ndarray):
    """A NumPy array frozen into the kernel: a constant array, or for a record array one
    constant array per field (a Rec, read like a record array argument)."""
    if data.dtype.names:
        from .values import Rec
        fields, subshapes = [], []
        for name in data.dtype.names:
            dtype = data.dtype.fields[name][0]
            base = dtype.base if dtype.subdtype is not None else dtype
            if base.names or base not in _CONSTANT_DTYPES:
                raise UserError(node, f"field '{name}' of the constant record array is {base}, "
                                      f"which kernels do not take",
                                "use fields of numbers or arrays of numbers")
            fields.append((name, lw.b.value(memory.ConstArray,
                                            data=np.ascontiguousarray(data[name]))))
            subshapes.append(dtype.shape)
        return Rec(tuple(fields), data.ndim, tuple(subshapes))
    if data.dtype not in _CONSTANT_DTYPES:
        raise UserError(node, f"constant arrays of {data.dtype} are not supported",
                        "use an array of numbers")
    return lw.b.value(memory.ConstArray, data=np.ascontiguousarray(data))


_CONSTANT_DTYPES = {np.dtype(n) for n in ("f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1",
                                          "u2", "u4", "u8", "?", "c8", "c16")}


# ---- atomics -------------------------------------------------------------------------------
_ATOMICS = {"add": atomic.AtomicAdd, "sub": atomic.AtomicSub, "max": atomic.AtomicMax,
            "min": atomic.AtomicMin, "exch": atomic.AtomicExch,
            "nanmax": atomic.AtomicNanMax, "nanmin": atomic.AtomicNanMin,
            "and_": atomic.AtomicAnd, "or_": atomic.AtomicOr, "xor": atomic.AtomicXor,
            "inc": atomic.AtomicInc, "dec": atomic.AtomicDec}


_ATOMIC_HINTS = {
    "inc": "atomic.inc and atomic.dec take arrays of zm.u32 or zm.u64 (np.uint32, np.uint64)",
    "dec": "atomic.inc and atomic.dec take arrays of zm.u32 or zm.u64 (np.uint32, np.uint64)",
    "and_": "bitwise atomics take arrays of int32, int64, uint32 or uint64",
    "or_": "bitwise atomics take arrays of int32, int64, uint32 or uint64",
    "xor": "bitwise atomics take arrays of int32, int64, uint32 or uint64",
    "cas": "compare-and-swap takes arrays of int32, int64, uint32 or uint64",
}


def typed_op(lw, node, op_class, operands, hint: str = ""):
    """`op_class(*operands)`, its typing rule's complaint a UserError at `node`."""
    try:
        return lw.b.value(op_class, *operands)
    except TypeError as error:
        raise UserError(node, str(error), hint) from None


def _atomic(kind):
    def lower(lw, node, args, kwargs):
        _arity(node, args, 3, 3, f"zm.atomic.{kind}")
        array, indices = lw.array_and_indices(node, args[0], args[1])
        value = lw.materialize(args[2], array.type.dtype, node)
        return typed_op(lw, node, _ATOMICS[kind], [array, *indices, value],
                        _ATOMIC_HINTS.get(kind, ""))

    return lower


for _kind in _ATOMICS:
    HANDLERS[f"atomic.{_kind}"] = _atomic(_kind)


@handler("atomic.cas")
def _cas(lw, node, args, kwargs):
    _arity(node, args, 4, 4, "zm.atomic.cas")
    array, indices = lw.array_and_indices(node, args[0], args[1])
    expected = lw.materialize(args[2], array.type.dtype, node)
    new = lw.materialize(args[3], array.type.dtype, node)
    return typed_op(lw, node, atomic.AtomicCas, [array, *indices, expected, new],
                    _ATOMIC_HINTS["cas"])


@handler("atomic.compare_and_swap")
def _compare_and_swap(lw, node, args, kwargs):
    """numba's older spelling: `cas` on element 0 of a 1-d array."""
    _arity(node, args, 3, 3, "zm.atomic.compare_and_swap")
    array = args[0]
    if isinstance(array, Value) and isinstance(array.type, Array) and array.type.ndim != 1:
        raise UserError(node, f"zm.atomic.compare_and_swap works on element 0 of a 1-d array, "
                              f"not a {array.type.ndim}-d one",
                        "use zm.atomic.cas(array, index, old, new) for other elements")
    return _cas(lw, node, [array, PyConst(0), args[1], args[2]], kwargs)


# ---- synchronization and warps -------------------------------------------------------------
@handler("syncthreads")
def _sync(lw, node, args, kwargs):
    _arity(node, args, 0, 0, "zm.syncthreads")
    lw.b.create(sync.Barrier)
    return PyConst(0)


@handler("cg.this_grid")
def _this_grid(lw, node, args, kwargs):
    _arity(node, args, 0, 0, "cg.this_grid")
    return Obj(lang_intrinsics.GRID_GROUP)


@handler("cg.grid_sync")
def _grid_sync(lw, node, args, kwargs):
    _arity(node, args, 0, 0, "grid.sync")
    lw.b.create(sync.GridBarrier)
    return PyConst(0)


@handler("print")
def _print(lw, node, args, kwargs):
    """print(...) as numba's: strings and compile-time numbers go into the format, run-time
    numbers are printf conversions (output.conversion), tuples and dim3s are printed as
    Python prints them; `sep` and `end` as Python's. Past 32 values (vprintf's limit) the
    format itself is printed, with a warning, as numba does."""
    sep, end = (_print_text(lw, node, kwargs.pop(key, Obj(default)), key)
                for key, default in (("sep", " "), ("end", "\n")))
    if kwargs:
        raise UserError(node, f"print() takes sep= and end=, not {', '.join(kwargs)}=")
    values: list = []
    text = sep.join(_print_piece(lw, node, arg, values) for arg in args) + end
    if len(values) > output.MAX_VALUES:
        warnings.warn(f"{lw.loc(node)}: CUDA print() cannot print more than "
                      f"{output.MAX_VALUES} items. The raw format string will be emitted by "
                      "the kernel instead.", stacklevel=2)
        text, values = text.replace("%", "%%"), []
    lw.b.create(output.Print, *values, format=text)
    return PyConst(0)


def _print_piece(lw, node, arg, values: list) -> str:
    """The format text of one printed argument; the run-time values it needs go to `values`."""
    if isinstance(arg, Obj) and isinstance(arg.obj, str):
        return arg.obj.replace("%", "%%")
    if isinstance(arg, PyConst):
        return str(arg.value).replace("%", "%%")
    if isinstance(arg, Obj) and isinstance(arg.obj, Namespace) and arg.obj.path in _SPECIAL:
        arg = Tup(tuple(special(lw, f"{arg.obj.path}.{axis}") for axis in "xyz"))
    if isinstance(arg, Tup):
        items = [_print_piece(lw, node, item, values) for item in arg.items]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(arg, Value) and not isinstance(arg.type, Scalar):
        raise UserError(node, f"print() takes numbers, strings and tuples, not {arg.type}",
                        "print elements: print(x[0], x[1])")
    value = lw.materialize(arg, node=node)
    values.append(value)
    return output.conversion(value.type)


def _print_text(lw, node, value, key: str) -> str:
    if isinstance(value, Obj) and isinstance(value.obj, str):
        return value.obj.replace("%", "%%")
    raise UserError(node, f"print's {key}= must be a string constant")


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


@handler("eq_sync")
def _vote_uniform(lw, node, args, kwargs):
    """numba's eq_sync(mask, p): whether p is the same in every lane of the mask (PTX's
    vote.uni): all of them hold it, or none does."""
    _arity(node, args, 2, 2, "zm.eq_sync")
    mask = lw.materialize(args[0], T.u32, node)
    predicate = lw.materialize(lw.to_bool(args[1], node), T.bool_, node)
    every = lw.b.value(warp.VoteAll, mask, predicate)
    none = lw.b.value(arith.Not, lw.b.value(warp.VoteAny, mask, predicate))
    return lw.b.value(arith.BitOr, every, none)


_BLOCK_VOTES = {"syncthreads_count": sync.BarrierCount, "syncthreads_and": sync.BarrierAnd,
                "syncthreads_or": sync.BarrierOr}


def _block_vote(path):
    def lower(lw, node, args, kwargs):
        _arity(node, args, 1, 1, f"zm.{path}")
        predicate = lw.materialize(lw.to_bool(args[0], node), T.bool_, node)
        return lw.b.value(_BLOCK_VOTES[path], predicate)

    return lower


for _path in _BLOCK_VOTES:
    HANDLERS[_path] = _block_vote(_path)


@handler("syncwarp")
def _syncwarp(lw, node, args, kwargs):
    if set(kwargs) - {"mask"} or len(args) + len(kwargs) > 1:
        raise UserError(node, "zm.syncwarp takes one argument, the mask of the lanes that "
                              "wait for each other", "zm.syncwarp() or zm.syncwarp(mask)")
    given = args[0] if args else kwargs.get("mask", PyConst(0xFFFFFFFF))
    lw.b.create(warp.WarpSync, lw.materialize(given, T.u32, node))
    return PyConst(0)


def _match(path, op_class):
    def lower(lw, node, args, kwargs):
        _arity(node, args, 2, 2, f"zm.{path}")
        mask = lw.materialize(args[0], T.u32, node)
        value = lw.materialize(args[1].value if isinstance(args[1], Weak) else args[1],
                               node=node)
        try:
            op = lw.b.create(op_class, mask, value)
        except TypeError as error:
            raise UserError(node, f"zm.{path}: {error}",
                            "convert the value with zm.i32(...), zm.i64(...) or zm.f32(...)") \
                from None
        return op.result if len(op.results) == 1 else Tup(tuple(op.results))

    return lower


HANDLERS["match_any_sync"] = _match("match_any_sync", warp.MatchAny)
HANDLERS["match_all_sync"] = _match("match_all_sync", warp.MatchAll)


@handler("lanemask_lt")
def _lanemask_lt(lw, node, args, kwargs):
    """The lanes below the calling one: (1 << laneid) - 1, as PTX's %lanemask_lt."""
    _arity(node, args, 0, 0, "zm.lanemask_lt")
    lane = lw.cast(lane_id(lw), T.u32)
    one = lw.constant(1, T.u32)
    return lw.b.value(arith.Sub, lw.b.value(arith.Shl, one, lane), one)


@handler("selp")
def _selp(lw, node, args, kwargs):
    """numba's `selp(predicate, a, b)`: a where the predicate holds, else b."""
    _arity(node, args, 3, 3, "zm.selp")
    cond = lw.to_bool(args[0], node)
    if isinstance(cond, PyConst):
        return args[1] if cond.value else args[2]
    x, y, _, weak = lw.unify_pair(args[1], args[2], node)
    value = lw.b.value(arith.Select, lw.materialize(cond, T.bool_, node), x, y)
    return Weak(value) if weak else value


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
    "gamma": zmath.Tgamma, "lgamma": zmath.Lgamma, "erfc": zmath.Erfc, "rint": zmath.Rint,
}
BINARY_MATH = {"atan2": zmath.Atan2, "pow": zmath.Pow, "fmod": zmath.Fmod,
               "copysign": zmath.Copysign, "hypot": zmath.Hypot,
               "remainder": zmath.Remainder, "nextafter": zmath.Nextafter}


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


@handler("isfinite")
def _isfinite(lw, node, args, kwargs):
    _arity(node, args, 1, 1, "math.isfinite")
    if isinstance(args[0], PyConst):
        return PyConst(pymath.isfinite(args[0].value))
    x = args[0].value if isinstance(args[0], Weak) else lw.materialize(args[0], node=node)
    if not x.type.is_float:
        return PyConst(True)
    return lw.b.value(zmath.IsFinite, x)


def _scaled(name, factor):
    """math.degrees / math.radians: x times the constant, rounded once (as CPython, NumPy and
    numba compute them)."""
    def lower(lw, node, args, kwargs):
        _arity(node, args, 1, 1, f"math.{name}")
        if isinstance(args[0], PyConst):
            return PyConst(float(args[0].value) * factor)
        x, weak = float_operand(lw, node, args[0])
        result = lw.b.value(arith.Mul, x, lw.constant(factor, x.type))
        return Weak(result) if weak else result

    return lower


HANDLERS["degrees"] = _scaled("degrees", 180.0 / pymath.pi)
HANDLERS["radians"] = _scaled("radians", pymath.pi / 180.0)


@handler("ldexp")
def _ldexp(lw, node, args, kwargs):
    _arity(node, args, 2, 2, "math.ldexp")
    if all(isinstance(a, PyConst) for a in args) and isinstance(args[1].value, int):
        try:
            return PyConst(pymath.ldexp(float(args[0].value), args[1].value))
        except OverflowError:
            pass
    x, weak = float_operand(lw, node, args[0])
    exponent = args[1].value if isinstance(args[1], Weak) else args[1]
    n = exponent if isinstance(exponent, PyConst) else lw.materialize(exponent, node=node)
    if isinstance(n, PyConst) and isinstance(n.value, int):
        n = lw.constant(max(-(1 << 31), min(n.value, (1 << 31) - 1)), T.i32)
    elif isinstance(n, PyConst) or not n.type.is_int:
        raise UserError(node, "math.ldexp's exponent is an integer", "convert with int(...)")
    result = lw.b.value(zmath.Ldexp, x, lw.cast(n, T.i32))
    return Weak(result) if weak else result


@handler("frexp")
def _frexp(lw, node, args, kwargs):
    """(mantissa, exponent): a float of x's type and an i32."""
    _arity(node, args, 1, 1, "math.frexp")
    if isinstance(args[0], PyConst):
        mantissa, exponent = pymath.frexp(float(args[0].value))
        return Tup((PyConst(mantissa), PyConst(exponent)))
    x, weak = float_operand(lw, node, args[0])
    op = lw.b.create(zmath.Frexp, x)
    return Tup((Weak(op.mantissa) if weak else op.mantissa, op.exponent))


@handler("modf")
def _modf(lw, node, args, kwargs):
    """(fractional part, integer part), both with x's sign; (+-0, +-inf) for an infinity."""
    _arity(node, args, 1, 1, "math.modf")
    if isinstance(args[0], PyConst):
        return Tup(tuple(PyConst(v) for v in pymath.modf(float(args[0].value))))
    x, weak = float_operand(lw, node, args[0])
    whole = lw.b.value(zmath.Trunc, x)
    rest = lw.b.value(arith.Select, lw.b.value(zmath.IsInf, x), lw.constant(0.0, x.type),
                      lw.b.value(arith.Sub, x, whole))
    fraction = lw.b.value(zmath.Copysign, rest, x)
    return Tup((Weak(fraction), Weak(whole)) if weak else (fraction, whole))


def _static_digits(lw, node, args, name, runtime=False):
    """round's number of digits as a Python int; with `runtime`, an integer value known only
    at run time comes back as that value."""
    if len(args) < 2:
        return None
    digits = args[1]
    if isinstance(digits, Weak):
        digits = digits.value
    if runtime and isinstance(digits, Value) and isinstance(digits.type, Scalar) and \
            digits.type.is_int:
        return digits
    if not (isinstance(digits, PyConst) and isinstance(digits.value, int)):
        raise UserError(node, f"{name}'s number of digits must be known at compile time",
                        "use an integer literal or a module-level integer constant")
    return digits.value


def _powers_of_ten(digits: int) -> tuple[float, float]:
    """(p1, p2) with p1 * p2 = 10**digits, each finite (CPython's split at 10**22)."""
    if digits > 22:
        return 10.0 ** (digits - 22), 1e22
    return 10.0 ** digits, 1.0


@handler("round")
def _round(lw, node, args, kwargs):
    """Python's round: round(x) the nearest integer (ties to even) as an i64; round(x, n) a
    float, computed as CPython does where its correctly rounded path is not at hand (and
    numba does on the GPU): scaled by 10**n in float64, rounded to an integer, scaled back."""
    _arity(node, args, 1, 2, "round")
    digits = _static_digits(lw, node, args, "round", runtime=True)
    x = args[0]
    if isinstance(digits, Value):
        return _round_runtime(lw, node, x, digits)
    if isinstance(x, PyConst):
        return PyConst(round(x.value) if digits is None else round(x.value, digits))
    value = x.value if isinstance(x, Weak) else lw.materialize(x, node=node)
    if value.type.is_int:
        if digits is not None and digits < 0:
            raise UserError(node, "round(integer, negative digits) is not supported in kernels",
                            "round a float: round(float(x), n)")
        return x
    if digits is None:
        return lw.cast(lw.b.value(zmath.Rint, value), T.i64)
    wide = lw.cast(value, T.f64)
    const = lambda c: lw.constant(c, T.f64)   # noqa: E731
    mul = lambda a, b: lw.b.value(arith.Mul, a, b)   # noqa: E731
    div = lambda a, b: lw.b.value(arith.Div, a, b)   # noqa: E731
    if digits >= 0:
        first, second = _powers_of_ten(digits)
        scaled = mul(mul(wide, const(first)), const(second))
        rounded = div(div(lw.b.value(zmath.Rint, scaled), const(second)), const(first))
        # too large to scale: already an integer at this many digits
        rounded = lw.b.value(arith.Select, lw.b.value(zmath.IsInf, scaled), wide, rounded)
    else:
        power = const(10.0 ** -digits)
        rounded = mul(lw.b.value(zmath.Rint, div(wide, power)), power)
    keep = lw.b.value(arith.Not, lw.b.value(zmath.IsFinite, wide))
    result = lw.cast(lw.b.value(arith.Select, keep, wide, rounded), value.type)
    return Weak(result) if isinstance(x, Weak) else result


# 10**k for k = 0 .. 330 as float64 (exact up to 10**22, correctly rounded above, inf past
# 10**308): round's scale factors for a number of digits known only at run time
_TENS = np.array([10.0 ** k if k <= 308 else np.inf for k in range(331)])


def _round_runtime(lw, node, x, digits: Value):
    """round(x, n) for an integer n known at run time: the compile-time algorithm with its
    powers of ten looked up, n > 22 scaled in two steps (10**(n-22), then 1e22); a scale that
    overflows leaves x as it is (it has no digits there), a negative n past 10**308 gives a
    zero of x's sign; an integer x comes back unchanged for n >= 0 and rounded to a multiple
    of 10**-n otherwise."""
    value = x.value if isinstance(x, Weak) else lw.materialize(x, node=node)
    n = lw.cast(digits, T.i64)
    i64 = lambda c: lw.constant(c, T.i64)   # noqa: E731
    f64 = lambda c: lw.constant(c, T.f64)   # noqa: E731
    sel = lambda c, a, b: lw.b.value(arith.Select, c, a, b)   # noqa: E731
    mul = lambda a, b: lw.b.value(arith.Mul, a, b)   # noqa: E731
    div = lambda a, b: lw.b.value(arith.Div, a, b)   # noqa: E731
    negative = lw.b.value(arith.Cmp, n, i64(0), predicate="lt")
    size = sel(negative, lw.b.value(arith.Sub, i64(0), n), n)
    split = lw.b.value(arith.Cmp, size, i64(22), predicate="gt")
    split = sel(negative, lw.constant(False, T.bool_), split)
    index = sel(split, lw.b.value(arith.Sub, size, i64(22)), size)
    index = sel(lw.b.value(arith.Cmp, index, i64(330), predicate="gt"), i64(330), index)
    tens = lw.b.value(memory.ConstArray, data=_TENS)
    first = lw.b.value(memory.Load, tens, index)
    second = sel(split, f64(1e22), f64(1.0))
    if value.type.is_int:
        wide = lw.cast(value, T.f64)
        down = mul(lw.b.value(zmath.Rint, div(wide, first)), first)
        result = sel(negative, lw.cast(down, value.type), value)
        return Weak(result) if isinstance(x, Weak) else result
    wide = lw.cast(value, T.f64)
    scaled = mul(mul(wide, first), second)
    up = div(div(lw.b.value(zmath.Rint, scaled), second), first)
    up = sel(lw.b.value(zmath.IsFinite, scaled), up, wide)
    down = mul(lw.b.value(zmath.Rint, div(wide, first)), first)
    down = sel(lw.b.value(zmath.IsInf, first), mul(wide, f64(0.0)), down)
    rounded = sel(negative, down, up)
    keep = lw.b.value(arith.Not, lw.b.value(zmath.IsFinite, wide))
    result = lw.cast(sel(keep, wide, rounded), value.type)
    return Weak(result) if isinstance(x, Weak) else result


@handler("np_round")
def _np_round(lw, node, args, kwargs):
    """np.round / np.around of a scalar: rint(x * 10**n) / 10**n in x's type (NumPy's)."""
    if "decimals" in kwargs:
        args = [*args, kwargs["decimals"]]
    _arity(node, args, 1, 2, "np.round")
    digits = _static_digits(lw, node, args, "np.round") or 0
    if isinstance(args[0], PyConst):
        return PyConst(float(np.round(args[0].value, digits)))
    x, weak = float_operand(lw, node, args[0])
    if digits >= 0:
        power = lw.constant(10.0 ** digits, x.type)
        result = lw.b.value(arith.Div, lw.b.value(zmath.Rint, lw.b.value(arith.Mul, x, power)),
                            power) if digits else lw.b.value(zmath.Rint, x)
    else:
        power = lw.constant(10.0 ** -digits, x.type)
        result = lw.b.value(arith.Mul, lw.b.value(zmath.Rint, lw.b.value(arith.Div, x, power)),
                            power)
    return Weak(result) if weak else result


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
            if _complex_operand([result, other]):
                result = COMPLEX_FORMS["extremum"](lw, kind, result, other, node)
                continue
            x, y, _, weak = lw.unify_pair(result, other, node)
            value = lw.b.value(op_class, x, y)
            result = Weak(value) if weak else value
        return result

    return lower


HANDLERS["min"] = _minmax("min")
HANDLERS["max"] = _minmax("max")


def _np_extremum(kind: str):
    """np.maximum / np.minimum: as max / min (whose floats ignore a NaN, as C's fmax and
    np.fmax do), except that a NaN operand is the result, the first if both are."""
    plain = _minmax(kind)

    def lower(lw, node, args, kwargs):
        _arity(node, args, 2, 2, f"np.{'maximum' if kind == 'max' else 'minimum'}")
        result = plain(lw, node, args, kwargs)
        if _complex_operand(args) or isinstance(result, PyConst):
            return result   # complex extrema propagate NaNs already
        weak = isinstance(result, Weak)
        value = result.value if weak else result
        if not value.type.is_float:
            return result
        a, b = (lw.cast(lw.materialize(x.value if isinstance(x, Weak) else x, node=node),
                        value.type) for x in args)
        for nan in (b, a):   # a is tested last: it wins when both are NaN
            value = lw.b.value(arith.Select, lw.b.value(arith.Cmp, nan, nan, predicate="ne"),
                               nan, value)
        return Weak(value) if weak else value

    return lower


HANDLERS["np_maximum"] = _np_extremum("max")
HANDLERS["np_minimum"] = _np_extremum("min")


def _logical(kind: str):
    """np.logical_and/or/xor: both operands evaluated, as truth values."""
    def lower(lw, node, args, kwargs):
        _arity(node, args, 2, 2, f"np.logical_{kind}")
        a, b = (lw.to_bool(x, node) for x in args)
        if isinstance(a, PyConst) and isinstance(b, PyConst):
            return PyConst({"and": a.value and b.value, "or": a.value or b.value,
                            "xor": a.value != b.value}[kind])
        a, b = (lw.materialize(x, T.bool_, node) for x in (a, b))
        if kind == "xor":
            return lw.b.value(arith.Cmp, a, b, predicate="ne")
        return lw.binary(kind, a, b, node)

    return lower


for _kind in ("and", "or", "xor"):
    HANDLERS[f"logical_{_kind}"] = _logical(_kind)


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


@handler("tuple")
def _tuple(lw, node, args, kwargs):
    """`tuple(t)` of a tuple known at compile time (a namedtuple's or vector's elements)."""
    _arity(node, args, 0, 1, "tuple")
    if not args:
        return Tup(())
    if isinstance(args[0], Tup):
        return Tup(args[0].items)
    raise UserError(node, "tuple() takes a tuple in kernels",
                    "write the elements out: (a[0], a[1])")


@handler("len")
def _len(lw, node, args, kwargs):
    _arity(node, args, 1, 1, "len")
    if isinstance(args[0], Tup):
        return PyConst(len(args[0].items))
    if isinstance(args[0], Value) and isinstance(args[0].type, Array):
        return lw.shape_of(args[0]).items[0]
    from .values import Rec, View
    if isinstance(args[0], View):
        return next(axis[3] for axis in args[0].axes if axis[0] == "slice")
    if isinstance(args[0], Rec):
        return lw.shape_of(args[0].first).items[0]
    raise UserError(node, "len() of something that is not an array or tuple")


@handler("literal_unroll")
def _literal_unroll(lw, node, args, kwargs):
    """The container itself: a `for` over a tuple is unrolled already (each item typed on its
    own), and one over an array or view is a loop over its first axis."""
    _arity(node, args, 1, 1, "literal_unroll")
    from .values import Tup, View
    container = args[0]
    if isinstance(container, Tup) or isinstance(container, View) or \
            isinstance(container, Value) and isinstance(container.type, Array):
        return container
    raise UserError(node, f"literal_unroll() of {describe(container)}",
                    "pass a tuple (its items may differ in type) or an array")


class BoundIntrinsic:
    """A method of a kernel value (`x.bit_count`): the intrinsic at `path` with `receiver`
    as its first argument."""

    def __init__(self, path: str, receiver):
        self.path = path
        self.receiver = receiver


INT_METHODS = {"bit_count": "popc"}   # methods of Python's int that kernels may call


BUILTIN_PATHS = {builtins.abs: "abs", builtins.min: "min", builtins.max: "max",
                 builtins.int: "int", builtins.float: "float", builtins.bool: "bool",
                 builtins.len: "len", builtins.tuple: "tuple", builtins.print: "print",
                 builtins.round: "round",
                 int.bit_count: "popc"}
PYMATH_PATHS = {python_math(name): name for name in list(UNARY_MATH) + list(BINARY_MATH)
                + ["isnan", "isinf", "isfinite", "degrees", "radians", "ldexp", "frexp",
                   "modf"] if python_math(name) is not None}
NUMPY_PATHS = {getattr(np, alias): name for alias, name in [
    ("sqrt", "sqrt"), ("exp", "exp"), ("log", "log"), ("sin", "sin"), ("cos", "cos"),
    ("tan", "tan"), ("tanh", "tanh"), ("arctan2", "atan2"), ("abs", "abs"), ("fabs", "fabs"),
    ("floor", "floor"), ("ceil", "ceil"), ("hypot", "hypot"), ("isnan", "isnan"),
    ("isinf", "isinf"), ("minimum", "np_minimum"), ("maximum", "np_maximum"),
    ("fmin", "min"), ("fmax", "max"), ("logical_and", "logical_and"),
    ("logical_or", "logical_or"), ("logical_xor", "logical_xor"), ("power", "pow"),
    ("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan"), ("log1p", "log1p"),
    ("expm1", "expm1"), ("arcsinh", "asinh"), ("arccosh", "acosh"), ("arctanh", "atanh"),
    ("cbrt", "cbrt"), ("sinh", "sinh"), ("cosh", "cosh"), ("log2", "log2"), ("log10", "log10"),
    ("exp2", "exp2"), ("isfinite", "isfinite"), ("degrees", "degrees"),
    ("rad2deg", "degrees"), ("radians", "radians"), ("deg2rad", "radians"), ("rint", "rint"),
    ("round", "np_round"), ("around", "np_round"), ("ldexp", "ldexp"), ("frexp", "frexp"),
    ("modf", "modf"), ("nextafter", "nextafter")] if hasattr(np, alias)}
