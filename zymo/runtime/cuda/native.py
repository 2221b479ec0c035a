"""Launchers compiled for the host: per launch plan, CPython functions (METH_FASTCALL) that put
the launch's words straight into stack slots and call cuLaunchKernel.

A warm launch from Python otherwise pays three times for the same work: reading every argument
and building the plan's key, `struct.pack_into` into the argument block, then cuda-bindings'
wrapper converting the handles and the parameter pointer again. llvmlite compiles, once per
plan, straight-line code specialised to the kernel's parameter slots (as CUDA C's launch stub
is), in two entry points (`build_words`, `build_guarded`):

    words(config_address, *words) -> CUresult or WRONG_COUNT
        the slot values, read from the arguments by Python (any array type);
    guarded(config_address, *args) -> CUresult or GUARD_MISS
        the arguments themselves, when each is a zm.DeviceArray or a scalar: the function
        checks that every argument is of the type (and DeviceArray key) the plan was made for
        and that the current device has not changed since the configuration was validated,
        then reads the words itself; on any mismatch it launches nothing and returns
        GUARD_MISS, and the caller takes the general path.

`config_address` points at a `LaunchConfig` (grid, block, shared bytes, stream, device epoch).
A word that cannot be converted raises Python's TypeError or OverflowError, before anything is
launched. The GIL is released around cuLaunchKernel, as cuda-bindings does.
"""
from __future__ import annotations

import ctypes
import itertools
import sys
from dataclasses import dataclass

import llvmlite.ir as ir

from . import driver

WRONG_COUNT = -1
GUARD_MISS = -2
METH_FASTCALL = 0x80

_names = itertools.count()
_i8, _i32, _i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
_f64 = ir.DoubleType()
_ptr = _i8.as_pointer()
_WIDTH = {"i8": 8, "u8": 8, "i16": 16, "u16": 16, "i32": 32, "u32": 32, "i64": 64, "u64": 64}
# (return type, parameter types) of the C API functions the launchers call
_API = {
    "PyLong_AsLongLong": (_i64, [_ptr]),
    "PyLong_AsUnsignedLongLongMask": (_i64, [_ptr]),
    "PyFloat_AsDouble": (_f64, [_ptr]),
    "PyFloat_Pack2": (_i32, [_f64, _ptr, _i32]),   # to half: the JIT has no libcall for it
    "PyObject_IsTrue": (_i32, [_ptr]),
    "PyObject_GetAttr": (_ptr, [_ptr, _ptr]),
    "PyTuple_GetItem": (_ptr, [_ptr, _i64]),
    "Py_DecRef": (None, [_ptr]),
    "PyErr_Occurred": (_ptr, []),
    "PyErr_Clear": (None, []),
    "PyLong_FromLong": (_ptr, [_i64]),
    "PyEval_SaveThread": (_ptr, []),
    "PyEval_RestoreThread": (None, [_ptr]),
}


class LaunchConfig(ctypes.Structure):
    """cuLaunchKernel's arguments before the parameters, and the device epoch they were
    validated under."""
    _fields_ = [("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3),
                ("shared", ctypes.c_uint32), ("stream", ctypes.c_uint64),
                ("epoch", ctypes.c_int64)]


@dataclass(frozen=True)
class ArrayArg:
    """A kernel argument the guarded launcher takes as a DeviceArray with this `_key`."""
    array_type: type
    key: str
    kinds: tuple[str, ...]     # of its words: the pointer, then extents and strides


@dataclass(frozen=True)
class ScalarArg:
    """A kernel argument the guarded launcher takes as an object of exactly `type`."""
    type: type
    kind: str


class _MethodDef(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("meth", ctypes.c_void_p), ("flags", ctypes.c_int),
                ("doc", ctypes.c_char_p)]


_TYPE_OFFSET: int | None = None   # of ob_type in a PyObject, found and verified at first use
_registered = False


def _prepare() -> int | None:
    """Register the C API with the JIT once; the ob_type offset (None: no guarded launchers)."""
    global _registered, _TYPE_OFFSET
    if not _registered:
        import llvmlite.binding as llvm
        for name in _API:
            # Python 3.10 has PyFloat_Pack2 under its older private name
            found = getattr(ctypes.pythonapi, name, None) or getattr(ctypes.pythonapi, "_" + name)
            llvm.add_symbol(name, ctypes.cast(found, ctypes.c_void_p).value)
        samples = (1, 2.5, True, "text", ctypes, LaunchConfig())
        for offset in (8, 24):   # the usual layout; a free-threaded build's
            if all(ctypes.c_void_p.from_address(id(s) + offset).value == id(type(s))
                   for s in samples):
                _TYPE_OFFSET = offset
                break
        _registered = True
    return _TYPE_OFFSET


def build_words(kinds: list[str], function: int, launch_kernel: int, name: str = "kernel"):
    """The words entry point for a kernel whose parameter slots hold `kinds` (type names:
    "u64" for pointers, "i64", "f32", "bool", ...), launching CUfunction `function` through the
    cuLaunchKernel at address `launch_kernel`."""
    return _build(_WordsEntry, name, kinds, (function, launch_kernel))


def build_guarded(kinds: list[str], function: int, launch_kernel: int, args: list,
                  name: str = "kernel"):
    """The guarded entry point for arguments `args` (an ArrayArg or ScalarArg per kernel
    argument, in slot order); None where this Python's object layout is not the usual one."""
    if _prepare() is None:
        return None
    return _build(_GuardedEntry, name, kinds, (function, launch_kernel), args)


def _build(entry_class, name: str, kinds, target, *extra):
    import llvmlite.binding as llvm

    from ...backend.cpu import jit
    state = jit.host()
    _prepare()
    symbol = f"zymo_launch_{next(_names)}"
    keep: list = []          # what the code points at, held by the function object
    module = ir.Module(symbol)
    api = {fn: ir.Function(module, ir.FunctionType(ret or ir.VoidType(), params), fn)
           for fn, (ret, params) in _API.items()}
    entry_class(module, api, symbol, kinds, target, keep, *extra).emit()
    parsed = llvm.parse_assembly(str(module))
    parsed.triple = state.triple
    method = _MethodDef(f"launch_{name}".encode(), jit.load(parsed, symbol), METH_FASTCALL,
                        None)
    keep.append(method)
    return _new_function(method, keep)


def _new_function(method: _MethodDef, keep: list):
    """A builtin function calling `method`; its `self` is `keep`, so the function holds what
    its code points at (CPython also reads the method definition on every call)."""
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]
    return new(ctypes.addressof(method), keep, None)


