"""Entry points of the frontend: lower a kernel for one signature into a Module, compiling the
device functions it calls (one specialization per argument shape)."""
from __future__ import annotations

import ast
import inspect
from typing import NamedTuple

from ..diagnostics import CompileError, Diagnostic
from ..ir import types as T
from ..ir.module import Module
from ..ir.operation import Region
from ..ir.types import Array, FunctionType, Scalar
from ..ir.values import Value
from ..lang.params import Param
from ..ops import control
from . import carried, composites, recursion
from .convert import UserError
from .lower import Lowerer
from .resolve import Resolver
from .scopes import RETURNED, RETVAL
from .source import Source
from .values import Member, Obj, PyConst, Rec, RecRef, Tup, Unset, View, Weak


class FunctionCompiler:
    def __init__(self, module: Module, kernel_name: str, captured: tuple = (),
                 checked: bool = False, fastmath: bool = False):
        self.module = module
        # a checked build raises what Python would (division by zero, a tuple index out of
        # range: frontend/raising.py); fastmath divides floats unchecked, as numba's
        self.checked, self.fastmath = checked, fastmath
        # GPU arrays the kernel captures: id -> (array, Param), passed after its arguments
        self.captured = {id(obj): (obj, param) for obj, param in captured}
        self.kernel_name = kernel_name
        self.cache: dict = {}
        self.stack: list = []
        self.diags: list[Diagnostic] = []
        self.is_kernel = True

    # ---- functions -----------------------------------------------------------------------
    def lower(self, pyfunc, arguments: list, kind: str, name: str,
              pending: recursion.Pending | None = None):
        """Lower `pyfunc` called with frontend `arguments`; returns (func op, result shape).
        `pending`: how recursive calls of a device function see it."""
        source = Source(pyfunc)
        tree = source.tree
        lw = Lowerer(source, Resolver(pyfunc), self)
        lw.b.loc = source.loc_of_def
        lw.recursion = pending
        if pending is not None:
            pending.returns_value = any(isinstance(n, ast.Return) and n.value is not None
                                        for n in ast.walk(tree))
        params = _positional_params(tree, source, lw)
        defaults = list(pyfunc.__defaults__ or ())
        if len(arguments) < len(params) - len(defaults) or len(arguments) > len(params):
            raise CompileError(Diagnostic(source.loc_of_def, f"{pyfunc.__name__} takes "
                                          f"{len(params)} arguments, got {len(arguments)}"))
        missing = len(params) - len(arguments)
        arguments = list(arguments) + [lw.resolver.from_python(d)
                                       for d in defaults[len(defaults) - missing:]]
        region = Region()
        names: list[str] = []
        for param, value in zip(params, arguments):
            lw.env[param] = _bind_param(region, param, value, names)
        if kind == "kernel":
            for key, (obj, param) in self.captured.items():
                lw.captures[key] = region.block.add_arg(param.type, f"captured{len(names)}")
                names.append(f"captured{len(names)}")
        lw.capture_region, lw.capture_names = region, names
        lw.env[RETURNED] = PyConst(False)
        lw.env[RETVAL] = Unset()
        saved_kind, self.is_kernel = self.is_kernel, kind == "kernel"
        try:
            with lw.b.at_end(region.block):
                for param in params:
                    if isinstance(lw.env.get(param), _Chars):   # (its shape needs IR)
                        chars = lw.env[param]
                        lw.env[param] = composites.strings_view(lw, chars.array, chars.length)
                lw.visit_block(tree.body)
                shape, leaves = self._results(lw, tree, pending)
                lw.b.loc = source.loc(tree.body[-1]) if tree.body else source.loc_of_def
                lw.b.create(control.Return, *leaves)
        finally:
            self.is_kernel = saved_kind
        self.diags.extend(lw.diags)
        self.last_captures = list(lw.captures)
        ftype = FunctionType(tuple(a.type for a in region.block.args),
                             tuple(v.type for v in leaves))
        func = control.Func([], [], dict(sym_name=name, function_type=ftype, kind=kind,
                                         arg_names=tuple(names)), [region],
                            loc=source.loc_of_def, id=f"{source.loc_of_def.line}:func")
        self.module.add(func)
        return func, shape

    def _results(self, lw: Lowerer, tree, pending: recursion.Pending | None):
        value = lw.env.get(RETVAL)
        try:
            if value is None or isinstance(value, Unset):
                shape = carried.Missing()
            else:
                shape = carried.abstract(value, "return value", tree)
                if isinstance(shape, carried.Keep):
                    raise UserError(tree, "device functions return numbers or tuples of "
                                          "numbers")
                if pending is not None and pending.declared is not None and \
                        isinstance(shape, carried.Leaf):   # converted, as numba's signatures
                    shape = carried.Leaf(pending.declared, False)
            if pending is not None:
                shape = pending.check(shape, tree)
                if pending.assumed is not None and lw.captures:
                    raise UserError(tree, f"recursive device function {pending.name} uses "
                                          f"arrays it does not take as arguments",
                                    "pass the arrays as arguments")
            if isinstance(shape, carried.Missing):
                return shape, []
            return shape, carried.flatten(lw, value, shape, tree)
        except UserError as error:
            lw.report(error, tree)
            return carried.Missing(), []

    def device_function(self, lw: Lowerer, py_func, args: list, node, declared=None):
        """The device function `py_func` compiled for `args` (once per argument shapes):
        (func op, result shape). A call of a function whose body is being lowered is
        recursive (frontend/recursion.py): func op None, the shape the call assumes.
        `declared`: the scalar type an explicit signature says it returns."""
        _check_arity(py_func, len(args), node)
        key = (py_func, tuple(_arg_key(a) for a in args))
        pending = recursion.find(self.stack, py_func, key)
        if pending is not None:
            return None, pending.result_shape(node), ()
        recursion.check_depth(self.stack, py_func, node)
        if key not in self.cache:
            name = py_func.__name__
            suffix = 1
            while name in self.module.functions or name == self.kernel_name or \
                    any(p.name == name for p in self.stack):
                name, suffix = f"{py_func.__name__}_{suffix}", suffix + 1
            pending = recursion.Pending(py_func, key, name, declared)
            self.stack.append(pending)
            errors_before = len(self.diags)
            self.last_captures = []
            try:
                func, shape = self.lower(py_func, args, "device", name, pending)
            except CompileError as error:
                self.diags.extend(error.diagnostics)
                func, shape = None, None
            finally:
                self.stack.pop()
            if len(self.diags) > errors_before:
                func = None
            self.cache[key] = (func, shape, tuple(self.last_captures))
        func, shape, captures = self.cache[key]
        if func is None:
            raise UserError(None, "")  # the callee's errors are already reported
        return func, shape, captures

    def call_device(self, lw: Lowerer, py_func, args: list, node, declared=None):
        args = recursion.widen(lw, self.stack, py_func, args)
        func, shape, captures = self.device_function(lw, py_func, args, node, declared)
        leaves = [leaf for a in args for leaf in arg_leaves(a)]
        leaves += [lw.capture(self.captured[key][0], node) for key in captures]
        if func is None:   # recursive: the function is still being lowered
            name = recursion.find(self.stack, py_func, (py_func, tuple(_arg_key(a)
                                                                      for a in args))).name
            ftype = FunctionType(tuple(v.type for v in leaves), tuple(carried.leaf_types(shape)))
        else:
            name, ftype = func.attrs["sym_name"], func.attrs["function_type"]
        call = lw.b.create(control.Call, *leaves, callee=name, callee_type=ftype)
        if isinstance(shape, carried.Missing):
            return PyConst(0)
        return carried.rebuild(shape, iter(call.results))


