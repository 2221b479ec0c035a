"""NumPy reductions of whole arrays inside a kernel (`np.sum(a)`, `a.max()`, `np.nanmean(a)`,
`np.count_nonzero(a)`, ...), as numba's CUDA target has them: the calling thread reduces every
element in order. Each reduction is a short Python template whose `for x in elements(a):` is
expanded into the loop nest over the array; the template is then lowered like the kernel's own
code, so every backend and both derivative transforms see ordinary loops, loads and scalar ops.

Result types are NumPy's (sum of int32 is int64, mean of ints float64, var of complex real);
NaN rules too (min/max propagate a NaN, the nan* forms skip them; nanmin/nanmax of NaNs alone
is NaN, as in numba). An array known at compile time to be empty makes min/max a compile error,
as NumPy raises; one found empty at run time (kernels cannot raise) gives the reduction's
identity, NumPy's `initial=` default: +inf or the type's largest value for min, -inf or its
smallest for max, NaN for nanmin/nanmax."""
from __future__ import annotations

import ast
import builtins
import math as pymath
import warnings

import numpy as np

from ..ir import types as T
from ..ir.types import Array, Scalar
from ..ir.values import Value
from .convert import UserError, describe
from .intrinsics import HANDLERS, NUMPY_PATHS, constant_array, parse_dtype
from .values import Choice, Obj, PyConst, View, Weak

# array methods that are reductions (`a.sum()`), by the path of their handler
ARRAY_METHODS = {name: f"np_{name}" for name in
                 ("sum", "prod", "mean", "var", "std", "min", "max", "all", "any")}

_SUM = """
acc = init
for x in elements(a):
    acc = acc + t(x)
result = r(acc)
"""
_PROD = _SUM.replace("acc + t(x)", "acc * t(x)")
_NANSUM = """
acc = init
for x in elements(a):
    y = t(x)
    acc = acc + (y if y == y else zero)
result = r(acc)
"""
_NANPROD = _NANSUM.replace("acc + (y if y == y else zero)", "acc * (y if y == y else one)")
_MEAN = """
n = a.size
acc = zero
for x in elements(a):
    acc = acc + t(x)
result = r(acc / p(n))
"""
_NANMEAN = """
acc = zero
n = pzero
for x in elements(a):
    y = t(x)
    keep = y == y
    acc = acc + (y if keep else zero)
    n = n + (pone if keep else pzero)
result = r(acc / n)
"""
# two passes, as NumPy: the mean first, then the mean squared distance from it
_VAR = """
n = a.size
m = zero
for x in elements(a):
    m = m + t(x)
m = m / p(n)
acc = pzero
for x in elements(a):
    d = t(x) - m
    acc = acc + SQUARE
result = r(FINISH(acc / p(n - ddof)))
"""
_MIN = """
acc = init
for x in elements(a):
    acc = x if x < acc else acc
    NAN_STEP
result = acc
"""
_NANMIN = """
acc = nan
for x in elements(a):
    acc = x if (x < acc or acc != acc) else acc
result = acc
"""
_ALL = """
acc = true
for x in elements(a):
    b = TRUTH
    acc = acc JOIN b
result = acc
"""
_COUNT = """
acc = zero
for x in elements(a):
    b = TRUTH
    acc = acc + t(b)
result = acc
"""

# the template's names in the kernel's scope: `$` keeps them from the kernel's own names, and
# templates call no reduction, so one prefix serves every call (and keeps the IR deterministic)
_PREFIX = "$red_"


