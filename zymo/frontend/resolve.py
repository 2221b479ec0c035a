"""Names in kernels: locals, closure cells, module globals and builtins, turned into frontend
values; calls dispatched to intrinsics, casts and device functions."""
from __future__ import annotations

import ast
import builtins
import enum
import difflib
import types as pytypes

import numpy as np

from .. import lang
from ..ir import types as T
from ..ir.types import Scalar
from ..lang import intrinsics as lang_intrinsics
from ..lang.decorators import DeviceFunction
from ..lang.foreign import ForeignFunction
from ..lang.intrinsics import Intrinsic, Namespace
from . import foreign, half, reductions  # noqa: F401  (zm.fp16's handlers, np.sum's, ...)
from . import cachehints  # noqa: F401  (registers the cache-hinted loads and stores)
from . import enums, vectors
from .complexes import COMPLEX_PATHS, BoundMethod
from .convert import UserError, describe
from .intrinsics import (BUILTIN_PATHS, HANDLERS, NUMPY_PATHS, PYMATH_PATHS, BoundIntrinsic,
                         cast_to, lane_id, python_attribute, special)
from .operators import OPERATOR_PATHS
from .ufuncs import is_array_value, ufunc_loop
from .values import Obj, PyConst, Tup, Weak, is_scalar_value

# Intrinsics that are values rather than functions (`zm.threadIdx.x`, `zm.laneid`).
_VALUE_PATHS = {f"{group}.{axis}" for group in ("threadIdx", "blockIdx", "blockDim", "gridDim")
                for axis in "xyz"} | {"laneid", "warpsize"}


class _CudaAlias:
    """Stands for numba's `cuda` module inside kernels: `cuda.X` means `zm.X` for the names of
    the kernel language (`zymo.lang`, which `zymo` re-exports): intrinsics, types, `func`."""

    def __repr__(self) -> str:
        return "numba's `cuda` module (zymo reads `cuda.X` as `zm.X`)"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(lang, name)


CUDA_ALIAS = _CudaAlias()


def _is_numba_cuda(name: str, obj) -> bool:
    module_name = getattr(obj, "__name__", "")
    if module_name in ("numba.cuda", "numba_cuda.numba.cuda", "zymo.cuda"):
        return True
    return name == "cuda" and not isinstance(obj, (int, float, tuple))


