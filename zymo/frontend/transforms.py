"""Derivatives of device functions inside kernels: `zm.jvp(f, primals, tangents)`,
`zm.jacfwd(f, ...)(*args)` (forward mode), `zm.vjp(f, *primals)`, `zm.grad(f)(*args)`,
`zm.jacrev(f, ...)(*args)` (reverse mode). The device function is compiled for the arguments,
and each derivative evaluation becomes one `func.call_derivative` op (expanded by `zymo.ad` into
a call of the derivative function)."""
from __future__ import annotations

from ..ir import types as T
from ..ir.types import Array, Scalar
from ..ir.values import Value
from ..lang.derivatives import Gradient, Jacobian, default_width
from ..ops import control
from . import carried
from .convert import UserError, describe
from .driver import arg_leaves
from .values import Obj, PyConst, Tup, Weak


def _device_function(callee, node):
    fn = callee.obj if isinstance(callee, Obj) else None
    if fn is None or not callable(fn) or getattr(fn, "is_zymo_kernel", False):
        raise UserError(node, f"{describe(callee)} is not a device function",
                        "differentiate a @zm.func")
    return getattr(fn, "py_func", fn)


def _passed(lw, value):
    """Float constants become run-time values, so that derivatives can be taken at them."""
    if isinstance(value, PyConst) and isinstance(value.value, float):
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
    width_value = kwargs.pop("width", PyConst(None))
    if kwargs or len(args) != 3:
        raise UserError(node, "inside kernels zm.jvp takes (f, primals, tangents[, width=W])",
                        "e.g. out, t_out = zm.jvp(f, (x, y), (1.0, 0.0))")
    width = width_value.value if isinstance(width_value, PyConst) else None
    if not (width is None or isinstance(width, int) and width >= 1):
        raise UserError(node, "zm.jvp: width must be a positive compile-time int")
    py_func = _device_function(args[0], node)
    primals, tangents = args[1], args[2]
    if not (isinstance(primals, Tup) and isinstance(tangents, Tup)
            and len(primals.items) == len(tangents.items)):
        raise UserError(node, "zm.jvp: primals and tangents must be tuples of the same length",
                        "wrap single arguments: zm.jvp(f, (x,), (tx,))")
    primal_args = [_passed(lw, p) for p in primals.items]
    func, shape = _without_captures(lw, py_func, primal_args, node)
    pairs = [pair for k, (p, t) in enumerate(zip(primal_args, tangents.items))
             for pair in _pairs(p, t, node, f"argument {k}")]
    operands, kinds, seeds = [], [], []
    for index, (leaf, tangent) in enumerate(pairs):
        operands.append(leaf)
        components = _components(tangent, width, node, index)
        if not leaf.type.is_float or all(isinstance(c, PyConst) and not c.value
                                         for c in components):
            kinds.append("const")
        elif all(isinstance(c, PyConst) for c in components):
            kinds.append("seed")
            seeds.append((index, tuple(float(c.value) or None for c in components)))
        else:
            kinds.append("dup")
            for c in components:
                value = lw.constant(c.value, leaf.type) if isinstance(c, PyConst) else _scalar(c)
                if value is None:
                    raise UserError(node, f"the tangent of argument leaf {index} must be a "
                                          f"number, not {describe(c)}")
                operands.append(lw.cast(value, leaf.type))
    results, tangent_results = _emit(lw, func, operands, kinds, seeds, width or 1)
    out = carried.rebuild(shape, iter(results))
    if width is None:
        return Tup((out, _tangent_shape(shape, tangent_results, PyConst(0.0))))
    grouped = iter([Tup(tuple(next(tangent_results) for _ in range(width)))
                    for _ in range(len(carried.leaf_types(shape)))])
    zeros = Tup((PyConst(0.0),) * width)
    return Tup((out, _tangent_shape(shape, grouped, zeros)))


def _components(tangent, width, node, index):
    if width is None:
        return [tangent]
    if not (isinstance(tangent, Tup) and len(tangent.items) == width):
        raise UserError(node, f"with width={width} the tangent of argument leaf {index} must be "
                              f"a tuple of {width} numbers")
    return list(tangent.items)


def _python(value, what, node, who):
    if isinstance(value, PyConst):
        return value.value
    if isinstance(value, Tup):
        return tuple(_python(item, what, node, who) for item in value.items)
    if isinstance(value, Obj) and value.obj is None:
        return None
    raise UserError(node, f"{who}: {what} must be a compile-time constant")


def _made_inside(node, args, kwargs, who: str, names: tuple, make):
    """`zm.jacfwd(...)`, `zm.jacrev(...)`, `zm.grad(f)` written inside the kernel: the same
    object as on the host."""
    if len(args) > len(names) or set(kwargs) - set(names):
        raise UserError(node, f"{who} takes ({', '.join(names)})")
    given = dict(zip(names, args), **kwargs)
    f = _device_function(given.pop("f", Obj(None)), node)
    try:
        return Obj(make(f, **{k: _python(v, k, node, who) for k, v in given.items()}))
    except TypeError as error:
        raise UserError(node, str(error))


