"""NumPy ufuncs called on arrays inside a kernel (numba's `np.sin(x, out)`): the loop nest over
the output that applies the ufunc element by element, run by the thread that calls it. It is
written as Python syntax and lowered like the kernel's own loops, so the scalar ufunc's rules
(typing, every backend, derivatives) are the ones that apply."""
from __future__ import annotations

import ast

import numpy as np

from ..ir.values import Value
from .convert import UserError
from .values import Choice, Obj, View, holds_array


def is_array_value(value) -> bool:
    """An array, a Choice among arrays, or a slice of one (a View)."""
    return holds_array(value) or isinstance(value, View)


def _ndim(value) -> int:
    if isinstance(value, Choice):
        return value.arrays[0].type.ndim
    if isinstance(value, Value):
        return value.type.ndim
    return value.ndim


def ufunc_loop(lw, fn: np.ufunc, args: list, kwargs: dict, node):
    name = fn.__name__
    out = kwargs.pop("out", None)
    if kwargs:
        raise UserError(node, f"np.{name}() in a kernel takes out=, not {', '.join(kwargs)}=")
    inputs, rest = list(args[:fn.nin]), list(args[fn.nin:])
    if out is None and len(rest) == 1:
        out = rest[0]
    elif rest:
        raise UserError(node, f"np.{name}() takes {fn.nin} inputs and one output array")
    if fn.nout != 1 or out is None or not is_array_value(out):
        raise UserError(node, f"np.{name}() of an array inside a kernel needs an output array "
                              "(kernels do not allocate)",
                        f"pass one: np.{name}({', '.join(['x'] * fn.nin)}, out)")
    ndim = _ndim(out)
    for value in inputs:
        if is_array_value(value) and _ndim(value) != ndim:
            raise UserError(node, f"np.{name}(): an input of {_ndim(value)} dimensions and an "
                                  f"output of {ndim} (no broadcasting inside kernels)",
                            "index the arrays to the same shape first")
    bound = {"$ufunc": Obj(fn), "$ufunc_out": out}
    bound.update({f"$ufunc_in{k}": value for k, value in enumerate(inputs)})
    saved = {key: lw.env.get(key) for key in bound}
    lw.env.update(bound)
    try:
        lw.visit_stmt(_loop_nest(inputs, ndim, node))
    finally:
        for key, value in saved.items():
            if value is None:
                lw.env.pop(key, None)
            else:
                lw.env[key] = value
    return out


def _loop_nest(inputs: list, ndim: int, node) -> ast.stmt:
    """for $i0 in range($ufunc_out.shape[0]): ... $ufunc_out[$i0, ...] = $ufunc(in[$i0, ...])"""
    def name(text, store=False):
        return ast.Name(id=text, ctx=ast.Store() if store else ast.Load())

    def element(text, store=False):
        index = ast.Tuple(elts=[name(f"$ufunc_i{d}") for d in range(ndim)], ctx=ast.Load())
        return ast.Subscript(value=name(text), slice=index,
                             ctx=ast.Store() if store else ast.Load())

    operands = [element(f"$ufunc_in{k}") if is_array_value(v) else name(f"$ufunc_in{k}")
                for k, v in enumerate(inputs)]
    body: ast.stmt = ast.Assign(targets=[element("$ufunc_out", store=True)],
                                value=ast.Call(func=name("$ufunc"), args=operands, keywords=[]))
    for d in reversed(range(ndim)):
        extent = ast.Subscript(value=ast.Attribute(value=name("$ufunc_out"), attr="shape",
                                                   ctx=ast.Load()),
                               slice=ast.Constant(d), ctx=ast.Load())
        body = ast.For(target=name(f"$ufunc_i{d}", store=True),
                       iter=ast.Call(func=name("range"), args=[extent], keywords=[]),
                       body=[body], orelse=[])
    for child in ast.walk(body):
        ast.copy_location(child, node)
        child.end_lineno, child.end_col_offset = node.end_lineno, node.end_col_offset
    return body
