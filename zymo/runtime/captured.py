"""GPU arrays a kernel names at module level or in a closure (numba's "global" semantics: a
captured NumPy array is constant data, frozen at compile time; a captured device array is
passed by reference at every launch, so writes made after the kernel compiled are seen).

They are found before compiling, from the names the kernel and the device functions it can
reach refer to, so that the launch knows which arrays to pass after the user's arguments.
"""
from __future__ import annotations

import types as pytypes

from .cuda.arrays import is_gpu_array


def captured_arrays(py_func) -> tuple:
    """The GPU arrays `py_func` (and the functions it names) may read, each once, in the
    order first named."""
    found: dict[int, object] = {}
    seen: set[int] = set()

    def visit(fn) -> None:
        fn = getattr(fn, "py_func", fn)
        code = getattr(fn, "__code__", None)
        if code is None or id(fn) in seen:
            return
        seen.add(id(fn))
        scope = dict(getattr(fn, "__globals__", {}))
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                scope[name] = cell.cell_contents
            except ValueError:   # an empty cell
                pass
        for name in _names(code):
            obj = scope.get(name)
            if obj is None:
                continue
            if is_gpu_array(obj) or getattr(type(obj), "zymo_by_reference", False):
                found.setdefault(id(obj), obj)
            elif isinstance(obj, pytypes.FunctionType) or hasattr(obj, "py_func"):
                visit(obj)

    visit(py_func)
    return tuple(found.values())


def _names(code) -> list[str]:
    names = list(code.co_names) + list(code.co_freevars)
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            names.extend(_names(const))
    return names