def _positional_params(tree: ast.FunctionDef, source: Source, lw: Lowerer) -> list[str]:
    spec = tree.args
    problems = []
    if spec.vararg or spec.kwarg or spec.kwonlyargs:
        problems.append("*args, **kwargs and keyword-only parameters")
    if problems:
        raise CompileError(Diagnostic(source.loc_of_def, f"unsupported parameters: {problems[0]}",
                                      "use plain positional parameters"))
    return [a.arg for a in spec.posonlyargs + spec.args]


class _Chars(NamedTuple):
    """An array of strings while parameters are bound: its characters' array and the
    strings' length; a view of the strings once the function's body starts."""

    array: Value
    length: int


def _bind_param(region: Region, name: str, value, names: list[str]):
    """The frontend value of a parameter inside the function, adding block arguments."""
    if isinstance(value, Param) and value.kind == "tuple":
        return Tup(tuple(_bind_param(region, f"{name}.{field or i}", item, names)
                         for i, (item, field) in enumerate(zip(value.items, value.fields or
                                                               (None,) * len(value.items)))),
                   value.fields)
    if isinstance(value, Param) and value.kind == "enum":   # the value, its class kept
        return Member(value.type, _bind_param(region, name, value.items[0], names))
    if isinstance(value, Member):
        return Member(value.cls, _bind_param(region, name, value.value, names), value.known)
    if isinstance(value, Param) and value.kind == "chars":   # its characters' array
        return _Chars(_bind_param(region, name, value.items[0], names),
                      value.type.itemsize // (1 if value.type.kind == "S" else 4))
    if isinstance(value, Param) and value.kind == "record":
        info = value.type
        rec = Rec(tuple((field, _bind_param(region, f"{name}.{field}", item, names))
                        for field, item in zip(value.fields, value.items)),
                  info.ndim if info is not None else 1, info.subshapes if info else ())
        return RecRef(rec, ()) if info is not None and info.scalar else rec
    if isinstance(value, Param):
        arg = region.block.add_arg(value.type, name)
        names.append(name)
        return Weak(arg) if value.kind == "weak" else arg
    if isinstance(value, Weak):
        arg = region.block.add_arg(value.value.type, name)
        names.append(name)
        return Weak(arg)
    if isinstance(value, Value):
        arg = region.block.add_arg(value.type, name)
        names.append(name)
        return arg
    if isinstance(value, Tup):
        return Tup(tuple(_bind_param(region, f"{name}.{i}", item, names)
                         for i, item in enumerate(value.items)), value.fields)
    if isinstance(value, (View, Rec, RecRef)):   # passed as its leaves, rebuilt over the arguments
        args = [region.block.add_arg(leaf.type, f"{name}.{k}")
                for k, leaf in enumerate(value.leaves())]
        names.extend(f"{name}.{k}" for k in range(len(args)))
        return value.rebuild(iter(args))
    return value  # PyConst and Obj are specialized on, not passed


def _arg_key(value):
    if isinstance(value, Weak):
        return ("weak", value.value.type)
    if isinstance(value, Value):
        return ("value", value.type)
    if isinstance(value, PyConst):
        return ("const", type(value.value).__name__, value.value)
    if isinstance(value, Tup):
        return ("tuple", tuple(_arg_key(item) for item in value.items), value.fields)
    if isinstance(value, Member):
        return ("enum", value.cls, _arg_key(value.value))
    if isinstance(value, (View, Rec, RecRef)):
        return value.key()
    if isinstance(value, Obj):
        try:
            hash(value.obj)
            return ("obj", value.obj)
        except TypeError:
            return ("obj", id(value.obj))
    return ("other", repr(value))


def arg_leaves(value) -> list[Value]:
    if isinstance(value, Weak):
        return [value.value]
    if isinstance(value, Value):
        return [value]
    if isinstance(value, Tup):
        return [leaf for item in value.items for leaf in arg_leaves(item)]
    if isinstance(value, Member):
        return arg_leaves(value.value)
    if isinstance(value, (View, Rec, RecRef)):
        return value.leaves()
    return []


def lower_kernel(pyfunc, params: list[Param], name: str | None = None,
                 captured: tuple = (), checked: bool = False, fastmath: bool = False) -> Module:
    """The IR of kernel `pyfunc` for one signature; CompileError lists every problem.
    `captured`: (GPU array, Param) pairs, the arrays the kernel names outside itself, which
    the kernel takes after its parameters. `checked`: the build raises what Python raises
    (a division by zero, a tuple index out of range), as numba's debug builds do."""
    name = name or pyfunc.__name__
    module = Module(entry=name)
    compiler = FunctionCompiler(module, name, captured, checked, fastmath)
    compiler.lower(pyfunc, params, "kernel", name)
    if compiler.diags:
        unique = list(dict.fromkeys(d for d in compiler.diags if d.message))
        unique.sort(key=lambda d: (d.loc.file, d.loc.line, d.loc.col))
        raise CompileError(unique)
    # the kernel first, then device functions in the order they were compiled
    module.functions = {name: module.functions[name],
                        **{k: v for k, v in module.functions.items() if k != name}}
    return module


def result_types(pyfunc, params: list[Param]) -> tuple:
    """The types device function `pyfunc` returns for arguments of `params` (its result
    tuple flattened); CompileError as lower_kernel."""
    module = Module(entry=pyfunc.__name__)
    compiler = FunctionCompiler(module, pyfunc.__name__)
    func, _shape = compiler.lower(pyfunc, params, "device", pyfunc.__name__)
    if compiler.diags:
        raise CompileError(list(dict.fromkeys(d for d in compiler.diags if d.message)))
    return tuple(func.attrs["function_type"].outputs)


def param_of_value(value) -> Param:
    """The parameter kind of a launch argument (NumPy arrays, NumPy and Python scalars)."""
    import numpy as np
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return Param("value", T.bool_)
    if isinstance(value, np.generic):
        return Param("value", T.scalar_of_dtype(value.dtype))
    if isinstance(value, int):
        return Param("weak", T.i64)
    if isinstance(value, float):
        return Param("weak", T.f64)
    if isinstance(value, Array):
        return Param("array", value)
    if isinstance(value, Scalar):
        return Param("value", value)
    raise TypeError(f"unsupported kernel argument {value!r}")


def _check_arity(py_func, count: int, node) -> None:
    """A call with too few or too many arguments is the caller's error, named at the call."""
    try:
        signature = inspect.signature(py_func)
    except (TypeError, ValueError):
        return
    positional = [p for p in signature.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(required) <= count <= len(positional):
        return
    want = (str(len(positional)) if len(required) == len(positional)
            else f"{len(required)} to {len(positional)}")
    code = getattr(py_func, "__code__", None)
    where = f" (defined at {code.co_filename}:{code.co_firstlineno})" if code else ""
    raise UserError(node, f"{py_func.__name__} takes {want} arguments, got {count}",
                    f"call it as {py_func.__name__}({', '.join(p.name for p in positional)})"
                    f"{where}")
