"""Typing and conversion of frontend values: materializing weak scalars, casts, and the
binary/unary operator tables with their result-type rules."""
from __future__ import annotations

import ast
import operator

from ..ir import types as T
from ..ir.types import Scalar
from ..ir.values import Value
from ..ops import arith, math as zmath
from .values import Member, PyConst, Weak, carrier_type, default_type, promote, weak_join


class UserError(Exception):
    """A problem in the user's kernel at `node`; collected into a Diagnostic by the lowerer."""

    def __init__(self, node: ast.AST | None, message: str, hint: str = ""):
        super().__init__(message)
        self.node = node
        self.message = message
        self.hint = hint


def wrap_int(value: int, t: Scalar) -> int:
    if t.is_bool:
        return int(bool(value))
    value &= (1 << t.bits) - 1
    if t.is_signed and value >= 1 << (t.bits - 1):
        value -= 1 << t.bits
    return value


class Converter:
    """Mixed into the lowerer; needs `self.b` (a Builder)."""

    b: object

    def constant(self, value, t: Scalar) -> Value:
        if isinstance(value, complex) and not t.is_complex:
            raise UserError(None, f"complex constant {value!r} used where {t} is required",
                            "take its .real, or make the other operand complex")
        if t.is_complex:
            value = complex(value)
        elif t.is_float:
            value = float(value)
        elif t.is_bool:
            value = bool(value)
        else:
            value = wrap_int(int(value), t)
        return self.b.value(arith.Constant, value=value, type=t)

    def cast(self, v: Value, to: Scalar) -> Value:
        if v.type == to:
            return v
        if T.is_time(v.type) and T.is_time(to):
            from .datetimes import convert_unit   # (builds on this module)
            return convert_unit(self, v, to)
        return self.b.value(arith.Cast, v, to=to)

    def type_of(self, v) -> Scalar:
        v = _plain(v)
        if isinstance(v, Value):
            return v.type
        if isinstance(v, Weak):
            return v.value.type
        return default_type(v)

    def materialize(self, v, to: Scalar | None = None, node=None) -> Value:
        """An IR value of type `to` (or the value's own/default type) for a scalar."""
        v = _plain(v)
        if isinstance(v, PyConst):
            target = to or default_type(v)
            if isinstance(v.value, complex) and not target.is_complex:
                raise UserError(node, f"complex constant {v.value!r} used where {target} is "
                                      "required", "take its .real, or make the other operand "
                                      "complex")
            if isinstance(v.value, float) and target.is_int:
                raise UserError(node, f"float constant {v.value!r} used where {target} is required",
                                "write an integer, or convert explicitly with int(...)")
            if target.is_int and not isinstance(v.value, bool) and not \
                    -(1 << (target.bits - 1)) <= v.value < (1 << target.bits):
                # in its bits as signed or unsigned it wraps as C would (hash constants);
                # beyond them it would silently lose bits
                raise UserError(node, f"the integer {v.value} does not fit {target}, the type it "
                                      f"meets here", "convert the other operand to a wider type "
                                      "first, e.g. zm.i64(x)")
            return self.constant(v.value, target)
        if isinstance(v, Weak):
            return self.cast(v.value, to or default_type(v))
        if isinstance(v, Value) and isinstance(v.type, Scalar):
            if to is not None and v.type.is_complex and not to.is_complex:
                raise UserError(node, f"a {v.type} value where {to} is required",
                                "take its .real or .imag, or abs(...)")
            return self.cast(v, to) if to is not None else v
        raise UserError(node, f"expected a number here, got {describe(v)}")

    def to_bool(self, v, node=None):
        """Python truthiness: a PyConst bool or an IR bool."""
        v = _plain(v)
        if isinstance(v, PyConst):
            return PyConst(bool(v.value))
        value = self.materialize(v, node=node)
        if value.type == T.bool_:
            return value
        zero = self.constant(0, value.type)
        return self.b.value(arith.Cmp, value, zero, predicate="ne")

    def join(self, a, b, node=None) -> tuple[Scalar, bool]:
        """The common type of two scalars and whether the result stays weak."""
        a, b = _plain(a), _plain(b)
        if _complex(a) or _complex(b):
            from .complexes import common_type   # (complexes.py builds on this module)
            return common_type(self, [a, b], node), False
        weak_a = isinstance(a, (PyConst, Weak)) and not _is_bool_const(a)
        weak_b = isinstance(b, (PyConst, Weak)) and not _is_bool_const(b)
        if weak_a and weak_b:
            return carrier_type(_weak_float(a) or _weak_float(b)), True
        if weak_a:
            return weak_join(_weak_float(a), self.type_of(b)), False
        if weak_b:
            return weak_join(_weak_float(b), self.type_of(a)), False
        return promote(self.type_of(a), self.type_of(b)), False

    def join_all(self, values, node=None) -> Scalar:
        """The common strong type of several scalars (weak ones take the others' type)."""
        strong = [self.type_of(v) for v in values if not isinstance(v, (PyConst, Weak))
                  or _is_bool_const(v)]
        weak_float = any(isinstance(v, (PyConst, Weak)) and not _is_bool_const(v) and v.is_float
                         for v in values)
        if not strong:
            return T.f32 if weak_float else T.i32
        t = strong[0]
        for other in strong[1:]:
            t = promote(t, other)
        return weak_join(weak_float, t) if weak_float else t

    def unify_pair(self, a, b, node=None) -> tuple[Value, Value, Scalar, bool]:
        t, weak = self.join(a, b, node)
        return self.materialize(a, t, node), self.materialize(b, t, node), t, weak

    # ---- operators -------------------------------------------------------------------------
    def binary(self, kind: str, a, b, node=None):
        a, b = _plain(a), _plain(b)
        if isinstance(a, PyConst) and isinstance(b, PyConst):
            return PyConst(_fold(kind, a.value, b.value, node))
        if _complex(a) or _complex(b):
            from .complexes import binary   # (complexes.py builds on this module)
            return binary(self, kind, a, b, node)
        if _time(a) or _time(b):
            from .datetimes import binary as time_binary   # (builds on this module)
            return time_binary(self, kind, a, b, node)
        if kind == "pow":
            return self.power(a, b, node)
        if kind in ("lshift", "rshift"):
            left = self.materialize(a, node=node) if not isinstance(a, Weak) else a.value
            if left.type.is_float:
                raise UserError(node, "shift of a float", "shift integers only")
            right = self.materialize(b, left.type, node)
            result = self.b.value(BINARY_OPS[kind], left, right)
            return Weak(result) if isinstance(a, Weak) else result
        x, y, t, weak = self.unify_pair(a, b, node)
        if kind in ("truediv", "floordiv", "mod"):
            from .raising import check_divisor   # (raising.py builds on this module)
            check_divisor(self, kind, b, y, not t.is_float)
        if kind == "truediv" and not t.is_float:
            t = T.f64 if t.bits == 64 else T.f32
            x, y = self.cast(x, t), self.cast(y, t)
        if kind in ("and", "or", "xor") and t.is_float:
            raise UserError(node, f"bitwise operator on {t}", "use integers or bools")
        if t.is_bool and kind not in ("and", "or", "xor"):
            x, y, t = self.cast(x, T.i32), self.cast(y, T.i32), T.i32
        result = self.b.value(BINARY_OPS[kind], x, y)
        return Weak(result) if weak else result

    def compare(self, predicate: str, a, b, node=None):
        if isinstance(a, Member) or isinstance(b, Member):
            from .enums import compare   # (enums.py builds on this module)
            return compare(self, predicate, a, b, node)
        if isinstance(a, PyConst) and isinstance(b, PyConst):
            return PyConst(bool(COMPARE_FUNCS[predicate](a.value, b.value)))
        if _time(a) or _time(b):
            from .datetimes import compare as time_compare   # (builds on this module)
            return time_compare(self, predicate, a, b, node)
        decided = _beyond_range(predicate, a, b, self)
        if decided is not None:
            return PyConst(decided)
        if (_complex(a) or _complex(b)) and predicate not in ("eq", "ne"):
            raise UserError(node, "complex numbers are not ordered",
                            "compare abs(z), or the .real parts")
        mixed = self._mixed_64(predicate, a, b)
        if mixed is not None:
            return mixed
        x, y, _, _ = self.unify_pair(a, b, node)
        return self.b.value(arith.Cmp, x, y, predicate=predicate)

    def _mixed_64(self, predicate: str, a, b):
        """u64 against i64, which share no type holding both: a negative i64 is below every
        u64, else both compare as u64 (NumPy gives the same answers)."""
        if isinstance(a, (PyConst, Weak)) or isinstance(b, (PyConst, Weak)):
            return None
        ta, tb = self.type_of(a), self.type_of(b)
        if not (ta.is_int and tb.is_int and ta.bits == tb.bits == 64
                and ta.is_signed != tb.is_signed):
            return None
        if ta.is_signed:      # the unsigned one on the left
            a, b, predicate = b, a, _MIRRORED[predicate]
        negative = self.b.value(arith.Cmp, b, self.constant(0, T.i64), predicate="lt")
        unsigned = self.b.value(arith.Cmp, a, self.cast(b, T.u64), predicate=predicate)
        above = self.constant(predicate in ("gt", "ge", "ne"), T.bool_)
        return self.b.value(arith.Select, negative, above, unsigned)

    def power(self, a, b, node=None):
        if isinstance(b, PyConst) and isinstance(b.value, int) and not isinstance(b.value, bool) \
                and -4 <= b.value <= 8:
            n = b.value
            base = a if not isinstance(a, PyConst) else self.materialize(a, node=node)
            weak = isinstance(base, Weak)
            value = self.materialize(base, node=node) if not weak else base.value
            if n < 0 and not value.type.is_float:
                raise UserError(node, "negative integer power of an integer", "use floats")
            if n == 0:
                result = self.constant(1, value.type)
            else:
                result = value
                for _ in range(abs(n) - 1):
                    result = self.b.value(arith.Mul, result, value)
                if n < 0:
                    result = self.b.value(arith.Div, self.constant(1.0, value.type), result)
            return Weak(result) if weak else result
        x, y, t, weak = self.unify_pair(a, b, node)
        if not t.is_float:
            raise UserError(node, "integer power with a run-time or large exponent",
                            "convert the base to a float (e.g. float(x) ** n) or multiply")
        result = self.b.value(zmath.Pow, x, y)
        return Weak(result) if weak else result

    def unary(self, kind: str, a, node=None):
        a = _plain(a)
        if isinstance(a, PyConst):
            return PyConst(_fold_unary(kind, a.value, node))
        if kind == "not":
            truth = self.to_bool(a, node)
            return self.b.value(arith.Not, truth)
        weak = isinstance(a, Weak)
        value = a.value if weak else self.materialize(a, node=node)
        if kind == "neg":
            if value.type.is_bool:
                value = self.cast(value, T.i32)
            result = self.b.value(arith.Neg, value)
        elif kind == "invert":
            if value.type.is_float or value.type.is_complex:
                raise UserError(node, "bitwise ~ of a float", "use integers")
            result = self.b.value(arith.Invert, value) if not value.type.is_bool \
                else self.b.value(arith.Not, value)
        else:  # plus
            result = value
        return Weak(result) if weak else result