def _result_dtype(fn, element: Scalar) -> Scalar:
    """The type NumPy gives `fn` of an array of `element`s."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return T.scalar_of_dtype(np.asarray(fn(np.ones(2, element.dtype))).dtype)


def _accumulator(t: Scalar) -> Scalar:
    """Where sums of `t` accumulate: float16 in float32 (as NumPy's own loops do)."""
    return T.f32 if t == T.f16 else t


class _Call:
    """One reduction call: its array, element type and options, checked."""

    def __init__(self, lw, node, name: str, args, kwargs, allowed: set[str]):
        self.lw, self.node, self.name = lw, node, name
        if not args:
            raise UserError(node, f"np.{name}() needs an array")
        if len(args) > 1:
            raise UserError(node, f"np.{name}() inside a kernel reduces the whole array: "
                                  "it takes no axis", _AXIS_HINT)
        unknown = set(kwargs) - allowed - {"axis"}
        if unknown:
            raise UserError(node, f"np.{name}() in a kernel does not take "
                                  f"{', '.join(sorted(unknown))}=",
                            f"it takes {', '.join(sorted(allowed)) or 'no keywords'}")
        if "axis" in kwargs:
            raise UserError(node, f"np.{name}(..., axis=) inside a kernel: kernels do not "
                                  "allocate the array it would return", _AXIS_HINT)
        self.kwargs = kwargs
        self.array = self._array(args[0])
        self.element = self._element()

    def _array(self, value):
        if isinstance(value, Obj) and isinstance(value.obj, np.ndarray):
            data = value.obj
            # a NumPy array the kernel captures is frozen into it, as its indexing does; a
            # 0-d one reduces as its one element
            return constant_array(self.lw, self.node, data.reshape(1) if data.ndim == 0
                                  else data)
        if isinstance(value, (View, Choice)) or isinstance(value, Value) and \
                isinstance(value.type, Array):
            return value
        raise UserError(self.node, f"np.{self.name}() of {describe(value)}",
                        "reduce an array: an argument, a slice of one, a local or shared "
                        "array, or a NumPy array the kernel captures")

    def _element(self) -> Scalar:
        array = self.array
        base = array.base if isinstance(array, View) else \
            array.arrays[0] if isinstance(array, Choice) else array
        if not isinstance(base, Value) or not isinstance(base.type, Array):
            raise UserError(self.node, f"np.{self.name}() of {describe(array)}",
                            "reduce an array of numbers")
        return base.type.dtype

    @property
    def ndim(self) -> int:
        array = self.array
        if isinstance(array, View):
            return array.ndim
        return (array.arrays[0] if isinstance(array, Choice) else array).type.ndim

    def statically_empty(self) -> bool:
        """Known at compile time to have no element."""
        array = self.array
        if isinstance(array, View):
            return any(isinstance(axis[3], PyConst) and axis[3].value == 0
                       for axis in array.axes if axis[0] == "slice")
        arrays = array.arrays if isinstance(array, Choice) else (array,)
        return all(a.type.shape is not None and 0 in a.type.shape for a in arrays)

    def real_only(self) -> None:
        if self.element.is_complex:
            raise UserError(self.node, f"np.{self.name}() of a complex array",
                            "complex numbers have no order; reduce abs(...) or .real of them")

    def dtype_option(self, default: Scalar) -> Scalar:
        given = self.kwargs.get("dtype")
        return default if given is None else parse_dtype(self.node, given)

    def constant(self, value, t: Scalar):
        return self.lw.constant(value, t)

    def scalar_option(self, key: str, t: Scalar):
        """The keyword `key` as a value of type `t`, or None when not given."""
        given = self.kwargs.get(key)
        if given is None:
            return None
        return self.lw.materialize(given.value if isinstance(given, Weak) else given, t,
                                   self.node)

    def run(self, template: str, bound: dict, **fragments) -> object:
        """Lower `template` (its fragments filled in) with `a` the array and `bound` the rest
        of its free names; the value it leaves in `result`."""
        for key, text in fragments.items():
            template = template.replace(key, text)
        prefix = _PREFIX
        bound = {"a": self.array, "range": Obj(builtins.range), "bool": Obj(builtins.bool),
                 "sqrt": Obj(pymath.sqrt), **bound}
        stmts = _expand(ast.parse(template).body, self.ndim)
        for child in ast.walk(ast.Module(body=stmts, type_ignores=[])):
            if isinstance(child, ast.Name):
                child.id = prefix + child.id
            if isinstance(child, (ast.expr, ast.stmt)):
                ast.copy_location(child, self.node)
                child.end_lineno = self.node.end_lineno
                child.end_col_offset = self.node.end_col_offset
        lw = self.lw
        names = {prefix + name for name in bound} | \
            {prefix + n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name)}
        saved = {name: lw.env[name] for name in names if name in lw.env}
        lw.env.update({prefix + name: value for name, value in bound.items()})
        try:
            lw.visit_block(stmts)
            result = lw.env.get(prefix + "result")
        finally:
            for name in names:
                lw.env.pop(name, None)
            lw.env.update(saved)
        if result is None:
            raise UserError(None, "")   # the template's error is reported already
        return result