def jacfwd(lw, node, fn, args, kwargs):
    return _made_inside(node, args, kwargs, "zm.jacfwd", ("f", "argnums", "width"), Jacobian)


def jacrev(lw, node, fn, args, kwargs):
    return _made_inside(node, args, kwargs, "zm.jacrev", ("f", "argnums"),
                        lambda f, **kw: Jacobian(f, mode="rev", **kw))


def grad(lw, node, fn, args, kwargs):
    return _made_inside(node, args, kwargs, "zm.grad", ("f", "argnums"), Gradient)


def _wrt(lw, node, who, f, argnums, args, kwargs):
    """The compiled callee for `args` (the differentiated ones passed as run-time values), its
    operands, and per argnum the operand position of each scalar leaf (None: not a float)."""
    if kwargs:
        raise UserError(node, "keyword arguments to device functions are not supported")
    numbers = argnums if isinstance(argnums, tuple) else (argnums,)
    if max(numbers) >= len(args):
        raise UserError(node, f"{who}: argnums {argnums} but {len(args)} arguments")
    args = [_passed(lw, a) if k in numbers else a for k, a in enumerate(args)]
    func, shape = _without_captures(lw, getattr(f, "py_func", f), args, node)
    operands, wrt = [], {k: [] for k in numbers}
    for k, arg in enumerate(args):
        for leaf in arg_leaves(arg):
            if k in wrt and isinstance(leaf.type, Scalar):
                wrt[k].append(len(operands) if leaf.type.is_float else None)
            operands.append(leaf)
    inputs = [i for k in numbers for i in wrt[k] if i is not None]
    if not inputs:
        raise UserError(node, f"{who}: the differentiated arguments hold no floats")
    return args, func, shape, operands, wrt, inputs


def jacobian(lw, node, spec: Jacobian, args, kwargs):
    who = f"zm.jac{spec.mode}"
    args, func, shape, operands, wrt, inputs = _wrt(lw, node, who, spec.f, spec.argnums, args,
                                                    kwargs)
    if spec.mode == "rev":
        return _jacrev(lw, node, func, shape, operands, inputs, spec.argnums, wrt, args)
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
    rows = [_by_argnums(args, spec.argnums, wrt, lambda i, o=o: columns[i][o])
            for o in range(len(next(iter(columns.values()))))]
    return _tangent_shape(shape, iter(rows), PyConst(0.0))


def _by_argnums(args, argnums, wrt, derivative):
    """Derivatives shaped like the differentiated arguments (a tuple over argnums when argnums
    is a tuple): `derivative(i)` for the float leaf at operand i, zero elsewhere."""
    zero = PyConst(0.0)
    numbers = argnums if isinstance(argnums, tuple) else (argnums,)

    def of_arg(k):
        return _fill(args[k], iter([zero if i is None else derivative(i) for i in wrt[k]]), zero)
    if isinstance(argnums, tuple):
        return Tup(tuple(of_arg(k) for k in numbers))
    return of_arg(numbers[0])


# ---- reverse mode -----------------------------------------------------------------------------
def _pullback(lw, func, operands, kinds, cotangents):
    """Emit one pullback evaluation: the adjoints of the operands whose kind is "active".
    `cotangents`: one per float result, None for a zero one (then it is not seeded at all)."""
    ftype = func.attrs["function_type"]
    floats = [k for k, t in enumerate(ftype.outputs) if isinstance(t, Scalar) and t.is_float]
    seeded = [(k, c) for k, c in zip(floats, cotangents) if c is not None]
    cts = [lw.cast(c, ftype.outputs[k]) for k, c in seeded]
    op = lw.b.create(control.DerivativeCall, *operands, *cts, callee=func.attrs["sym_name"],
                     callee_type=ftype, mode="vjp", kinds=tuple(kinds), width=1,
                     seeds=tuple(k for k, _ in seeded))
    return list(op.results[len(ftype.outputs):])


def _jacrev(lw, node, func, shape, operands, inputs, argnums, wrt, args):
    floats = [t for t in func.attrs["function_type"].outputs if t.is_float]
    if not floats:
        raise UserError(node, "zm.jacrev: the function returns no floats")
    kinds = ["active" if i in inputs else "const" for i in range(len(operands))]
    rows = []
    for o in range(len(floats)):
        basis = [lw.constant(1.0, t) if j == o else None for j, t in enumerate(floats)]
        adjoints = dict(zip(inputs, _pullback(lw, func, operands, kinds, basis)))
        rows.append(_by_argnums(args, argnums, wrt, adjoints.__getitem__))
    return _tangent_shape(shape, iter(rows), PyConst(0.0))