def _complex(v) -> bool:
    """Whether frontend value `v` is a complex number (a constant or an IR value)."""
    if isinstance(v, PyConst):
        return isinstance(v.value, complex)
    return isinstance(v, Value) and isinstance(v.type, Scalar) and v.type.is_complex


def _time(v) -> bool:
    """Whether frontend value `v` is a datetime64 or timedelta64 (`ir.types.Time`)."""
    v = v.value if isinstance(v, Weak) else v
    return isinstance(v, Value) and T.is_time(v.type)


def _is_bool_const(v) -> bool:
    return isinstance(v, PyConst) and isinstance(v.value, bool)


def _weak_float(v) -> bool:
    return v.is_float


BINARY_OPS = {
    "add": arith.Add, "sub": arith.Sub, "mul": arith.Mul, "truediv": arith.Div,
    "floordiv": arith.FloorDiv, "mod": arith.Mod, "and": arith.BitAnd, "or": arith.BitOr,
    "xor": arith.BitXor, "lshift": arith.Shl, "rshift": arith.Shr,
}
AST_BINARY = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor",
    ast.LShift: "lshift", ast.RShift: "rshift",
}
AST_COMPARE = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq",
               ast.NotEq: "ne"}
AST_UNARY = {ast.USub: "neg", ast.UAdd: "plus", ast.Invert: "invert", ast.Not: "not"}
COMPARE_FUNCS = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
                 "eq": operator.eq, "ne": operator.ne}