_AXIS_HINT = ("reduce each row in a loop, e.g. `for i in range(a.shape[0]): "
              "out[i] = a[i, :].sum()`")


def _expand(stmts: list[ast.stmt], ndim: int) -> list[ast.stmt]:
    """`for x in elements(a): body` -> `for i0 in range(a.shape[0]): ... x = a[i0, ...]`."""
    out = []
    for stmt in stmts:
        if isinstance(stmt, ast.For) and isinstance(stmt.iter, ast.Call) and \
                getattr(stmt.iter.func, "id", None) == "elements":
            array = stmt.iter.args[0].id
            counters = [f"i{d}" for d in range(ndim)]
            index = ast.Name(counters[0], ast.Load()) if ndim == 1 else \
                ast.Tuple([ast.Name(c, ast.Load()) for c in counters], ast.Load())
            take = ast.Assign(targets=[stmt.target],
                              value=ast.Subscript(ast.Name(array, ast.Load()), index,
                                                  ast.Load()))
            body = [take, *stmt.body]
            for d in reversed(range(ndim)):
                extent = ast.Subscript(ast.Attribute(ast.Name(array, ast.Load()), "shape",
                                                     ast.Load()), ast.Constant(d), ast.Load())
                body = [ast.For(target=ast.Name(counters[d], ast.Store()),
                                iter=ast.Call(ast.Name("range", ast.Load()), [extent], []),
                                body=body, orelse=[])]
            out.extend(body)
        else:
            out.append(stmt)
    return out


def _register(path: str, *numpy_functions):
    def register(fn):
        HANDLERS[path] = fn
        NUMPY_PATHS.update({f: path for f in numpy_functions})
        return fn
    return register


def _additive(name: str, template: str, nan_template: str | None, identity: int):
    numpy_fn = getattr(np, name)

    def lower(lw, node, args, kwargs):
        call = _Call(lw, node, name, args, kwargs, {"dtype", "initial"} if nan_template is None
                     else {"dtype"})
        r = call.dtype_option(_result_dtype(numpy_fn, call.element))
        t = _accumulator(r)
        if nan_template is not None and (call.element.is_complex or r.is_complex):
            call.real_only()
        initial = call.scalar_option("initial", t)
        zero, one = call.constant(0, t), call.constant(1, t)
        bound = {"t": Obj(t), "r": Obj(r), "zero": zero, "one": one,
                 "init": initial if initial is not None else (zero if identity == 0 else one)}
        use_nan = nan_template is not None and call.element.is_float
        return call.run(nan_template if use_nan else template, bound)

    return lower


_register("np_sum", np.sum)(_additive("sum", _SUM, None, 0))
_register("np_prod", np.prod)(_additive("prod", _PROD, None, 1))
_register("np_nansum", np.nansum)(_additive("nansum", _SUM, _NANSUM, 0))
_register("np_nanprod", np.nanprod)(_additive("nanprod", _PROD, _NANPROD, 1))


def _mean(name: str, skip_nans: bool):
    numpy_fn = getattr(np, name)

    def lower(lw, node, args, kwargs):
        call = _Call(lw, node, name, args, kwargs, {"dtype"})
        if skip_nans:
            call.real_only()
        r = call.dtype_option(_result_dtype(numpy_fn, call.element))
        t = _accumulator(r)
        p = t.part if t.is_complex else t
        bound = {"t": Obj(t), "r": Obj(r), "p": Obj(p), "zero": call.constant(0, t),
                 "pzero": call.constant(0, p), "pone": call.constant(1, p)}
        template = _NANMEAN if skip_nans and call.element.is_float else _MEAN
        return call.run(template, bound)

    return lower


_register("np_mean", np.mean)(_mean("mean", False))
_register("np_nanmean", np.nanmean)(_mean("nanmean", True))


