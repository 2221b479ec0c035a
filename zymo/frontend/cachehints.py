"""numba's cache-hinted loads and stores in kernels: `cuda.ldcg(a, i)` is `a[i]` and
`cuda.stcs(a, (i, j), v)` is `a[i, j] = v`, read or written with PTX's cache operator
(`memory.cached_load` / `memory.cached_store`). The index is one integer for a 1-d array,
else a tuple of one integer per dimension, as numba types them; bounds are checked as for
`a[i]`."""
from __future__ import annotations

from ..ir.types import Array
from ..ops.cachehint import LOAD_HINTS, STORE_HINTS, CachedLoad, CachedStore
from . import composites
from .convert import UserError, describe
from .intrinsics import HANDLERS, _arity
from .values import Obj, PyConst, Tup, View, Weak


def _index_type(item) -> str | None:
    """numba's name for the type of an index item that is not an integer, or None."""
    if isinstance(item, Weak):
        item = item.value
    if isinstance(item, PyConst):
        if isinstance(item.value, bool):
            return "bool"
        if isinstance(item.value, int):
            return None
        return {float: "float64", complex: "complex128"}[type(item.value)]
    t = getattr(item, "type", None)
    if t is not None and not isinstance(t, Array) and t.is_int:
        return None
    if t is not None and not isinstance(t, Array):
        return t.dtype.name
    return describe(item)


def _element(lw, node, name: str, array, index):
    """(array, integer indices) of the element `name(array, index, ...)` names."""
    if not (composites.is_array(array) or isinstance(array, View)):
        raise UserError(node, f"{name} operates on arrays, not {describe(array)}",
                        f"pass an array: {name}(a, i)")
    base = array.base if isinstance(array, View) else array
    ndim = array.ndim if isinstance(array, View) else array.type.ndim
    if base.type.space != "global":
        raise UserError(node, f"{name} accesses global memory, and this is a "
                              f"{base.type.space} array", "index it as usual: a[i]")
    dtype = base.type.dtype
    if not (dtype.is_int or dtype.is_float):
        raise UserError(node, f"{name} requires array of integer or float type, got {dtype}",
                        "read and write other arrays with a[i]")
    if isinstance(index, Tup):
        if len(index.items) != ndim:
            raise UserError(node, f"Expected {ndim} indices, got {len(index.items)}",
                            "give one index per dimension")
        items = list(index.items)
    else:
        if ndim != 1:
            raise UserError(node, f"Expected {ndim} indices, got a scalar",
                            f"index with a tuple: {name}(a, (i, j))")
        items = [index]
    for item in items:
        wrong = _index_type(item)
        if wrong is not None:
            raise UserError(node, f"{wrong} is not a valid index", "index with integers")
    if isinstance(array, View):
        found = composites.access(lw, node, array, Tup(tuple(items)))
        return found[1], found[2]
    return composites.element(lw, node, array, items)


def _positional(node, name: str, args, kwargs, count: int) -> None:
    if kwargs:
        raise UserError(node, f"{name} takes its arguments by position, not "
                              f"{', '.join(kwargs)}=", f"write {name}(a, i{', v' * (count == 3)})")
    _arity(node, args, count, count, name)


def _load(hint: str):
    name = f"ld{hint}"

    def lower(lw, node, args, kwargs):
        _positional(node, name, args, kwargs, 2)
        array, indices = _element(lw, node, name, *args)
        return lw.b.value(CachedLoad, array, *indices, hint=hint)

    return lower


def _store(hint: str):
    name = f"st{hint}"

    def lower(lw, node, args, kwargs):
        _positional(node, name, args, kwargs, 3)
        array, index, value = args
        array, indices = _element(lw, node, name, array, index)
        element = array.type.dtype
        if isinstance(value, (Tup, Obj)) or getattr(getattr(value, "type", None),
                                                    "ndim", None) is not None:
            raise UserError(node, f"cannot store {describe(value)} in an array of {element}")
        if isinstance(value, PyConst) and isinstance(value.value, float) and element.is_int:
            value = PyConst(int(value.value))   # numba converts the value to the array's type
        lw.b.create(CachedStore, array, *indices, lw.materialize(value, element, node),
                    hint=hint)
        return PyConst(0)

    return lower


for _hint in LOAD_HINTS:
    HANDLERS[f"ld{_hint}"] = _load(_hint)
for _hint in STORE_HINTS:
    HANDLERS[f"st{_hint}"] = _store(_hint)