class Resolver:
    def __init__(self, pyfunc):
        self.globals = getattr(pyfunc, "__globals__", {})
        self.closure = {}
        code = getattr(pyfunc, "__code__", None)
        if code is not None and pyfunc.__closure__:
            for name, cell in zip(code.co_freevars, pyfunc.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:
                    pass

    def lookup(self, name: str):
        for scope in (self.closure, self.globals):
            if name in scope:
                obj = scope[name]
                if _is_numba_cuda(name, obj) and not _is_zymo(obj):
                    return Obj(CUDA_ALIAS)
                return self.from_python(obj)
        if hasattr(builtins, name):
            return Obj(getattr(builtins, name))
        return None

    def suggest(self, name: str, local_names) -> str:
        """For `name`, which is not defined: "; did you mean ...?" naming the defined names it
        may misspell, or the zymo intrinsic it names without its module (`syncthreads()` for
        `zm.syncthreads()`); "" when there is none."""
        module = next((alias for alias, obj in self.globals.items()
                       if _is_zymo_module(obj) or _is_numba_cuda(alias, obj)), None)
        if module is not None and not name.startswith("_") and hasattr(lang, name):
            return f"; did you mean '{module}.{name}'?"
        names = [*local_names, *self.closure, *self.globals, *dir(builtins)]
        return did_you_mean(name, [n for n in names
                                   if isinstance(n, str) and n.isidentifier()
                                   and not n.startswith("__")])

    def from_python(self, obj, lw=None):
        if isinstance(obj, enum.Enum):   # before int: an IntEnum member is one
            return enums.member(self, obj, lw)
        if isinstance(obj, (bool, int, float, complex)) and not isinstance(obj, np.generic):
            return PyConst(obj)
        if isinstance(obj, np.generic) and lw is not None:
            return lw.constant(obj.item(), T.scalar_of_dtype(obj.dtype))
        if isinstance(obj, np.generic):
            return Obj(obj)
        if isinstance(obj, tuple):
            return Tup(tuple(self.from_python(item, lw) for item in obj),
                       getattr(obj, "_fields", None))
        return Obj(_zymo_type(obj))

    def attribute(self, base: Obj, attr: str, node, lw):
        try:
            obj = python_attribute(base.obj, attr)
        except AttributeError:
            raise self._no_attribute(base.obj, attr, node) from None
        if isinstance(obj, Intrinsic) and obj.path in _VALUE_PATHS:
            return self.intrinsic_value(obj.path, lw)
        value = self.from_python(obj, lw)
        return value

    def _no_attribute(self, obj, attr: str, node) -> UserError:
        """The error for `obj.attr` where `obj` has no `attr`, with the names it may misspell."""
        hint = ""
        if obj is CUDA_ALIAS or _is_zymo_module(obj):
            hint = "README.md lists the kernel language zymo supports"
        # named as the kernel wrote it (`zm.threadIdx`, `math`), where it is a module of
        # intrinsics or functions
        written = ast.unparse(node.value) if isinstance(node, ast.Attribute) else ""
        if isinstance(obj, Namespace):     # zm.threadIdx, zm.atomic, zm.math, ...
            what = written or f"zm.{obj.path}"
            names = [n for n in dir(obj) if isinstance(getattr(obj, n), Intrinsic)]
            # `zm.threadIdx.w` is close to none of x, y, z: a namespace's few names are
            # listed (zm.atomic's 14 too, not zm.math's dozens)
            if len(names) <= 16:
                hint = f"{what} has {', '.join(names[:-1])} and {names[-1]}" \
                    if len(names) > 1 else f"{what} has {names[0]}"
        elif isinstance(obj, pytypes.ModuleType) or obj is CUDA_ALIAS:
            what = written or f"module '{getattr(obj, '__name__', 'cuda')}'"
            names = _public_names(lang if obj is CUDA_ALIAS else obj)
        else:
            what, names = describe(Obj(obj)), _public_names(obj)
        return UserError(node, f"{what} has no attribute '{attr}'{did_you_mean(attr, names)}",
                         hint)

    def intrinsic_value(self, path: str, lw):
        if path == "laneid":
            return lane_id(lw)
        if path == "warpsize":
            return PyConst(32)
        return special(lw, path)

    def call(self, lw, callee, args, kwargs, node):
        if not isinstance(callee, Obj):
            raise UserError(node, f"{describe(callee)} is not callable")
        fn = callee.obj
        path = None
        if enums.is_enum_class(fn):
            return enums.class_call(lw, fn, args, node)
        if not (isinstance(fn, DeviceFunction) or hasattr(fn, "py_func")
                or isinstance(fn, pytypes.FunctionType)):
            # what is not a device function takes IntEnum members as the ints they are
            args = [enums.plain(a) for a in args]
            kwargs = {k: enums.plain(v) for k, v in kwargs.items()}
        if isinstance(fn, BoundIntrinsic):
            return HANDLERS[fn.path](lw, node, [fn.receiver, *args], kwargs)
        if isinstance(fn, Intrinsic):
            path = fn.path
        elif _hashable(fn) and fn in BUILTIN_PATHS:
            path = BUILTIN_PATHS[fn]
        elif _hashable(fn) and fn in PYMATH_PATHS:
            path = PYMATH_PATHS[fn]
        elif isinstance(fn, np.ufunc) and any(is_array_value(a) for a in
                                              [*args, *kwargs.values()]):
            return ufunc_loop(lw, fn, list(args), dict(kwargs), node)
        elif _hashable(fn) and fn in NUMPY_PATHS:
            path = NUMPY_PATHS[fn]
        elif _hashable(fn) and fn in OPERATOR_PATHS:
            path = OPERATOR_PATHS[fn]
        elif _hashable(fn) and fn in COMPLEX_PATHS:
            path = COMPLEX_PATHS[fn]
        elif isinstance(fn, BoundMethod):
            return fn.call(lw, node, args)
        if path is not None:
            handler = HANDLERS.get(path)
            if handler is None:
                raise UserError(node, f"{path}() is not supported in kernels")
            return handler(lw, node, args, kwargs)
        if getattr(fn, "zymo_transform", None) is not None:
            from .transforms import TRANSFORMS
            return TRANSFORMS[fn.zymo_transform](lw, node, fn, args, kwargs)
        vector = vectors.spec_of(fn)
        if vector is not None:
            return vectors.construct(lw, node, vector, args, kwargs)
        if fn is builtins.range:
            from .lower import RangeArgs
            return Obj(RangeArgs(args, node))
        if fn is builtins.enumerate or fn is builtins.zip:
            from .iteration import enumerate_of, zip_of
            return (enumerate_of if fn is builtins.enumerate else zip_of)(lw, node, args, kwargs)
        if isinstance(fn, Scalar) or (isinstance(fn, type) and issubclass(fn, np.generic)):
            target = fn if isinstance(fn, Scalar) else T.scalar_of_dtype(np.dtype(fn))
            if len(args) != 1:
                raise UserError(node, f"{target}(...) converts one value")
            return cast_to(lw, node, args[0], target)
        foreign_function = getattr(fn, "zymo_foreign", None)
        if isinstance(foreign_function, ForeignFunction):
            return foreign.call(lw, node, foreign_function, args, kwargs)
        if foreign.is_from_buffer(fn):
            return foreign.from_buffer(lw, node, args, kwargs)
        if isinstance(fn, DeviceFunction) or hasattr(fn, "py_func") or \
                isinstance(fn, pytypes.FunctionType):
            if kwargs:
                raise UserError(node, "keyword arguments to device functions are not supported",
                                "pass arguments by position")
            if getattr(fn, "is_zymo_kernel", False) and \
                    not getattr(fn, "callable_from_kernels", False):
                raise UserError(node, "a kernel cannot be called from a kernel",
                                "make the callee a @zm.func device function")
            py_func = fn.py_func if hasattr(fn, "py_func") else fn
            declared = getattr(fn, "param_types", None)
            if declared is not None and len(declared) == len(args):
                args = [cast_to(lw, node, a, t) if isinstance(t, Scalar) and
                        (is_scalar_value(a) or isinstance(a, (PyConst, Weak)))
                        else a for a, t in zip(args, declared)]
            return lw.compiler.call_device(lw, py_func, args, node,
                                           getattr(fn, "return_type", None))
        if isinstance(fn, Namespace):
            raise UserError(node, f"zm.{fn.path} is a namespace, not a function")
        raise UserError(node, f"cannot call {describe(callee)} in a kernel",
                        "kernels can call zm intrinsics, math functions and @zm.func functions")


def did_you_mean(name: str, candidates) -> str:
    """"; did you mean 'x'?" naming those of `candidates` close to `name` (a misspelling),
    or "" when none is."""
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=3, cutoff=0.75)
    if not close:
        return ""
    quoted = [f"'{c}'" for c in close]
    listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f"; did you mean {listed}?"


def _public_names(obj) -> list[str]:
    return [n for n in dir(obj) if not n.startswith("_")]


def _hashable(obj) -> bool:
    try:
        hash(obj)
        return True
    except TypeError:
        return False


def _is_zymo_module(obj) -> bool:
    """`obj` is the package `zymo` (as `zm`) or its numba-compatible `zymo.cuda`: the frontend
    knows them by name, not by import."""
    return isinstance(obj, pytypes.ModuleType) and obj.__name__ in ("zymo", "zymo.cuda")


def _zymo_type(obj):
    """The IR type an object stands for where it carries `zymo_type` (numba-style types of
    `zymo.cuda`: `float32`, `int32[:, ::1]`), else the object itself."""
    if isinstance(obj, (pytypes.ModuleType, Intrinsic, Namespace, type)):
        return obj
    try:
        found = getattr(obj, "zymo_type", None)
    except TypeError:       # a type zymo cannot compile: kept, and named where it is used
        return obj
    return found if isinstance(found, (Scalar, T.Array)) else obj


def _is_zymo(obj) -> bool:
    return getattr(obj, "__name__", "").startswith("zymo") or obj is lang_intrinsics
