"""Arithmetic and comparisons of datetime64/timedelta64 values (`ir.types.Time`), as NumPy
defines them: which operations exist and the unit of the result are read off NumPy itself
(the operation applied to sample values of the operands' dtypes), the values are i64 counts
of their unit, converted to the result's (finer) unit before the i64 arithmetic, and NaT
(the smallest i64) stays NaT through arithmetic and compares unequal to everything.
"""
from __future__ import annotations

import operator
import warnings

import numpy as np

from ..ir import types as T
from ..ir.types import Scalar, Time, is_time
from ..ir.values import Value
from ..ops import arith
from .convert import UserError, describe
from .values import PyConst, Weak

NAT = np.iinfo(np.int64).min

_PYTHON_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
               "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod}
_COMPARE_OPS = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
                "eq": operator.eq, "ne": operator.ne}
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
            "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def time_of(lw, v) -> Time | None:
    """The Time type of frontend value `v`, None for anything else."""
    if isinstance(v, Weak):
        v = v.value
    if isinstance(v, Value) and is_time(v.type):
        return v.type
    return None


def involves_time(lw, a, b) -> bool:
    return time_of(lw, a) is not None or time_of(lw, b) is not None


def _sample(lw, v, node):
    """A NumPy scalar of `v`'s type (1 of its unit for times), for asking NumPy."""
    t = time_of(lw, v)
    if t is not None:
        return t.dtype.type(1, t.unit)
    if isinstance(v, PyConst) and not isinstance(v.value, complex):
        return np.int64(1) if isinstance(v.value, (int, bool)) else np.float64(1.0)
    plain = v.value if isinstance(v, Weak) else v
    if isinstance(plain, Value) and isinstance(plain.type, Scalar) and \
            not plain.type.is_complex:
        return plain.type.dtype.type(1)
    raise UserError(node, f"cannot combine a datetime64/timedelta64 with {describe(v)}",
                    "combine datetimes and timedeltas with each other and with numbers")


def _numpy_result(lw, fn, a, b, symbol: str, node) -> np.dtype:
    sa, sb = _sample(lw, a, node), _sample(lw, b, node)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(fn(sa, sb)).dtype
    except TypeError:
        raise UserError(node, f"NumPy has no {np.asarray(sa).dtype} {symbol} "
                              f"{np.asarray(sb).dtype}",
                        "datetime - datetime is a timedelta, datetime +/- timedelta a datetime; "
                        "timedeltas add, subtract, compare and scale by numbers") from None


def _common_unit(*times: Time) -> str:
    """The finest unit among `times` (NumPy converts both operands to it)."""
    finest = np.promote_types(*[np.dtype(f"m8[{t.unit}]") for t in times]) if len(times) > 1 \
        else np.dtype(f"m8[{times[0].unit}]")
    return np.datetime_data(finest)[0]