def gradient(lw, node, spec: Gradient, args, kwargs):
    args, func, shape, operands, wrt, inputs = _wrt(lw, node, "zm.grad", spec.f, spec.argnums,
                                                    args, kwargs)
    if not (isinstance(shape, carried.Leaf) and shape.type.is_float):
        raise UserError(node, f"zm.grad: {getattr(spec.f, '__name__', 'the function')} must "
                              f"return one float", "for several results use zm.vjp or "
                                                   "zm.jacrev")
    kinds = ["active" if i in inputs else "const" for i in range(len(operands))]
    adjoints = dict(zip(inputs, _pullback(lw, func, operands, kinds,
                                          [lw.constant(1.0, shape.type)])))
    return _by_argnums(args, spec.argnums, wrt, adjoints.__getitem__)


class Pull:
    """The `pull` of `out, pull = zm.vjp(f, *primals)`: a compile-time object inside the
    kernel; `pull(ct)` emits the pullback."""

    zymo_transform = "pull"

    def __init__(self, func, shape, args, operands):
        self.func, self.shape, self.args, self.operands = func, shape, args, operands


def vjp(lw, node, fn, args, kwargs):
    """`out, pull = zm.vjp(f, *primals)`; `pull(ct)` -> one cotangent per primal."""
    if kwargs or len(args) < 2:
        raise UserError(node, "inside kernels zm.vjp takes (f, *primals)",
                        "e.g. out, pull = zm.vjp(f, x, y); dx, dy = pull(1.0)")
    py_func = _device_function(args[0], node)
    primals = [_passed(lw, p) for p in args[1:]]
    for k, p in enumerate(primals):
        _pairs(p, p, node, f"primal {k}")       # numbers and tuples of numbers only
    out = lw.compiler.call_device(lw, py_func, primals, node)
    func, shape = _without_captures(lw, py_func, primals, node)
    operands = [leaf for p in primals for leaf in arg_leaves(p)]
    return Tup((out, Obj(Pull(func, shape, primals, operands))))


def pull(lw, node, spec: Pull, args, kwargs):
    if kwargs or len(args) != 1:
        raise UserError(node, "pull takes one cotangent, shaped like the function's result",
                        "e.g. dx, dy = pull((1.0, 0.0)) for a function returning a pair")
    cotangents = _like(lw, spec.shape, args[0], node, "the cotangent")
    kinds = ["active" if isinstance(v.type, Scalar) and v.type.is_float else "const"
             for v in spec.operands]
    adjoints = iter(_pullback(lw, spec.func, spec.operands, kinds, cotangents))
    return Tup(tuple(_fill_floats(a, adjoints) for a in spec.args))


def _like(lw, shape, value, node, where) -> list:
    """The float leaves of `value` (None for a constant zero), which must have the structure
    of `shape`."""
    if isinstance(shape, carried.Group):
        if not (isinstance(value, Tup) and len(value.items) == len(shape.items)):
            raise UserError(node, f"{where} must be a tuple of {len(shape.items)}, like the "
                                  f"function's result")
        return [leaf for k, (s, v) in enumerate(zip(shape.items, value.items))
                for leaf in _like(lw, s, v, node, f"{where}[{k}]")]
    if isinstance(shape, carried.Leaf):
        if isinstance(value, Tup):
            raise UserError(node, f"{where} must be a number, like the function's result")
        if not shape.type.is_float:
            return []
        if isinstance(value, PyConst):   # a zero cotangent is not seeded at all
            return [lw.constant(value.value, shape.type) if value.value else None]
        leaf = _scalar(value)
        if leaf is None:
            raise UserError(node, f"{where} must be a number, not {describe(value)}")
        return [leaf]
    return []


def _fill_floats(arg, adjoints):
    """`arg`'s structure with its float leaves replaced by adjoints, the others by 0."""
    if isinstance(arg, Tup):
        return Tup(tuple(_fill_floats(item, adjoints) for item in arg.items))
    leaves = arg_leaves(arg)
    if leaves and leaves[0].type.is_float:
        return next(adjoints)
    return PyConst(0)


def _fill(arg, values, zero):
    """`arg`'s tuple structure with its scalar leaves replaced by `values` (derivatives)."""
    if isinstance(arg, Tup):
        return Tup(tuple(_fill(item, values, zero) for item in arg.items))
    if arg_leaves(arg):
        return next(values)
    return zero


TRANSFORMS = {"jvp": jvp, "jacfwd": jacfwd, "jacrev": jacrev, "jacobian": jacobian,
              "grad": grad, "gradient": gradient, "vjp": vjp, "pull": pull}


def _without_captures(lw, py_func, args, node):
    """The device function and its result shape, for a transform: its parameters must be all
    it reads, so one that reads a captured GPU array (an extra parameter) is refused."""
    func, shape, captures = lw.compiler.device_function(lw, py_func, args, node)
    if captures:
        raise UserError(node, f"{py_func.__name__} reads a GPU array captured from its "
                              "module, which a derivative inside a kernel cannot follow",
                        "pass the array to it as an argument")
    return func, shape
