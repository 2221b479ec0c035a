"""`for` loops over `enumerate(...)` and `zip(...)` (of ranges, tuples, arrays and views).

Such a loop counts k over the shortest length and gives the target the k-th item of each
iterable; over tuples alone it is unrolled, as a loop over one tuple is. The loop is lowered
as `for $k in range(n): target = $item($k); body`, so that it is a range loop like any other
(carried values, break, continue, derivatives).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from ..ir.values import Value
from .composites import is_array
from .convert import UserError, describe
from .values import Obj, PyConst, Tup, View


@dataclass(frozen=True)
class Enumerate:
    iterable: object
    start: object


@dataclass(frozen=True)
class Zip:
    iterables: tuple


@dataclass(frozen=True)
class LoopItems:
    """`$item(k)`: the k-th item of `iterable` (what the loop target is given)."""

    iterable: object
    node: object

    def item(self, lw, k):
        return item(lw, self.node, self.iterable, k)


def is_composite_iterable(value) -> bool:
    return isinstance(value, Obj) and isinstance(value.obj, (Enumerate, Zip))


def enumerate_of(lw, node, args, kwargs):
    if not 1 <= len(args) <= 2 or set(kwargs) - {"start"}:
        raise UserError(node, "enumerate takes an iterable and an optional start")
    start = kwargs.get("start", args[1] if len(args) > 1 else PyConst(0))
    return Obj(Enumerate(args[0], start))


def zip_of(lw, node, args, kwargs):
    if not args or kwargs:
        raise UserError(node, "zip takes one or more iterables (no keywords)")
    return Obj(Zip(tuple(args)))


def length(lw, node, iterable):
    """The number of items of `iterable` (a frontend value)."""
    from .lower import RangeArgs
    if isinstance(iterable, Tup):
        return PyConst(len(iterable.items))
    if is_array(iterable):
        return lw.shape_of(iterable).items[0]
    if isinstance(iterable, View):
        return next(axis[3] for axis in iterable.axes if axis[0] == "slice")
    if isinstance(iterable, Obj) and isinstance(iterable.obj, RangeArgs):
        lower, upper, step = _range_values(lw, node, iterable.obj)
        if isinstance(step, PyConst):
            s = step.value
            span = lw.binary("sub", upper, lower, node) if s > 0 else \
                lw.binary("sub", lower, upper, node)
            count = lw.binary("floordiv", lw.binary("add", span, PyConst(abs(s) - 1), node),
                              PyConst(abs(s)), node)
            return _max0(lw, node, count)
        raise UserError(node, "enumerate/zip over a range with a run-time step",
                        "use a constant step, or loop over the range and index")
    if isinstance(iterable, Obj) and isinstance(iterable.obj, Enumerate):
        return length(lw, node, iterable.obj.iterable)
    if isinstance(iterable, Obj) and isinstance(iterable.obj, Zip):
        lengths = [length(lw, node, it) for it in iterable.obj.iterables]
        result = lengths[0]
        for other in lengths[1:]:
            result = _min(lw, node, result, other)
        return result
    raise UserError(node, f"cannot iterate over {describe(iterable)}",
                    "loop over range(...), a tuple, an array, enumerate(...) or zip(...)")


def item(lw, node, iterable, k):
    """The k-th item of `iterable`."""
    from .lower import RangeArgs
    if isinstance(iterable, Tup):
        return lw.tuple_item(iterable, k, node)
    if is_array(iterable) or isinstance(iterable, View):
        found = lw.access(node, iterable, k)
        if isinstance(found, tuple):
            from ..ops import memory
            return lw.b.value(memory.Load, found[1], *found[2])
        return found
    if isinstance(iterable, Obj) and isinstance(iterable.obj, RangeArgs):
        lower, _, step = _range_values(lw, node, iterable.obj)
        return lw.binary("add", lower, lw.binary("mul", k, step, node), node)
    if isinstance(iterable, Obj) and isinstance(iterable.obj, Enumerate):
        counter = lw.binary("add", iterable.obj.start, k, node)
        return Tup((counter, item(lw, node, iterable.obj.iterable, k)))
    if isinstance(iterable, Obj) and isinstance(iterable.obj, Zip):
        return Tup(tuple(item(lw, node, it, k) for it in iterable.obj.iterables))
    raise UserError(node, f"cannot iterate over {describe(iterable)}")


def lower_for(lw, node: ast.For, iterable) -> None:
    """`for target in enumerate(...)/zip(...)/array: body`."""
    count = length(lw, node.iter, iterable)
    if isinstance(count, PyConst) and _all_tuples(iterable):   # unrolled at compile time
        lw.unroll(node, count.value,
                  lambda k: lw.assign(node.target, item(lw, node.iter, iterable, PyConst(k)),
                                      node))
        return
    from .lower import RangeArgs
    depth = lw.loop_depth
    names = {"k": f"$k{depth}", "range": f"$range{depth}", "item": f"$item{depth}"}
    lw.env[names["range"]] = Obj(RangeArgs([count], node.iter))
    lw.env[names["item"]] = Obj(LoopItems(iterable, node.iter))
    take = ast.Assign(targets=[node.target],
                      value=ast.Call(ast.Name(names["item"], ast.Load()),
                                     [ast.Name(names["k"], ast.Load())], []))
    loop = ast.For(target=ast.Name(names["k"], ast.Store()),
                   iter=ast.Name(names["range"], ast.Load()), body=[take, *node.body],
                   orelse=[])
    for made in ast.walk(loop):
        if made is not node and made not in node.body and not hasattr(made, "lineno"):
            ast.copy_location(made, node)
    try:
        lw.stmt_For(loop)
    finally:
        for name in names.values():
            lw.env.pop(name, None)


def _all_tuples(iterable) -> bool:
    if isinstance(iterable, Tup):
        return True
    if isinstance(iterable, Obj) and isinstance(iterable.obj, Enumerate):
        return _all_tuples(iterable.obj.iterable)
    if isinstance(iterable, Obj) and isinstance(iterable.obj, Zip):
        return all(_all_tuples(it) for it in iterable.obj.iterables)
    return False


def _range_values(lw, node, args):
    values = args.args
    lower, upper, step = (PyConst(0), values[0], PyConst(1)) if len(values) == 1 else \
        (values[0], values[1], values[2] if len(values) == 3 else PyConst(1))
    for value in (lower, upper):
        if not (isinstance(value, PyConst) or isinstance(value, Value) or hasattr(value, "value")):
            raise UserError(node, f"range bound must be an integer, not {describe(value)}")
    return lower, upper, step


def _min(lw, node, a, b):
    from .intrinsics import HANDLERS
    return HANDLERS["min"](lw, node, [a, b], {})


def _max0(lw, node, a):
    from .intrinsics import HANDLERS
    return HANDLERS["max"](lw, node, [a, PyConst(0)], {})