class _Entry:
    """One METH_FASTCALL function: (self, PyObject *const *args, Py_ssize_t nargs)."""

    def __init__(self, module, api, name: str, kinds, target, keep: list):
        self.api, self.kinds, self.target, self.keep = api, kinds, target, keep
        self.fn = ir.Function(module, ir.FunctionType(_ptr, [_ptr, _ptr.as_pointer(), _i64]),
                              name)
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.fail = self.fn.append_basic_block("fail")
        count = max(len(kinds), 1)
        self.slots = self.b.alloca(_i64, count, name="slots")
        self.pointers = self.b.alloca(_ptr, count, name="pointers")
        with self.b.goto_block(self.fail):
            self.b.ret(ir.Constant(_ptr, None))

    def arg(self, k: int):
        return self.b.load(self.b.gep(self.fn.args[1], [_const(k)]))

    def returning(self, code: int, condition) -> None:
        """Return the Python int `code` when `condition` holds."""
        b = self.b
        leave, stay = self.fn.append_basic_block(), self.fn.append_basic_block()
        b.cbranch(condition, leave, stay)
        b.position_at_end(leave)
        b.ret(b.call(self.api["PyLong_FromLong"], [_const(code)]))
        b.position_at_end(stay)

    def checked(self, value, error_value):
        """`value`, after returning NULL if it is the error value and an error is set."""
        b = self.b
        maybe, ok = self.fn.append_basic_block(), self.fn.append_basic_block()
        is_error = (b.fcmp_ordered("==", value, error_value) if value.type == _f64
                    else b.icmp_signed("==", value, error_value))
        b.cbranch(is_error, maybe, ok)
        b.position_at_end(maybe)
        b.cbranch(_is_set(b, b.call(self.api["PyErr_Occurred"], [])), self.fail, ok)
        b.position_at_end(ok)
        return value

    def store(self, slot_index: int, kind: str, obj) -> None:
        """Convert the Python object `obj` to slot `slot_index` of type `kind`."""
        b, api = self.b, self.api
        slot = b.bitcast(b.gep(self.slots, [_const(slot_index)]), _ptr)
        b.store(slot, b.gep(self.pointers, [_const(slot_index)]))
        if kind in ("f16", "f32", "f64"):
            value = self.checked(b.call(api["PyFloat_AsDouble"], [obj]), ir.Constant(_f64, -1))
            if kind == "f16":
                self.checked(b.call(api["PyFloat_Pack2"], [value, slot, ir.Constant(_i32, 1)]),
                             ir.Constant(_i32, -1))
                return
            if kind == "f32":
                value = b.fptrunc(value, ir.FloatType())
        elif kind == "bool":
            value = b.trunc(self.checked(b.call(api["PyObject_IsTrue"], [obj]),
                                         ir.Constant(_i32, -1)), _i8)
        else:
            convert = "PyLong_AsLongLong" if kind[0] == "i" else "PyLong_AsUnsignedLongLongMask"
            value = self.checked(b.call(api[convert], [obj]), _const(-1))
            if _WIDTH[kind] < 64:
                value = b.trunc(value, ir.IntType(_WIDTH[kind]))
        b.store(value, b.bitcast(slot, value.type.as_pointer()))

    def launch(self, config) -> None:
        """cuLaunchKernel with the LaunchConfig at `config` (an i32*); return its result."""
        b, api = self.b, self.api
        function, launch_kernel = self.target
        dims = [b.load(b.gep(config, [_const(k)])) for k in range(7)]
        stream = b.load(b.bitcast(b.gep(config, [_const(8)]), _i64.as_pointer()))
        launch_type = ir.FunctionType(_i32, [_i64] + [_i32] * 7 + [_i64, _ptr.as_pointer(),
                                                                  _ptr.as_pointer()])
        call = b.inttoptr(_const(launch_kernel), launch_type.as_pointer())
        params = self.pointers if self.kinds else ir.Constant(_ptr.as_pointer(), None)
        saved = b.call(api["PyEval_SaveThread"], [])
        result = b.call(call, [_const(function), *dims, stream, params,
                               ir.Constant(_ptr.as_pointer(), None)])
        b.call(api["PyEval_RestoreThread"], [saved])
        b.ret(b.call(api["PyLong_FromLong"], [b.sext(result, _i64)]))

    def config(self):
        value = self.checked(self.b.call(self.api["PyLong_AsUnsignedLongLongMask"],
                                         [self.arg(0)]), _const(-1))
        return self.b.inttoptr(value, _i32.as_pointer())