def _counts(lw, v, t: Time, unit: str, node) -> tuple[Value, Value]:
    """(the i64 count of `unit`s `v` holds, whether it is NaT)."""
    value = lw.cast(v.value if isinstance(v, Weak) else v, T.i64)
    nat = lw.b.value(arith.Cmp, value, lw.constant(NAT, T.i64), predicate="eq")
    factor = int(np.timedelta64(1, t.unit) // np.timedelta64(1, unit))
    if factor != 1:
        value = lw.b.value(arith.Mul, value, lw.constant(factor, T.i64))
    return value, nat


def convert_unit(lw, v: Value, to: Time) -> Value:
    """`v` (a datetime or timedelta) as `to` (NumPy's astype: to a coarser unit it rounds
    toward minus infinity; NaT stays NaT)."""
    if v.type.delta != to.delta:
        raise UserError(None, f"a {v.type} value where a {to} is required",
                        "subtract two datetimes for a timedelta, add a timedelta to a "
                        "datetime for a datetime")
    count = lw.b.value(arith.Cast, v, to=T.i64)
    nat = lw.b.value(arith.Cmp, count, lw.constant(NAT, T.i64), predicate="eq")
    source, target = np.timedelta64(1, v.type.unit), np.timedelta64(1, to.unit)
    if source >= target:
        factor = int(source // target)
        count = lw.b.value(arith.Mul, count, lw.constant(factor, T.i64))
    else:
        count = lw.b.value(arith.FloorDiv, count, lw.constant(int(target // source), T.i64))
    count = lw.b.value(arith.Select, nat, lw.constant(NAT, T.i64), count)
    return lw.b.value(arith.Cast, count, to=to)


def _or(lw, x, y):
    if x is None:
        return y
    return y if y is None else lw.b.value(arith.BitOr, x, y)


def binary(lw, kind: str, a, b, node):
    """`a <kind> b` where at least one operand is a datetime or timedelta."""
    if kind not in _PYTHON_OPS:
        raise UserError(node, f"operator {kind} on a datetime64/timedelta64 value",
                        "use +, -, *, /, //, % and comparisons, as NumPy defines them")
    result = _numpy_result(lw, _PYTHON_OPS[kind], a, b, _SYMBOLS[kind], node)
    ta, tb = time_of(lw, a), time_of(lw, b)
    times = [t for t in (ta, tb) if t is not None]
    out = T.scalar_of_dtype(result)
    unit = out.unit if is_time(out) else _common_unit(*times)
    nat = None
    operands = []
    for v, t in ((a, ta), (b, tb)):
        if t is None:
            operands.append(v)
            continue
        count, is_nat = _counts(lw, v, t, unit, node)
        operands.append(count)
        nat = _or(lw, nat, is_nat)
    x, y = operands
    if ta is not None and tb is not None:        # both counts of one unit
        if kind == "truediv":                    # timedelta / timedelta: a float
            quotient = lw.b.value(arith.Div, lw.cast(x, T.f64), lw.cast(y, T.f64))
            nan = lw.constant(float("nan"), T.f64)
            return lw.b.value(arith.Select, nat, nan, quotient)
        value = lw.binary(kind, x, y, node)
    else:                                        # a timedelta scaled by a number
        number = y if ta is not None else x
        count = x if ta is not None else y
        if lw.type_of(number).is_float or kind == "truediv":
            scaled = lw.binary("mul" if kind == "mul" else "truediv", lw.cast(count, T.f64),
                               lw.materialize(number, T.f64, node), node)
            value = lw.cast(scaled, T.i64)       # truncated, as NumPy casts the double back
        elif kind == "floordiv":
            value = _truncating_div(lw, count, lw.materialize(number, T.i64, node), node)
        else:
            value = lw.binary(kind, count, lw.materialize(number, T.i64, node), node)
    if not is_time(out):
        return value
    value = lw.b.value(arith.Select, nat, lw.constant(NAT, T.i64), lw.cast(value, T.i64))
    return lw.cast(value, out)


def _truncating_div(lw, x: Value, y: Value, node) -> Value:
    """x / y rounded toward zero (NumPy's timedelta // integer)."""
    floor = lw.binary("floordiv", x, y, node)
    rest = lw.binary("mod", x, y, node)
    zero = lw.constant(0, T.i64)
    inexact = lw.b.value(arith.Cmp, rest, zero, predicate="ne")
    signs = lw.b.value(arith.BitXor, lw.b.value(arith.Cmp, x, zero, predicate="lt"),
                       lw.b.value(arith.Cmp, y, zero, predicate="lt"))
    adjust = lw.b.value(arith.BitAnd, inexact, signs)
    return lw.b.value(arith.Select, adjust, lw.binary("add", floor, lw.constant(1, T.i64), node),
                      floor)


def compare(lw, predicate: str, a, b, node):
    """`a <predicate> b` of two datetimes or two timedeltas (NaT is unequal to everything)."""
    _numpy_result(lw, _COMPARE_OPS[predicate], a, b, _SYMBOLS[predicate], node)
    ta, tb = time_of(lw, a), time_of(lw, b)
    if ta is None or tb is None:
        raise UserError(node, f"comparing a {ta or tb} with {describe(b if tb is None else a)}",
                        "compare datetimes with datetimes and timedeltas with timedeltas")
    unit = _common_unit(ta, tb)
    x, nat_x = _counts(lw, a, ta, unit, node)
    y, nat_y = _counts(lw, b, tb, unit, node)
    found = lw.b.value(arith.Cmp, x, y, predicate=predicate)
    either = lw.b.value(arith.BitOr, nat_x, nat_y)
    return lw.b.value(arith.Select, either, lw.constant(predicate == "ne", T.bool_), found)
