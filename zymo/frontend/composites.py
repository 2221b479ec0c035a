"""Indexing beyond one element of one array: slices of arrays inside kernels (views), record
arrays (a structured dtype: one strided array per field) and their records.

Neither has IR of its own. A view's element is its base array's at `start + k * step` on each
sliced axis, so loads, stores, atomics and derivatives are the base array's; a record's field
is an element of that field's array.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.types import Array
from ..ir.values import Value
from ..ops import arith
from .convert import UserError, describe
from .values import Obj, PyConst, Rec, RecRef, Tup, View, Weak


@dataclass(frozen=True)
class SliceArgs:
    """`lo:hi:step` as written in a subscript (None where left out)."""

    lower: object
    upper: object
    step: object


def is_array(value) -> bool:
    return isinstance(value, Value) and isinstance(value.type, Array)


def whole(lw, array: Value) -> View:
    """The view of all of `array`."""
    return View(array, tuple(("slice", PyConst(0), 1, extent)
                             for extent in lw.shape_of(array).items))


def access(lw, node, base, index):
    """What `base[index]` denotes: ("element", array, indices) for one element, or a frontend
    value (a view, a record, a record array's field)."""
    if isinstance(base, Rec):
        if isinstance(index, Obj) and isinstance(index.obj, str):
            return field_of(node, base, index.obj)
        items = list(index.items) if isinstance(index, Tup) else [index]
        if any(isinstance(item, Obj) for item in items):
            raise UserError(node, "slices of record arrays are not supported in kernels",
                            "index one record, a[i], and read its fields")
        array, indices = element(lw, node, base.first, items, base.ndim)
        return RecRef(base, tuple(indices))
    if isinstance(base, RecRef):
        if not (isinstance(index, Obj) and isinstance(index.obj, str)):
            raise UserError(node, "a record is indexed by a field name", "write r['x'] or r.x")
        return record_field(lw, node, base, index.obj)
    if not (is_array(base) or isinstance(base, View)):
        return None
    items = list(index.items) if isinstance(index, Tup) else [index]
    if is_array(base) and not any(_is_slice(item) for item in items) and \
            len(items) >= base.type.ndim:
        return ("element",) + element(lw, node, base, items)
    view = base if isinstance(base, View) else whole(lw, base)
    if len(items) > view.ndim:
        raise UserError(node, f"{view.ndim}-d view indexed with {len(items)} indices",
                        "give at most one index per dimension")
    items += [Obj(SliceArgs(None, None, None))] * (view.ndim - len(items))
    given = iter(items)
    axes = []
    for axis in view.axes:
        if axis[0] == "index":
            axes.append(axis)
            continue
        _, start, step, extent = axis
        item = next(given)
        if _is_slice(item):
            lo, new_step, count = slice_bounds(lw, node, item.obj, extent)
            axes.append(("slice", _offset(lw, node, start, lo, step), step * new_step, count))
        else:
            k = _index(lw, node, item, extent)
            axes.append(("index", _offset(lw, node, start, k, step)))
    if all(axis[0] == "index" for axis in axes):
        return ("element", view.base, [lw.materialize(axis[1], node=node) for axis in axes])
    return View(view.base, tuple(_materialized(lw, node, axis) for axis in axes))


def element(lw, node, array: Value, items, ndim: int | None = None
            ) -> tuple[Value, list[Value]]:
    """The array and integer indices of `array[items]`, one index per dimension (per each of
    its first `ndim` dimensions: the records of a record array's field)."""
    ndim = array.type.ndim if ndim is None else ndim
    if len(items) != ndim:
        raise UserError(node, f"{ndim}-d {'array' if ndim == array.type.ndim else 'record array'}"
                              f" indexed with {len(items)} "
                              f"{'index' if len(items) == 1 else 'indices'}",
                        "give one index per dimension, e.g. a[i, j] for a 2-d array")
    shape = None
    indices = []
    for axis, item in enumerate(items):
        if isinstance(item, PyConst) and isinstance(item.value, int) and item.value < 0 \
                and not isinstance(item.value, bool):
            shape = shape or lw.shape_of(array)   # a literal negative index counts from the end
            item = lw.binary("add", shape.items[axis], item, node)
        indices.append(_integer(lw, node, item))
    return array, indices


def record_field(lw, node, ref: RecRef, name: str):
    """Field `name` of one record: ("element", array, indices) for a number, or a view of
    the field's array at the record for a field that is an array, `('j', 'f4', (3, 2))`."""
    array = field_of(node, ref.rec, name)
    subshape = ref.rec.subshape(name)
    indices = list(ref.indices) or [lw.materialize(PyConst(0), node=node)] * ref.rec.ndim
    if not subshape:
        return ("element", array, indices)
    return View(array, tuple(("index", i) for i in indices) +
                tuple(("slice", PyConst(0), 1, PyConst(extent)) for extent in subshape))


def strings_view(lw, chars: Value, length: int) -> View:
    """An array of NumPy strings (`S12`, `U12`) as the view of its characters' array whose
    last axis, the characters of one string, has its extent known: `a[i]` is one string,
    which a constant string is stored into (store_whole)."""
    axes = whole(lw, chars).axes
    return View(chars, axes[:-1] + (("slice", PyConst(0), 1, PyConst(length)),))


def records_view(lw, rec: Rec) -> View:
    """The view whose shape is the record array's (its first field without the field's own
    dimensions)."""
    extents = lw.shape_of(rec.first).items
    return View(rec.first, tuple(("slice", PyConst(0), 1, extents[axis]) if axis < rec.ndim
                                 else ("index", PyConst(0))
                                 for axis in range(len(extents))))


def store_whole(lw, node, dest, value) -> None:
    """`dest = value` where `dest` is more than one element: a record (every field is
    copied from the record `value`) or a view with a shape known at compile time (a field
    that is an array, `r.j = src`: each element from `value`'s, or `value` itself for a
    number)."""
    if isinstance(dest, tuple):
        lw.store(dest[1], dest[2], value, node)
        return
    if isinstance(dest, RecRef):
        if not isinstance(value, RecRef):
            raise UserError(node, f"cannot store {describe(value)} in a record",
                            "assign a record, a[i] = b[j], or assign its fields one by one")
        for name, _ in dest.rec.fields:
            if value.rec.field(name) is None:
                raise UserError(node, f"the record assigned has no field '{name}'",
                                "assign records of the same dtype")
            store_whole(lw, node, record_field(lw, node, dest, name),
                        _read(lw, node, record_field(lw, node, value, name)))
        return
    assert isinstance(dest, View)
    extents = [axis[3] for axis in dest.axes if axis[0] == "slice"]
    if isinstance(value, Obj) and isinstance(value.obj, (str, bytes)):
        return _store_string(lw, node, dest, extents, value.obj)
    if not all(isinstance(e, PyConst) for e in extents):
        raise UserError(node, "assigning to a whole array view needs its shape known at "
                              "compile time", "assign its elements in a loop")
    import itertools
    source = whole(lw, value) if is_array(value) else value
    for position in itertools.product(*(range(e.value) for e in extents)):
        at = Tup(tuple(PyConst(k) for k in position))
        target = access(lw, node, dest, at)
        if isinstance(source, View):
            if source.ndim != len(extents):
                raise UserError(node, f"cannot assign a {source.ndim}-d array to a "
                                      f"{len(extents)}-d one", "assign arrays of one shape")
            item = _read(lw, node, access(lw, node, source, at))
        elif isinstance(source, (RecRef, Rec, Tup, Obj)):
            raise UserError(node, f"cannot store {describe(value)} in an array")
        else:
            item = source
        lw.store(target[1], target[2], item, node)


def _store_string(lw, node, dest: View, extents, text) -> None:
    """A constant string stored into one string of an array of strings (the characters of
    `dest`): its bytes (`S`) or code points (`U`), then zeros, cut to the length as NumPy
    cuts it."""
    if len(extents) != 1 or not isinstance(extents[0], PyConst) or \
            not dest.base.type.dtype.is_int:
        raise UserError(node, "a string is stored into one element of an array of strings",
                        "assign it to a[i] of an array of dtype 'S12' or 'U12'")
    length = extents[0].value
    if dest.base.type.dtype.bits == 8:
        if isinstance(text, str):
            raise UserError(node, f"str {text!r} stored into a bytes array (dtype S)",
                            f"write the bytes b{text!r}, or use a unicode (U) array")
        codes = list(text)
    else:
        codes = [ord(c) for c in (text.decode("ascii") if isinstance(text, bytes) else text)]
    codes = (codes + [0] * length)[:length]
    for position, code in enumerate(codes):
        target = access(lw, node, dest, PyConst(position))
        lw.store(target[1], target[2], lw.constant(code, dest.base.type.dtype), node)


def _read(lw, node, found):
    """The value of what `access` found: an element is loaded, anything else is itself."""
    from ..ops import memory
    if isinstance(found, tuple):
        return lw.b.value(memory.Load, found[1], *found[2])
    return found


def field_of(node, rec: Rec, name: str) -> Value:
    array = rec.field(name)
    if array is None:
        raise UserError(node, f"the record has no field '{name}'",
                        f"its fields are {', '.join(n for n, _ in rec.fields)}")
    return array


def slice_bounds(lw, node, s: SliceArgs, extent):
    """(first index, step, count) of `lo:hi:step` over an axis of `extent`, as Python's
    `slice.indices` gives them (negative bounds count from the end, then clamp)."""
    step = PyConst(1) if s.step is None else s.step
    if not (isinstance(step, PyConst) and isinstance(step.value, int)) or step.value == 0:
        raise UserError(node, "a slice step must be a non-zero integer known at compile time",
                        "write a literal step such as a[::2], or index in a loop")
    step = step.value
    if step > 0:
        lo = PyConst(0) if s.lower is None else _clamped(lw, node, s.lower, extent, 0)
        hi = extent if s.upper is None else _clamped(lw, node, s.upper, extent, 0)
        span = lw.binary("sub", hi, lo, node)
        count = lw.binary("floordiv", lw.binary("add", span, PyConst(step - 1), node),
                          PyConst(step), node)
    else:
        last = lw.binary("sub", extent, PyConst(1), node)
        lo = last if s.lower is None else _clamped(lw, node, s.lower, extent, -1)
        hi = PyConst(-1) if s.upper is None else _clamped(lw, node, s.upper, extent, -1)
        span = lw.binary("sub", lo, hi, node)
        count = lw.binary("floordiv", lw.binary("add", span, PyConst(-step - 1), node),
                          PyConst(-step), node)
    return lo, step, _max(lw, node, count, PyConst(0))


def _clamped(lw, node, bound, extent, low: int):
    """A slice bound: negative counts from the end, then clamped to [low, extent + low]."""
    bound = _integer_value(lw, node, bound)
    if isinstance(bound, PyConst):
        if bound.value < 0:
            bound = lw.binary("add", extent, bound, node)
    else:
        negative = lw.compare("lt", bound, PyConst(0), node)
        x, y, _, _ = lw.unify_pair(lw.binary("add", extent, bound, node), bound, node)
        bound = lw.b.value(arith.Select, negative, x, y)
    upper = lw.binary("add", extent, PyConst(low), node)
    return _min(lw, node, _max(lw, node, bound, PyConst(low)), upper)


def _min(lw, node, a, b):
    from .intrinsics import HANDLERS
    return HANDLERS["min"](lw, node, [a, b], {})


def _max(lw, node, a, b):
    from .intrinsics import HANDLERS
    return HANDLERS["max"](lw, node, [a, b], {})


def _index(lw, node, item, extent):
    item = _integer_value(lw, node, item)
    if isinstance(item, PyConst) and item.value < 0:
        return lw.binary("add", extent, item, node)
    return item


def _offset(lw, node, start, k, step: int):
    """start + k * step, without the arithmetic where it is the identity."""
    scaled = k if step == 1 else lw.binary("mul", k, PyConst(step), node)
    if isinstance(start, PyConst) and start.value == 0:
        return scaled
    return lw.binary("add", start, scaled, node)


def _materialized(lw, node, axis):
    """An axis whose values are IR values or Python ints (no weak values: views cross
    function boundaries as their leaves)."""
    return (axis[0],) + tuple(v if isinstance(v, (int, PyConst)) else
                              lw.materialize(v, node=node) for v in axis[1:])


def _integer_value(lw, node, item):
    if isinstance(item, Weak):
        item = item.value
    if isinstance(item, PyConst):
        if not isinstance(item.value, int) or isinstance(item.value, bool):
            raise UserError(node, f"array index must be an integer, not {item.value!r}")
        return item
    if not (isinstance(item, Value) and not isinstance(item.type, Array)
            and item.type.is_int):
        raise UserError(node, f"array index must be an integer, not {describe(item)}",
                        "convert with int(...)")
    return item


def _integer(lw, node, item) -> Value:
    return lw.materialize(_integer_value(lw, node, item), node=node)


def _is_slice(item) -> bool:
    return isinstance(item, Obj) and isinstance(item.obj, SliceArgs)