def _spread(name: str):
    numpy_fn = getattr(np, name)

    def lower(lw, node, args, kwargs):
        call = _Call(lw, node, name, args, kwargs, {"dtype", "ddof"})
        r = call.dtype_option(_result_dtype(numpy_fn, call.element))
        p = _accumulator(r.part if r.is_complex else r)
        t = T.complex_of(p) if call.element.is_complex else p
        ddof = kwargs.get("ddof", PyConst(0))
        bound = {"t": Obj(t), "r": Obj(r), "p": Obj(p), "zero": call.constant(0, t),
                 "pzero": call.constant(0, p), "ddof": ddof}
        square = "(d.real * d.real + d.imag * d.imag)" if t.is_complex else "d * d"
        return call.run(_VAR, bound, SQUARE=square, FINISH="sqrt" if name == "std" else "")

    return lower


_register("np_var", np.var)(_spread("var"))
_register("np_std", np.std)(_spread("std"))


def _extremum(name: str, skip_nans: bool):
    smaller = name.endswith("min")

    def lower(lw, node, args, kwargs):
        call = _Call(lw, node, name, args, kwargs, set() if skip_nans else {"initial"})
        call.real_only()
        e = call.element
        initial = call.scalar_option("initial", e)
        if e.is_bool:
            # the least of booleans is their conjunction, the greatest their disjunction
            start = initial if initial is not None else call.constant(smaller, T.bool_)
            return call.run(_ALL, {"true": start}, TRUTH="x", JOIN="and" if smaller else "or")
        if initial is None and call.statically_empty():
            raise UserError(node, f"np.{name}() of an empty array (NumPy raises ValueError)",
                            f"give the value an empty array should have: np.{name}(a, initial=...)"
                            if not skip_nans else "reduce a non-empty array")
        if skip_nans and e.is_float:
            template = _NANMIN if smaller else _NANMIN.replace("x < acc", "x > acc")
            return call.run(template, {"nan": call.constant(float("nan"), e)})
        if initial is None:
            if e.is_float:
                initial = call.constant(float("inf") if smaller else float("-inf"), e)
            else:
                info = np.iinfo(e.dtype)
                initial = call.constant(int(info.max if smaller else info.min), e)
        nan_step = "acc = x if x != x else acc" if e.is_float else "pass"
        template = _MIN if smaller else _MIN.replace("x < acc", "x > acc")
        return call.run(template, {"init": initial}, NAN_STEP=nan_step)

    return lower


_register("np_min", np.min, np.amin)(_extremum("min", False))
_register("np_max", np.max, np.amax)(_extremum("max", False))
_register("np_nanmin", np.nanmin)(_extremum("nanmin", True))
_register("np_nanmax", np.nanmax)(_extremum("nanmax", True))


def _truth(name: str):
    def lower(lw, node, args, kwargs):
        call = _Call(lw, node, name, args, kwargs, set())
        e = call.element
        # NaN is true, as in NumPy: `x != 0` is an unordered comparison
        truth = "x" if e.is_bool else "x != ezero"
        bound = {"ezero": call.constant(0, e)}
        if name == "count_nonzero":
            bound.update(t=Obj(T.i64), zero=call.constant(0, T.i64))
            return call.run(_COUNT, bound, TRUTH=truth)
        bound["true"] = call.constant(name == "all", T.bool_)
        return call.run(_ALL, bound, TRUTH=truth, JOIN="and" if name == "all" else "or")

    return lower


_register("np_all", np.all)(_truth("all"))
_register("np_any", np.any)(_truth("any"))
_register("np_count_nonzero", np.count_nonzero)(_truth("count_nonzero"))


def array_method(value, attr: str):
    """`a.sum` and the like, for an array value `a` (else None): a bound reduction."""
    from .intrinsics import BoundIntrinsic
    path = ARRAY_METHODS.get(attr)
    if path is None:
        return None
    if isinstance(value, (View, Choice)) or isinstance(value, Value) and \
            isinstance(value.type, Array) or \
            isinstance(value, Obj) and isinstance(value.obj, np.ndarray):
        return Obj(BoundIntrinsic(path, value))
    return None
