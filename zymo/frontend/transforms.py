"""`zm.jvp(f, primals, tangents)` and `zm.jacfwd(f, ...)(*args)` inside kernels: the device
function is compiled for the arguments, and each derivative evaluation becomes one
`func.call_derivative` op (expanded by `zymo.ad` into a call of the derivative function)."""
from __future__ import annotations

from ..ir import types as T
from ..ir.types import Array, Scalar
from ..ir.values import Value
from ..lang.derivatives import Jacobian, default_width
from ..ops import control
from . import carried
from .convert import UserError, describe
from .driver import arg_leaves
from .values import Const, Obj, Tup, Weak


def _device_function(callee, node):
    fn = callee.obj if isinstance(callee, Obj) else None
    if fn is None or not callable(fn) or getattr(fn, "is_zymo_kernel", False):
        raise UserError(node, f"{describe(callee)} is not a device function",
                        "differentiate a @zm.func")
    return getattr(fn, "py_func", fn)


def _passed(lw, value):
    """Float constants become run-time values, so that derivatives can be taken at them."""
    if isinstance(value, Const) and isinstance(value.value, float):
        return Weak(lw.constant(value.value, T.f64))
    if isinstance(value, Tup):
        return Tup(tuple(_passed(lw, item) for item in value.items))
    return value


def _scalar(value) -> Value | None:
    leaf = value.value if isinstance(value, Weak) else value
    return leaf if isinstance(leaf, Value) and isinstance(leaf.type, Scalar) else None


def _pairs(primal, tangent, node, where: str):
    """(primal leaf, tangent) for every leaf the callee receives, in its argument order."""
    if isinstance(primal, Tup):
        if not (isinstance(tangent, Tup) and len(tangent.items) == len(primal.items)):
            raise UserError(node, f"the tangent of {where} must be a tuple of "
                                  f"{len(primal.items)}, like the primal")
        return [pair for k, (p, t) in enumerate(zip(primal.items, tangent.items))
                for pair in _pairs(p, t, node, f"{where}[{k}]")]
    leaves = arg_leaves(primal)
    if not leaves:
        return []
    if isinstance(leaves[0].type, Array):
        raise UserError(node, f"{where} is an array: derivatives inside kernels take numbers "
                              f"and tuples of numbers", "pass the elements")
    return [(leaves[0], tangent)]


def _emit(lw, func, operands, kinds, seeds, width):
    ftype = func.attrs["function_type"]
    op = lw.b.create(control.DerivativeCall, *operands, callee=func.attrs["sym_name"],
                     callee_type=ftype, mode="jvp", kinds=tuple(kinds), width=width,
                     seeds=tuple(seeds))
    count = len(ftype.outputs)
    return op.results[:count], iter(op.results[count:])


def _tangent_shape(shape, tangents, zero):
    """The result shape filled with tangents (`zero` where a result is not a float)."""
    if isinstance(shape, carried.Leaf):
        if not shape.type.is_float:
            return zero
        value = next(tangents)
        return Weak(value) if shape.weak else value
    if isinstance(shape, carried.Group):
        return Tup(tuple(_tangent_shape(item, tangents, zero) for item in shape.items))
    return zero


def jvp(lw, node, fn, args, kwargs):
    """`zm.jvp(f, primals, tangents)` -> (out, tangent_out); with `width=W` every tangent leaf
    is a W-tuple (W directions in one evaluation) and so is every leaf of tangent_out."""
    width_value = kwargs.pop("width", Const(None))
    if kwargs or len(args) != 3:
        raise UserError(node, "inside kernels zm.jvp takes (f, primals, tangents[, width=W])",
                        "e.g. out, t_out = zm.jvp(f, (x, y), (1.0, 0.0))")
    width = width_value.value if isinstance(width_value, Const) else None
    if not (width is None or isinstance(width, int) and width >= 1):
        raise UserError(node, "zm.jvp: width must be a positive compile-time int")
    py_func = _device_function(args[0], node)
    primals, tangents = args[1], args[2]
    if not (isinstance(primals, Tup) and isinstance(tangents, Tup)
            and len(primals.items) == len(tangents.items)):
        raise UserError(node, "zm.jvp: primals and tangents must be tuples of the same length",
                        "wrap single arguments: zm.jvp(f, (x,), (tx,))")
    primal_args = [_passed(lw, p) for p in primals.items]
    func, shape = lw.compiler.device_function(lw, py_func, primal_args, node)
    pairs = [pair for k, (p, t) in enumerate(zip(primal_args, tangents.items))
             for pair in _pairs(p, t, node, f"argument {k}")]
    operands, kinds, seeds = [], [], []
    for index, (leaf, tangent) in enumerate(pairs):
        operands.append(leaf)
        components = _components(tangent, width, node, index)
        if not leaf.type.is_float or all(isinstance(c, Const) and not c.value
                                         for c in components):
            kinds.append("const")
        elif all(isinstance(c, Const) for c in components):
            kinds.append("seed")
            seeds.append((index, tuple(float(c.value) or None for c in components)))
        else:
            kinds.append("dup")
            for c in components:
                value = lw.constant(c.value, leaf.type) if isinstance(c, Const) else _scalar(c)
                if value is None:
                    raise UserError(node, f"the tangent of argument leaf {index} must be a "
                                          f"number, not {describe(c)}")
                operands.append(lw.cast(value, leaf.type))
    results, tangent_results = _emit(lw, func, operands, kinds, seeds, width or 1)
    out = carried.rebuild(shape, iter(results))
    if width is None:
        return Tup((out, _tangent_shape(shape, tangent_results, Const(0.0))))
    grouped = iter([Tup(tuple(next(tangent_results) for _ in range(width)))
                    for _ in range(len(carried.leaf_types(shape)))])
    zeros = Tup((Const(0.0),) * width)
    return Tup((out, _tangent_shape(shape, grouped, zeros)))