class _WordsEntry(_Entry):
    def emit(self) -> None:
        b = self.b
        self.returning(WRONG_COUNT, b.icmp_signed("!=", self.fn.args[2],
                                                  _const(len(self.kinds) + 1)))
        config = self.config()
        for k, kind in enumerate(self.kinds):
            self.store(k, kind, self.arg(k + 1))
        self.launch(config)


class _GuardedEntry(_Entry):
    def __init__(self, module, api, name, kinds, target, keep: list, args):
        super().__init__(module, api, name, kinds, target, keep)
        self.args, self.type_offset = args, _TYPE_OFFSET

    def address_of(self, obj):
        """A constant pointer to the Python object `obj` (kept alive with the launchers)."""
        self.keep.append(obj)
        return self.b.inttoptr(_const(id(obj)), _ptr)

    def type_of(self, obj):
        b = self.b
        field = b.gep(obj, [_const(self.type_offset)])
        return b.load(b.bitcast(field, _ptr.as_pointer()))

    def emit(self) -> None:
        b, api = self.b, self.api
        self.returning(GUARD_MISS, b.icmp_signed("!=", self.fn.args[2],
                                                 _const(len(self.args) + 1)))
        config = self.config()
        epoch = b.load(b.bitcast(b.gep(config, [_const(10)]), _i64.as_pointer()))
        current = b.load(b.inttoptr(_const(ctypes.addressof(driver.DEVICE_EPOCH)),
                                    _i64.as_pointer()))
        self.returning(GUARD_MISS, b.icmp_signed("!=", epoch, current))
        # every guard before any conversion: a miss must leave no Python error set
        objects = [self.arg(k + 1) for k in range(len(self.args))]
        for obj, spec in zip(objects, self.args):
            expected = spec.array_type if isinstance(spec, ArrayArg) else spec.type
            self.returning(GUARD_MISS, b.icmp_unsigned("!=", self.type_of(obj),
                                                       self.address_of(expected)))
        words: list = []
        name_key, name_words = sys.intern("_key"), sys.intern("_words")
        for obj, spec in zip(objects, self.args):
            if isinstance(spec, ScalarArg):
                words.append((spec.kind, obj))
                continue
            key = self.attribute(obj, name_key)
            self.returning(GUARD_MISS, b.icmp_unsigned("!=", key, self.address_of(spec.key)))
            held = self.attribute(obj, name_words)
            for j, kind in enumerate(spec.kinds):
                item = b.call(api["PyTuple_GetItem"], [held, _const(j)])
                self.returning(GUARD_MISS, _is_null(b, item, api))
                words.append((kind, item))
        for k, (kind, obj) in enumerate(words):
            self.store(k, kind, obj)
        self.launch(config)

    def attribute(self, obj, name: str):
        """A borrowed `obj.name`: the argument holds the attribute (DeviceArray slots never
        change), so the new reference is dropped at once. GUARD_MISS when it is missing."""
        b, api = self.b, self.api
        value = b.call(api["PyObject_GetAttr"], [obj, self.address_of(name)])
        self.returning(GUARD_MISS, _is_null(b, value, api))
        b.call(api["Py_DecRef"], [value])
        return value


def _is_set(b, pointer):
    return b.icmp_unsigned("!=", pointer, ir.Constant(_ptr, None))


def _is_null(b, pointer, api):
    """Is `pointer` NULL? If so, clear the error its call set (a guard miss raises nothing)."""
    null = b.icmp_unsigned("==", pointer, ir.Constant(_ptr, None))
    with b.if_then(null, likely=False):
        b.call(api["PyErr_Clear"], [])
    return null


def _const(value: int):
    return ir.Constant(_i64, value)