_PY_BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
    "and": operator.and_, "or": operator.or_, "xor": operator.xor, "lshift": operator.lshift,
    "rshift": operator.rshift,
}


def _fold(kind: str, x, y, node):
    try:
        return _PY_BINARY[kind](x, y)
    except ZeroDivisionError:
        if isinstance(x, int) and isinstance(y, int) and kind in ("floordiv", "mod"):
            return 0
        raise UserError(node, "division by zero in a constant expression")
    except (TypeError, ValueError, OverflowError) as error:
        raise UserError(node, f"invalid constant expression: {error}")


def _fold_unary(kind: str, x, node):
    if kind == "neg":
        return -x
    if kind == "plus":
        return +x
    if kind == "not":
        return not x
    if isinstance(x, float):
        raise UserError(node, "bitwise ~ of a float", "use integers")
    return ~x


def describe(v) -> str:
    from .values import Choice, Obj, Tup
    if isinstance(v, Value):
        return f"a value of type {v.type}"
    if isinstance(v, Tup):
        return f"a tuple of {len(v.items)}"
    from .values import Rec, RecRef, View
    if isinstance(v, View):
        return f"a {v.ndim}-d view of an array"
    if isinstance(v, (Rec, RecRef)):
        return "an array of records" if isinstance(v, Rec) else "a record"
    if isinstance(v, Obj):
        text = repr(v.obj)
        return text if text.startswith("numba's") else f"the Python object {text}"
    if isinstance(v, PyConst):
        return f"the constant {v.value!r}"
    if isinstance(v, Weak):
        return "a Python number argument"
    if isinstance(v, Choice):
        return "an array chosen at run time (assigned different arrays on different paths)"
    from .values import Member
    if isinstance(v, Member):
        return f"the enum member {v.known}" if v.known is not None else \
            f"a member of enum {v.cls.__name__}"
    return repr(v)


def _plain(v):
    """An IntEnum member as its int (frontend/enums.py); anything else as it is."""
    return v.value if isinstance(v, Member) and v.is_int else v


_MIRRORED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _beyond_range(predicate: str, a, b, converter) -> bool | None:
    """The result of comparing an integer with a literal outside its type's range (`u8 < 256`,
    `u32 > -1`): decided by the literal alone, as NumPy 2 compares Python integers, where
    converting the literal to the type would wrap it. None when the comparison is not one."""
    if isinstance(a, PyConst) and not isinstance(b, PyConst):
        a, b, predicate = b, a, _MIRRORED[predicate]
    if not isinstance(b, PyConst) or isinstance(a, (PyConst, Weak)) \
            or not isinstance(b.value, int) or isinstance(b.value, bool):
        return None
    t = converter.type_of(a)
    if not t.is_int:
        return None
    low, high = (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if t.is_signed \
        else (0, (1 << t.bits) - 1)
    if low <= b.value <= high:
        return None
    above = b.value > high          # the literal is above every value of the type
    return {"lt": above, "le": above, "gt": not above, "ge": not above, "eq": False,
            "ne": True}[predicate]