def _components(tangent, width, node, index):
    if width is None:
        return [tangent]
    if not (isinstance(tangent, Tup) and len(tangent.items) == width):
        raise UserError(node, f"with width={width} the tangent of argument leaf {index} must be "
                              f"a tuple of {width} numbers")
    return list(tangent.items)


def jacfwd(lw, node, fn, args, kwargs):
    """`zm.jacfwd(f, argnums, width)` written inside the kernel: the same object as on the host."""
    def python(value, what):
        if isinstance(value, Const):
            return value.value
        if isinstance(value, Tup):
            return tuple(python(item, what) for item in value.items)
        if isinstance(value, Obj) and value.obj is None:
            return None
        raise UserError(node, f"zm.jacfwd: {what} must be a compile-time constant")

    names = ("f", "argnums", "width")
    if len(args) > 3 or set(kwargs) - set(names):
        raise UserError(node, "zm.jacfwd takes (f, argnums=0, width=None)")
    given = dict(zip(names, args), **kwargs)
    f = _device_function(given.get("f", Obj(None)), node)
    try:
        spec = Jacobian(f, python(given.get("argnums", Const(0)), "argnums"),
                        python(given.get("width", Obj(None)), "width"))
    except TypeError as error:
        raise UserError(node, str(error))
    return Obj(spec)


def jacobian(lw, node, spec: Jacobian, args, kwargs):
    if kwargs:
        raise UserError(node, "keyword arguments to device functions are not supported")
    numbers = spec.argnums if isinstance(spec.argnums, tuple) else (spec.argnums,)
    if max(numbers) >= len(args):
        raise UserError(node, f"zm.jacfwd: argnums {spec.argnums} but {len(args)} arguments")
    args = [_passed(lw, a) if k in numbers else a for k, a in enumerate(args)]
    func, shape = lw.compiler.device_function(lw, getattr(spec.f, "py_func", spec.f), args, node)
    # the callee's arguments, and which of them are differentiated (per argnum, in order)
    operands, wrt = [], {k: [] for k in numbers}
    for k, arg in enumerate(args):
        for leaf in arg_leaves(arg):
            if k in wrt and isinstance(leaf.type, Scalar):
                wrt[k].append(len(operands) if leaf.type.is_float else None)
            operands.append(leaf)
    inputs = [i for k in numbers for i in wrt[k] if i is not None]
    if not inputs:
        raise UserError(node, "zm.jacfwd: the differentiated arguments hold no floats")
    width = spec.width or default_width(len(inputs))
    columns: dict = {}   # input position -> tangents of the float results
    for start in range(0, len(inputs), width):
        chunk = inputs[start:start + width]
        kinds = ["seed" if i in chunk else "const" for i in range(len(operands))]
        seeds = [(i, tuple(1.0 if j == chunk.index(i) else None for j in range(len(chunk))))
                 for i in chunk]
        _, tangents = _emit(lw, func, operands, kinds, seeds, len(chunk))
        per_result = list(tangents)
        outputs = len(per_result) // len(chunk)
        for j, i in enumerate(chunk):
            columns[i] = [per_result[o * len(chunk) + j] for o in range(outputs)]
    zero = Const(0.0)

    def row(o):
        def of_arg(k):
            values = iter([zero if i is None else columns[i][o] for i in wrt[k]])
            return _fill(args[k], values, zero)
        if isinstance(spec.argnums, tuple):
            return Tup(tuple(of_arg(k) for k in numbers))
        return of_arg(numbers[0])

    rows = iter([row(o) for o in range(len(next(iter(columns.values()))))])
    return _tangent_shape(shape, rows, zero)


def _fill(arg, values, zero):
    """`arg`'s tuple structure with its scalar leaves replaced by `values` (derivatives)."""
    if isinstance(arg, Tup):
        return Tup(tuple(_fill(item, values, zero) for item in arg.items))
    if arg_leaves(arg):
        return next(values)
    return zero


TRANSFORMS = {"jvp": jvp, "jacfwd": jacfwd, "jacobian": jacobian}
