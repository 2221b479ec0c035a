"""Launchers compiled for the host: two CPython functions (METH_FASTCALL), built by llvmlite
once per process, that put a launch's words straight into stack slots and call cuLaunchKernel.

A warm launch from Python otherwise pays three times for the same work: reading every argument
and building the plan's key, `struct.pack_into` into the argument block, then cuda-bindings'
wrapper converting the handles and the parameter pointer again. Here a plan describes its
slots once, in a `PlanTable` (the slot types; for the guarded entry also the type and key each
argument must have), and every launch is one C call:

    words(table, config, *words) -> CUresult or WRONG_COUNT
        the slot values, read from the arguments by Python (any array type);
    guarded(table, config, *args) -> CUresult or GUARD_MISS
        the arguments themselves, when each is a zm.DeviceArray, a scalar or a foreign GPU
        array with a reader (CuPy, PyTorch): the function checks that every argument has
        exactly the type (and DeviceArray key) the table names and that zymo's current device
        has not changed since the configuration was validated, then reads the words itself;
        a foreign array's layout is read and checked at every launch (its dtype object, its
        placement flag, ndim, C-contiguity and size class must be those the plan was built
        for: these objects can be resized or re-pointed in place). On any mismatch, or an
        exception from the foreign library, it launches nothing, raises nothing and returns
        GUARD_MISS, and the caller takes the general path.

`table` and `config` are addresses of a PlanTable and a LaunchConfig (grid, block, shared
bytes, stream, device epoch). Before launching, both check the table's overlap pairs: array
arguments the kernel was compiled to assume apart (`noalias`, passes/alias.py); when two of
them share a byte they launch nothing and return OVERLAP, and the caller launches the build
without that assumption. A word that cannot be converted raises Python's TypeError or
OverflowError before anything is launched. The GIL is released around cuLaunchKernel, as
cuda-bindings does.
"""
from __future__ import annotations

import ctypes
import functools
import sys
import threading
import time
import types

import llvmlite.ir as ir

from . import driver

WRONG_COUNT = -1
GUARD_MISS = -2
OVERLAP = -3
METH_FASTCALL = 0x80
# CUDA takes at most 32764 bytes of parameters; the slots live on the launcher's stack
MAX_SLOTS = 4096

KIND_CODES = {"u64": 0, "i64": 1, "u32": 2, "i32": 3, "u16": 4, "i16": 5, "u8": 6, "i8": 7,
              "bool": 8, "f64": 9, "f32": 10, "f16": 11}

_i1, _i8, _i32, _i64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
_f64 = ir.DoubleType()
_ptr = _i8.as_pointer()
# (return type, parameter types) of the C API functions the launchers call
_API = {
    "PyLong_AsLongLong": (_i64, [_ptr]),
    "PyLong_AsUnsignedLongLongMask": (_i64, [_ptr]),
    "PyFloat_AsDouble": (_f64, [_ptr]),
    "PyFloat_Pack2": (_i32, [_f64, _ptr, _i32]),   # to half: the JIT has no libcall for it
    "PyObject_IsTrue": (_i32, [_ptr]),
    "PyObject_GetAttr": (_ptr, [_ptr, _ptr]),
    "PyTuple_GetItem": (_ptr, [_ptr, _i64]),
    "PyTuple_Size": (_i64, [_ptr]),
    "PyObject_VectorcallMethod": (_ptr, [_ptr, _ptr.as_pointer(), _i64, _ptr]),
    "PyObject_Vectorcall": (_ptr, [_ptr, _ptr.as_pointer(), _i64, _ptr]),
    "Py_IncRef": (None, [_ptr]),
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


class _Arg(ctypes.Structure):
    # type: the exact Python type; key: the DeviceArray `_key` (NULL for a scalar, which is
    # converted itself, and for a foreign array); words: how many slots the argument fills;
    # reader: a foreign array's _Reader, else NULL
    _fields_ = [("type", ctypes.c_void_p), ("key", ctypes.c_void_p), ("words", ctypes.c_int64),
                ("reader", ctypes.c_void_p)]


class _Part(ctypes.Structure):
    # how the reader gets one part of a foreign array: mode (below), the interned name, and for
    # the direct modes what the type's descriptor holds (its C function or member offset, and
    # the getter's closure or the callable descriptor itself)
    _fields_ = [("mode", ctypes.c_int64), ("name", ctypes.c_void_p),
                ("function", ctypes.c_void_p), ("closure", ctypes.c_void_p)]


# _Part modes: the generic ones look the name up on every launch, as Python does; the direct
# ones call what the exact type's descriptor holds, found once per plan
ABSENT, ATTRIBUTE, METHOD, GETSET, MEMBER, CALL_DESCRIPTOR, NOARGS = range(7)


class _Reader(ctypes.Structure):
    _fields_ = [("flag", _Part),               # ABSENT, or a part that must be True itself
                ("dtype", _Part), ("dtype_value", ctypes.c_void_p),
                ("pointer_via", _Part),        # ABSENT, or read before `pointer`
                ("pointer", _Part), ("shape", _Part), ("strides", _Part),
                ("contiguous_part", _Part),    # ABSENT, or True for a C-contiguous array:
                                               # read instead of strides for a contiguous plan
                ("memo", _Part), ("owner", ctypes.c_void_p),
                ("stride_unit", ctypes.c_int64),     # strides are divided by it (bytes: item)
                ("ndim", ctypes.c_int64), ("contiguous", ctypes.c_int64),
                ("small", ctypes.c_int64)]


class _Table(ctypes.Structure):
    # pairs: pair_count x (first slot, ndim, itemsize) of two arrays that must not overlap
    _fields_ = [("function", ctypes.c_uint64), ("launch_kernel", ctypes.c_uint64),
                ("slot_count", ctypes.c_int64), ("kinds", ctypes.POINTER(ctypes.c_uint8)),
                ("arg_count", ctypes.c_int64), ("args", ctypes.POINTER(_Arg)),
                ("pair_count", ctypes.c_int64), ("pairs", ctypes.POINTER(ctypes.c_int64))]


class ArrayArg:
    """A kernel argument the guarded entry takes as an `array_type` object with this `_key`,
    whose `_words` tuple holds `words` slot values."""

    def __init__(self, array_type: type, key: str, words: int):
        self.type, self.key, self.words = array_type, sys.intern(key), words


class ArrayReader:
    """How the guarded entry reads a foreign library's GPU array: each part is an attribute
    name, or `name()` for a method called without arguments. `flag` (optional) must read
    True (PyTorch's `is_cuda`); `dtype` is compared by identity with the plan's; the pointer
    is `pointer_via.pointer` when `pointer_via` is given (CuPy's `data.ptr`); `shape` and
    `strides` read as tuples of ints, strides in bytes when `strides_in_bytes`.
    `contiguous` (optional) reads True exactly when the array is C-contiguous as NumPy counts
    it: for a plan of C-contiguous arrays it is read instead of the strides, which are then
    those of C order (they differ only on extent-1 axes, which no index moves along).

    `memo` (instead of dtype, shape and strides) names a tuple the library's describer left
    on the array once it had read it on the general path: (dtype, device, pointer, extents,
    strides in elements), for a library whose arrays never change (JAX); the pointer part is
    still read at each launch and must be the memo's (a deleted or donated array raises
    there), and `device` must be the plan's."""

    def __init__(self, dtype: str | None, pointer: str, shape: str | None = None,
                 strides: str | None = None, flag: str | None = None,
                 pointer_via: str | None = None, strides_in_bytes: bool = False,
                 contiguous: str | None = None, memo: str | None = None):
        if (memo is None) == (dtype is None or shape is None or strides is None):
            raise ValueError("a reader names either a memo or its dtype, shape and strides")
        self.dtype, self.pointer, self.shape, self.strides = dtype, pointer, shape, strides
        self.flag, self.pointer_via, self.strides_in_bytes = flag, pointer_via, strides_in_bytes
        self.contiguous, self.memo = contiguous, memo


class ForeignArrayArg:
    """A kernel argument the guarded entry takes as an `array_type` object read by `reader`,
    whose dtype attribute is `dtype_value` (by identity) and whose layout matches the plan:
    `ndim` axes, C-contiguous or not, `small` (contiguous with fewer than 2**31 elements)
    or not. `itemsize` turns byte strides into elements; `owner` is the device a memo must
    name (the plan's)."""

    def __init__(self, array_type: type, reader: ArrayReader, dtype_value, itemsize: int,
                 ndim: int, contiguous: bool, small: bool, owner=None):
        self.type, self.key, self.words = array_type, None, 1 + 2 * ndim
        self.held = [dtype_value, owner]
        part = functools.partial(_resolve, array_type, self.held)
        # the shortcut only where the type has the part: else the strides are read
        shortcut = part(reader.contiguous, optional=True) if contiguous else _Part(ABSENT)
        self.reader = _Reader(part(reader.flag, attribute=True),
                              part(reader.dtype, attribute=True), id(dtype_value),
                              part(reader.pointer_via, attribute=True), part(reader.pointer),
                              part(reader.shape), part(reader.strides), shortcut,
                              part(reader.memo, attribute=True), _address(owner),
                              itemsize if reader.strides_in_bytes else 1, ndim,
                              int(contiguous), int(small))


def _resolve(kind: type, held: list, text: str | None, attribute: bool = False,
             optional: bool = False) -> _Part:
    """The _Part that reads `text` (`name` or `name()`) of `kind`'s objects; ABSENT for no
    text, or for an optional part `kind` does not have. Direct where the exact type's
    descriptor is a C getter, an object member or a method descriptor and this Python's object
    layout is the usual one; generic otherwise (a Python property, an instance attribute)."""
    if text is None:
        return _Part(ABSENT)
    call = text.endswith("()")
    name = sys.intern(text[:-2] if call else text)
    if call and attribute:
        raise ValueError(f"a reader's {text} is an attribute, not a method")
    held.append(name)
    found = next((klass.__dict__[name] for klass in kind.__mro__ if name in klass.__dict__),
                 None)
    if found is None and optional:
        return _Part(ABSENT)
    held.append(found)
    direct = _direct(found, name, call) if _type_offset() == 8 else None
    if direct is not None:
        return _Part(direct[0], id(name), *direct[1:])
    return _Part(METHOD if call else ATTRIBUTE, id(name), 0, 0)


_METH_NOARGS, _METHOD_DESCRIPTOR_FLAG = 0x4, 1 << 17
_T_OBJECT, _T_OBJECT_EX = 6, 16
# offsets in CPython's descriptor objects (3.10 to 3.13, the usual object header): the
# common descriptor header is 40 bytes, then the pointer to the getset, method or member
# definition
_DEF = 40


def _direct(found, name: str, call: bool):
    """(mode, function, closure) of a direct read of descriptor `found`, or None. Each
    definition's name is compared with `name`: a layout other than the expected one is never
    called."""
    kind = type(found)
    if kind is types.GetSetDescriptorType and not call:
        definition = ctypes.c_void_p.from_address(id(found) + _DEF).value
        if _c_name(definition) == name:
            get, closure = (ctypes.c_void_p.from_address(definition + k).value for k in (8, 32))
            return (GETSET, get, closure) if get else None
    elif kind is types.MemberDescriptorType and not call:
        definition = ctypes.c_void_p.from_address(id(found) + _DEF).value
        if _c_name(definition) == name and \
                ctypes.c_int.from_address(definition + 8).value in (_T_OBJECT, _T_OBJECT_EX):
            return MEMBER, ctypes.c_ssize_t.from_address(definition + 16).value, 0
    elif call and kind is types.MethodDescriptorType:
        definition = ctypes.c_void_p.from_address(id(found) + _DEF).value
        if _c_name(definition) == name:
            if ctypes.c_int.from_address(definition + 16).value == _METH_NOARGS:
                return NOARGS, ctypes.c_void_p.from_address(definition + 8).value, 0
            return CALL_DESCRIPTOR, 0, id(found)
    elif call and kind.__flags__ & _METHOD_DESCRIPTOR_FLAG and callable(found):
        return CALL_DESCRIPTOR, 0, id(found)     # nanobind's and others' methods
    return None


def _c_name(definition: int | None) -> str | None:
    """The C string a getset, method or member definition starts with."""
    if not definition:
        return None
    text = ctypes.c_char_p.from_address(definition).value
    return text.decode() if text is not None else None


def _address(value) -> int:
    return 0 if value is None else id(value)


class ScalarArg:
    """A kernel argument the guarded entry takes as an object of exactly `type`."""

    def __init__(self, kind: type):
        self.type, self.key, self.words = kind, None, 1


class PlanTable:
    """What the launchers need to know about one plan (and, for the guarded entry, one set of
    argument types). `address` is what they take; the table holds what it points at."""

    def __init__(self, kinds: list[str], function: int, launch_kernel: int,
                 args: list | None = None, pairs: tuple = ()):
        if len(kinds) > MAX_SLOTS:
            raise ValueError(f"{len(kinds)} parameter slots: the compiled launchers take at "
                             f"most {MAX_SLOTS}")
        self._kinds = (ctypes.c_uint8 * max(len(kinds), 1))(*[KIND_CODES[k] for k in kinds])
        self._held = [a.type for a in args or ()] + [a.key for a in args or ()] + \
            [getattr(a, "held", None) for a in args or ()]
        readers = [getattr(a, "reader", None) for a in args or ()]
        self._readers = [r for r in readers if r is not None]
        self._args = (_Arg * max(len(args or ()), 1))(
            *[_Arg(id(a.type), id(a.key) if a.key is not None else 0, a.words,
                   ctypes.addressof(r) if r is not None else 0)
              for a, r in zip(args or (), readers)])
        if args is not None and sum(a.words for a in args) != len(kinds):
            raise ValueError("the arguments' words do not fill the slots")
        flat = [n for pair in pairs for array in pair for n in array]
        self._pairs = (ctypes.c_int64 * max(len(flat), 1))(*flat)
        self._table = _Table(function, launch_kernel, len(kinds), self._kinds,
                             len(args) if args is not None else -1, self._args,
                             len(pairs), self._pairs)
        self.address = ctypes.addressof(self._table)


class _MethodDef(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("meth", ctypes.c_void_p), ("flags", ctypes.c_int),
                ("doc", ctypes.c_char_p)]


_lock = threading.Lock()
_entries: tuple | None = None     # (words, guarded), built at first use
build_seconds = 0.0               # what building them took (once per process)
_keep: list = []                  # method definitions and names the compiled code points at


def entries():
    """(words, guarded): the two launchers of this process; guarded is None where this
    Python's object layout is not the usual one (the words entry works everywhere)."""
    global _entries, build_seconds
    with _lock:
        if _entries is None:
            start = time.perf_counter()
            _entries = _build()
            build_seconds = time.perf_counter() - start
        return _entries


@functools.cache
def _type_offset() -> int | None:
    """The offset of ob_type in a PyObject: 8, or 24 in a free-threaded build; checked."""
    samples = (1, 2.5, True, "text", ctypes, LaunchConfig())
    for offset in (8, 24):
        if all(ctypes.c_void_p.from_address(id(s) + offset).value == id(type(s))
               for s in samples):
            return offset
    return None


def _build():
    import llvmlite.binding as llvm

    from ...backend.cpu import jit
    for name in _API:
        # Python 3.10 has PyFloat_Pack2 under its older private name
        found = getattr(ctypes.pythonapi, name, None) or getattr(ctypes.pythonapi, "_" + name)
        llvm.add_symbol(name, ctypes.cast(found, ctypes.c_void_p).value)
    type_offset = _type_offset()
    module = ir.Module("zymo_launchers")
    emitter = _Emitter(module)
    names = ["zymo_launch_words"]
    emitter.words_entry(names[0])
    if type_offset is not None:
        names.append("zymo_launch_guarded")
        emitter.guarded_entry(names[1], type_offset)
    addresses = jit.quick_load(llvm.parse_assembly(str(module)), names)
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]
    made = []
    for name, address in zip(names, addresses):
        method = _MethodDef(name.encode(), address, METH_FASTCALL, None)
        _keep.append(method)   # CPython reads the definition on every call
        made.append(new(ctypes.addressof(method), None, None))
    return made[0], made[1] if len(made) > 1 else None


# ---- code generation -------------------------------------------------------------------------
class _Emitter:
    def __init__(self, module: ir.Module):
        self.module = module
        self.api = {fn: ir.Function(module, ir.FunctionType(ret or ir.VoidType(), params), fn)
                    for fn, (ret, params) in _API.items()}
        table = ir.global_context.get_identified_type("zymo_plan_table")
        reader = ir.global_context.get_identified_type("zymo_array_reader")
        part = ir.global_context.get_identified_type("zymo_reader_part")
        if table.is_opaque:
            arg = ir.global_context.get_identified_type("zymo_plan_arg")
            arg.set_body(_ptr, _ptr, _i64, reader.as_pointer())
            table.set_body(_i64, _i64, _i64, _ptr, _i64, arg.as_pointer(), _i64,
                           _i64.as_pointer())
            part.set_body(_i64, _ptr, _ptr, _ptr)
            reader.set_body(part, part, _ptr, part, part, part, part, part, part, _ptr, _i64,
                            _i64, _i64, _i64)
        self.table_type, self.reader_type, self.part_type = table, reader, part
        self.convert = self._convert_function()
        self.get = self._get_function()
        self.read_foreign = self._foreign_function()

    # conversion of one Python object into one slot: 0, or -1 with a Python error set
    def _convert_function(self) -> ir.Function:
        api = self.api
        fn = ir.Function(self.module, ir.FunctionType(_i32, [_ptr, _i8, _i64.as_pointer()]),
                         "zymo_convert")
        fn.linkage = "internal"
        obj, kind, slot = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        bad = fn.append_basic_block("bad")
        done = fn.append_basic_block("done")
        cases = {code: fn.append_basic_block(name) for name, code in KIND_CODES.items()}
        switch = b.switch(kind, bad)
        for code, block in cases.items():
            switch.add_case(ir.Constant(_i8, code), block)
        with b.goto_block(bad):
            b.ret(ir.Constant(_i32, -1))

        def stored(block, value, error_value):
            """Store `value` unless it is the error value with an error set."""
            b.position_at_end(block)
            maybe, ok = fn.append_basic_block(), fn.append_basic_block()
            is_error = (b.fcmp_ordered("==", value, error_value) if value.type == _f64
                        else b.icmp_signed("==", value, error_value))
            b.cbranch(is_error, maybe, ok)
            b.position_at_end(maybe)
            b.cbranch(_not_null(b, b.call(api["PyErr_Occurred"], [])), bad, ok)
            b.position_at_end(ok)
            return value

        def finish(value):
            b.store(value, b.bitcast(slot, value.type.as_pointer()))
            b.branch(done)

        for name, code in KIND_CODES.items():
            b.position_at_end(cases[code])
            if name in ("f64", "f32", "f16"):
                value = b.call(api["PyFloat_AsDouble"], [obj])
                value = stored(cases[code], value, ir.Constant(_f64, -1))
                if name == "f16":
                    packed = b.call(api["PyFloat_Pack2"], [value, b.bitcast(slot, _ptr),
                                                           ir.Constant(_i32, 1)])
                    with b.if_then(b.icmp_signed("!=", packed, ir.Constant(_i32, 0))):
                        b.ret(ir.Constant(_i32, -1))
                    b.branch(done)
                    continue
                finish(b.fptrunc(value, ir.FloatType()) if name == "f32" else value)
            elif name == "bool":
                value = stored(cases[code], b.call(api["PyObject_IsTrue"], [obj]),
                               ir.Constant(_i32, -1))
                finish(b.trunc(value, _i8))
            else:
                convert = "PyLong_AsLongLong" if name[0] == "i" else \
                    "PyLong_AsUnsignedLongLongMask"
                value = stored(cases[code], b.call(api[convert], [obj]), _c(-1))
                width = int(name[1:])
                finish(b.trunc(value, ir.IntType(width)) if width < 64 else value)
        b.position_at_end(done)
        b.ret(ir.Constant(_i32, 0))
        return fn

    def _get_function(self) -> ir.Function:
        """get(obj, part): a new reference to what the _Part reads of `obj`; NULL, with no
        error left set, when that raises or the part is missing."""
        api = self.api
        fn = ir.Function(self.module, ir.FunctionType(_ptr, [_ptr, self.part_type.as_pointer()]),
                         "zymo_get")
        fn.linkage = "internal"
        obj, part = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        self_arg = b.alloca(_ptr)
        b.store(obj, self_arg)
        result = b.alloca(_ptr)
        b.store(ir.Constant(_ptr, None), result)

        def field(index):
            return b.load(b.gep(part, [ir.Constant(_i32, 0), ir.Constant(_i32, index)]))

        mode, name, function, closure = (field(k) for k in range(4))
        done = fn.append_basic_block("done")
        switch = b.switch(mode, done)
        null = ir.Constant(_ptr, None)

        def case(code):
            block = fn.append_basic_block(f"mode{code}")
            switch.add_case(_c(code), block)
            b.position_at_end(block)

        def typed(address, ret, *params):
            return b.bitcast(address, ir.FunctionType(ret, list(params)).as_pointer())

        case(ATTRIBUTE)
        b.store(b.call(api["PyObject_GetAttr"], [obj, name]), result)
        b.branch(done)
        case(METHOD)
        b.store(b.call(api["PyObject_VectorcallMethod"], [name, self_arg, _c(1), null]), result)
        b.branch(done)
        case(GETSET)     # getter(obj, closure)
        b.store(b.call(typed(function, _ptr, _ptr, _ptr), [obj, closure]), result)
        b.branch(done)
        case(NOARGS)     # a METH_NOARGS method: meth(obj, NULL)
        b.store(b.call(typed(function, _ptr, _ptr, _ptr), [obj, null]), result)
        b.branch(done)
        case(CALL_DESCRIPTOR)     # the descriptor called with obj as its one argument
        b.store(b.call(api["PyObject_Vectorcall"], [closure, self_arg, _c(1), null]), result)
        b.branch(done)
        case(MEMBER)     # an object member at a byte offset; NULL (unset) is a miss
        slot = b.bitcast(b.gep(obj, [b.ptrtoint(function, _i64)]), _ptr.as_pointer())
        value = b.load(slot)
        with b.if_then(_not_null(b, value)):
            b.call(api["Py_IncRef"], [value])
        b.store(value, result)
        b.branch(done)
        b.position_at_end(done)
        value = b.load(result)
        with b.if_then(_not_null(b, value, negate=True), likely=False):
            b.call(api["PyErr_Clear"], [])
        b.ret(value)
        return fn

    def _foreign_function(self) -> ir.Function:
        """read(obj, reader, out): 0 after writing a foreign array's pointer, extents and
        strides (elements) to out[0 : 1 + 2 ndim]; 1, with no error set and no reference
        kept, when it does not have the layout `reader` names or its library raises."""
        api = self.api
        fn = ir.Function(self.module, ir.FunctionType(
            _i32, [_ptr, self.reader_type.as_pointer(), _i64.as_pointer()]),
            "zymo_read_foreign")
        fn.linkage = "internal"
        obj, reader, out = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        miss = fn.append_basic_block("miss")
        with b.goto_block(miss):
            b.call(api["PyErr_Clear"], [])
            b.ret(ir.Constant(_i32, 1))

        def field(index):
            return b.load(b.gep(reader, [ir.Constant(_i32, 0), ir.Constant(_i32, index)]))

        def part(index):
            return b.gep(reader, [ir.Constant(_i32, 0), ir.Constant(_i32, index)])

        def present(index):
            mode = b.load(b.gep(part(index), [ir.Constant(_i32, 0), ir.Constant(_i32, 0)]))
            return b.icmp_signed("!=", mode, _c(ABSENT))

        def otherwise_miss(condition, release=None):
            """Continue where `condition` holds; else drop `release` and miss."""
            ok, fail = fn.append_basic_block(), fn.append_basic_block()
            b.cbranch(condition, ok, fail)
            b.position_at_end(fail)
            if release is not None:
                b.call(api["Py_DecRef"], [release])
            b.branch(miss)
            b.position_at_end(ok)

        def get(holder, index):
            value = b.call(self.get, [holder, part(index)])
            otherwise_miss(_not_null(b, value))
            return value

        def number(item, release):
            """PyLong_AsLongLong(item); a miss (dropping `release`) when it raises."""
            value = b.call(api["PyLong_AsLongLong"], [item])
            failed = b.and_(b.icmp_signed("==", value, _c(-1)),
                            _not_null(b, b.call(api["PyErr_Occurred"], [])))
            otherwise_miss(b.not_(failed), release)
            return value

        def same(index, expected):
            """Miss unless the part reads `expected` itself."""
            value = get(obj, index)
            b.call(api["Py_DecRef"], [value])   # only its address is compared below
            otherwise_miss(b.icmp_unsigned("==", value, expected))

        def address_of(holder):
            """The pointer part of `holder` as an integer."""
            pointer = get(holder, 4)
            address = b.call(api["PyLong_AsUnsignedLongLongMask"], [pointer])
            b.call(api["Py_DecRef"], [pointer])
            failed = b.and_(b.icmp_signed("==", address, _c(-1)),
                            _not_null(b, b.call(api["PyErr_Occurred"], [])))
            otherwise_miss(b.not_(failed))
            return address

        def items(values, count, start, unit=None, first=0):
            """out[start + j] = values[first + j] (divided by `unit`, a whole number of them)
            for j below `count`; a miss dropping `values` where an item is no int."""
            with _loop(b, count) as j:
                item = b.call(api["PyTuple_GetItem"], [values, b.add(j, _c(first))])
                value = number(item, values)
                if unit is not None:
                    otherwise_miss(b.icmp_signed("==", b.srem(value, unit), _c(0)), values)
                    value = b.sdiv(value, unit)
                b.store(value, b.gep(out, [b.add(start, j)]))

        ndim = field(11)

        def ints(index, start, unit=None):
            """Part `index` of obj, a tuple of ndim ints, into out[start:] (see `items`)."""
            values = get(obj, index)
            otherwise_miss(b.icmp_signed("==", b.call(api["PyTuple_Size"], [values]), ndim),
                           values)
            items(values, ndim, start, unit=unit)
            b.call(api["Py_DecRef"], [values])

        true = ir.Constant(_i64, id(True)).inttoptr(_ptr)
        with b.if_else(present(8)) as (memoized, read):
            with memoized:     # (dtype, device, pointer, extents, strides) left by the describer
                memo = get(obj, 8)
                tuple_type = ir.Constant(_i64, id(tuple)).inttoptr(_ptr)
                kind = b.load(b.bitcast(b.gep(memo, [_c(_type_offset() or 8)]),
                                        _ptr.as_pointer()))
                otherwise_miss(b.icmp_unsigned("==", kind, tuple_type), memo)
                size = b.call(api["PyTuple_Size"], [memo])
                otherwise_miss(b.icmp_signed("==", size, b.add(_c(3), b.add(ndim, ndim))), memo)
                for index, expected in ((0, field(2)), (1, field(9))):
                    item = b.call(api["PyTuple_GetItem"], [memo, _c(index)])
                    otherwise_miss(b.icmp_unsigned("==", item, expected), memo)
                remembered = b.call(api["PyLong_AsUnsignedLongLongMask"],
                                    [b.call(api["PyTuple_GetItem"], [memo, _c(2)])])
                otherwise_miss(b.icmp_signed("==", b.call(api["PyErr_Occurred"], []),
                                             ir.Constant(_ptr, None)), memo)
                b.store(remembered, out)
                items(memo, b.add(ndim, ndim), _c(1), first=3)
                b.call(api["Py_DecRef"], [memo])
                # read anew each launch: raises for a deleted or donated array, and differs
                # for one whose buffer was replaced
                otherwise_miss(b.icmp_signed("==", address_of(obj), remembered))
            with read:
                with b.if_then(present(0)):
                    same(0, true)
                same(1, field(2))
                holder = _entry_alloca(b, _ptr, "holder")
                b.store(obj, holder)
                with b.if_then(present(3)):
                    b.store(get(obj, 3), holder)
                address = address_of(b.load(holder))
                with b.if_then(present(3)):
                    b.call(api["Py_DecRef"], [b.load(holder)])
                b.store(address, out)
                ints(5, _c(1))
                shortcut = b.and_(present(7), b.icmp_signed("!=", field(12), _c(0)))
                with b.if_else(shortcut) as (c_order, strided):
                    with c_order:    # a flag instead of a tuple: the strides of C order
                        same(7, true)
                        step = _entry_alloca(b, _i64)
                        b.store(_c(1), step)
                        with _loop(b, ndim) as k:
                            axis = b.sub(ndim, b.add(k, _c(1)))
                            b.store(b.load(step), b.gep(out, [b.add(axis, b.add(ndim, _c(1)))]))
                            extent = b.load(b.gep(out, [b.add(axis, _c(1))]))
                            b.store(b.mul(b.load(step), extent), step)
                    with strided:
                        ints(6, b.add(ndim, _c(1)), unit=field(10))
        # the layout the plan's key holds, from the words: C-contiguous as NumPy counts it
        # (extent-1 axes and empty arrays don't break it), and small
        step, count = _entry_alloca(b, _i64), _entry_alloca(b, _i64)
        strided = _entry_alloca(b, _i1)
        b.store(_c(1), step)
        b.store(_c(1), count)
        b.store(ir.Constant(_i1, 0), strided)
        with _loop(b, ndim) as k:
            axis = b.sub(ndim, b.add(k, _c(1)))
            extent = b.load(b.gep(out, [b.add(axis, _c(1))]))
            stride = b.load(b.gep(out, [b.add(axis, b.add(ndim, _c(1)))]))
            broken = b.and_(b.icmp_signed("!=", extent, _c(1)),
                            b.icmp_signed("!=", stride, b.load(step)))
            b.store(b.or_(b.load(strided), broken), strided)
            b.store(b.mul(b.load(step), extent), step)
            b.store(b.mul(b.load(count), extent), count)
        empty = b.icmp_signed("==", b.load(count), _c(0))
        contiguous = b.or_(empty, b.not_(b.load(strided)))
        small = b.and_(contiguous, b.icmp_signed("<", b.load(count), _c(2**31)))
        otherwise_miss(b.and_(
            b.icmp_signed("==", b.zext(contiguous, _i64), field(12)),
            b.icmp_signed("==", b.zext(small, _i64), field(13))))
        b.ret(ir.Constant(_i32, 0))
        return fn

    def _entry(self, name: str):
        fn = ir.Function(self.module, ir.FunctionType(_ptr, [_ptr, _ptr.as_pointer(), _i64]),
                         name)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        slots = b.alloca(_i64, MAX_SLOTS, name="slots")
        pointers = b.alloca(_ptr, MAX_SLOTS, name="pointers")
        return fn, b, slots, pointers

    def _code(self, b, fn, code: int, condition) -> None:
        """Return the Python int `code` when `condition` holds."""
        leave, stay = fn.append_basic_block(), fn.append_basic_block()
        b.cbranch(condition, leave, stay)
        b.position_at_end(leave)
        b.ret(b.call(self.api["PyLong_FromLong"], [_c(code)]))
        b.position_at_end(stay)

    def _header(self, b, fn):
        """The table and config pointers from arguments 0 and 1 (not checked: only zymo
        passes them)."""
        args = fn.args[1]
        table_int = b.call(self.api["PyLong_AsUnsignedLongLongMask"], [b.load(args)])
        config_int = b.call(self.api["PyLong_AsUnsignedLongLongMask"],
                            [b.load(b.gep(args, [_c(1)]))])
        table = b.inttoptr(table_int, self.table_type.as_pointer())
        return table, b.inttoptr(config_int, _i32.as_pointer())

    def _field(self, b, table, index: int):
        return b.load(b.gep(table, [ir.Constant(_i32, 0), ir.Constant(_i32, index)]))

    def _launch(self, b, table, config, slots, pointers) -> None:
        """Point the parameter array at the slots, release the GIL, cuLaunchKernel, return
        its result."""
        count = self._field(b, table, 2)
        with _loop(b, count) as k:
            b.store(b.bitcast(b.gep(slots, [k]), _ptr), b.gep(pointers, [k]))
        dims = [b.load(b.gep(config, [_c(k)])) for k in range(7)]
        stream = b.load(b.bitcast(b.gep(config, [_c(8)]), _i64.as_pointer()))
        launch_type = ir.FunctionType(_i32, [_i64] + [_i32] * 7 + [_i64, _ptr.as_pointer(),
                                                                  _ptr.as_pointer()])
        launch = b.inttoptr(self._field(b, table, 1), launch_type.as_pointer())
        params = b.select(b.icmp_signed(">", count, _c(0)), pointers,
                          ir.Constant(_ptr.as_pointer(), None))
        saved = b.call(self.api["PyEval_SaveThread"], [])
        result = b.call(launch, [self._field(b, table, 0), *dims, stream, params,
                                 ir.Constant(_ptr.as_pointer(), None)])
        b.call(self.api["PyEval_RestoreThread"], [saved])
        b.ret(b.call(self.api["PyLong_FromLong"], [b.sext(result, _i64)]))

    def _convert_into(self, b, fn, obj, kinds, slots, index) -> None:
        """Convert `obj` into slot `index`; on failure return NULL (the error is set)."""
        kind = b.load(b.gep(kinds, [index]))
        status = b.call(self.convert, [obj, kind, b.gep(slots, [index])])
        failed, ok = fn.append_basic_block("failed"), fn.append_basic_block()
        b.cbranch(b.icmp_signed("!=", status, ir.Constant(_i32, 0)), failed, ok)
        b.position_at_end(failed)
        b.ret(ir.Constant(_ptr, None))
        b.position_at_end(ok)

    def words_entry(self, name: str) -> None:
        fn, b, slots, pointers = self._entry(name)
        table, config = self._header(b, fn)
        count = self._field(b, table, 2)
        self._code(b, fn, WRONG_COUNT, b.icmp_signed("!=", fn.args[2], b.add(count, _c(2))))
        kinds = self._field(b, table, 3)
        args = fn.args[1]
        with _loop(b, count) as k:
            self._convert_into(b, fn, b.load(b.gep(args, [b.add(k, _c(2))])), kinds, slots, k)
        self._check_overlaps(b, fn, table, slots)
        self._launch(b, table, config, slots, pointers)

    def guarded_entry(self, name: str, type_offset: int) -> None:
        fn, b, slots, pointers = self._entry(name)
        api = self.api
        table, config = self._header(b, fn)
        arg_count = self._field(b, table, 4)
        self._code(b, fn, GUARD_MISS, b.icmp_signed("!=", fn.args[2], b.add(arg_count,
                                                                                _c(2))))
        epoch = b.load(b.bitcast(b.gep(config, [_c(10)]), _i64.as_pointer()))
        current = b.load(b.inttoptr(_c(ctypes.addressof(driver.DEVICE_EPOCH)),
                                    _i64.as_pointer()))
        self._code(b, fn, GUARD_MISS, b.icmp_signed("!=", epoch, current))
        specs, args = self._field(b, table, 5), fn.args[1]
        key_name, words_name = self._interned("_key"), self._interned("_words")

        def spec_field(k, index):
            return b.load(b.gep(specs, [k, ir.Constant(_i32, index)]))

        def attribute(obj, attr_name):
            """A borrowed `obj.<name>`: the argument holds it (DeviceArray slots never change),
            so the new reference is dropped at once; GUARD_MISS when it is missing."""
            value = b.call(api["PyObject_GetAttr"], [obj, attr_name])
            missing = _not_null(b, value, negate=True)
            with b.if_then(missing, likely=False):
                b.call(api["PyErr_Clear"], [])
            self._code(b, fn, GUARD_MISS, missing)
            b.call(api["Py_DecRef"], [value])
            return value

        # every guard before any conversion: a miss leaves no error set and launches nothing
        with _loop(b, arg_count) as k:
            obj = b.load(b.gep(args, [b.add(k, _c(2))]))
            type_field = b.bitcast(b.gep(obj, [_c(type_offset)]), _ptr.as_pointer())
            self._code(b, fn, GUARD_MISS, b.icmp_unsigned("!=", b.load(type_field),
                                                          spec_field(k, 0)))
            key = spec_field(k, 1)
            with b.if_then(_not_null(b, key)):
                self._code(b, fn, GUARD_MISS,
                           b.icmp_unsigned("!=", attribute(obj, key_name), key))
        kinds = self._field(b, table, 3)
        slot = _entry_alloca(b, _i64, "slot")
        b.store(_c(0), slot)
        with _loop(b, arg_count) as k:
            obj = b.load(b.gep(args, [b.add(k, _c(2))]))
            with b.if_else(_not_null(b, spec_field(k, 1))) as (array, scalar):
                with array:
                    held = attribute(obj, words_name)
                    with _loop(b, spec_field(k, 2)) as j:
                        item = b.call(api["PyTuple_GetItem"], [held, j])
                        missing = _not_null(b, item, negate=True)
                        with b.if_then(missing, likely=False):
                            b.call(api["PyErr_Clear"], [])
                        self._code(b, fn, GUARD_MISS, missing)
                        index = b.load(slot)
                        self._convert_into(b, fn, item, kinds, slots, index)
                        b.store(b.add(index, _c(1)), slot)
                with scalar:
                    reader = spec_field(k, 3)
                    with b.if_else(_not_null(b, reader)) as (foreign, plain):
                        with foreign:
                            index = b.load(slot)
                            status = b.call(self.read_foreign,
                                            [obj, reader, b.gep(slots, [index])])
                            self._code(b, fn, GUARD_MISS,
                                       b.icmp_signed("!=", status, ir.Constant(_i32, 0)))
                            b.store(b.add(index, spec_field(k, 2)), slot)
                        with plain:
                            index = b.load(slot)
                            self._convert_into(b, fn, obj, kinds, slots, index)
                            b.store(b.add(index, _c(1)), slot)
        self._check_overlaps(b, fn, table, slots)
        self._launch(b, table, config, slots, pointers)

    def _span(self, b, slots, pairs, base: int):
        """[low, high) bytes of the array described at pairs[base:base + 3] (first slot, ndim,
        itemsize), from its pointer, extents and strides (elements) in the slots; low == high
        when it has no elements."""
        first = b.load(b.gep(pairs, [_c(base)]))
        ndim = b.load(b.gep(pairs, [_c(base + 1)]))
        item = b.load(b.gep(pairs, [_c(base + 2)]))
        below, above, empty = _c(0), _c(0), ir.Constant(_i1, 0)
        low_slot, high_slot = _entry_alloca(b, _i64), _entry_alloca(b, _i64)
        empty_slot = _entry_alloca(b, _i1)
        for slot, value in ((low_slot, below), (high_slot, above), (empty_slot, empty)):
            b.store(value, slot)
        with _loop(b, ndim) as axis:
            extent = b.load(b.gep(slots, [b.add(first, b.add(axis, _c(1)))]))
            stride = b.load(b.gep(slots, [b.add(first, b.add(ndim, b.add(axis, _c(1))))]))
            reach = b.mul(b.sub(extent, _c(1)), stride)
            negative = b.icmp_signed("<", reach, _c(0))
            b.store(b.add(b.load(low_slot), b.select(negative, reach, _c(0))), low_slot)
            b.store(b.add(b.load(high_slot), b.select(negative, _c(0), reach)), high_slot)
            b.store(b.or_(b.load(empty_slot), b.icmp_signed("<=", extent, _c(0))), empty_slot)
        pointer = b.load(b.gep(slots, [first]))
        low = b.add(pointer, b.mul(b.load(low_slot), item))
        high = b.add(pointer, b.mul(b.add(b.load(high_slot), _c(1)), item))
        return low, b.select(b.load(empty_slot), low, high)

    def _check_overlaps(self, b, fn, table, slots) -> None:
        """Return OVERLAP when two arrays of one of the table's pairs share a byte."""
        pairs = self._field(b, table, 7)
        with _loop(b, self._field(b, table, 6)) as k:
            base = b.mul(k, _c(6))
            first = b.gep(pairs, [base])
            a_low, a_high = self._span(b, slots, first, 0)
            b_low, b_high = self._span(b, slots, first, 3)
            shared = b.and_(b.and_(b.icmp_unsigned("<", a_low, b_high),
                                   b.icmp_unsigned("<", b_low, a_high)),
                            b.and_(b.icmp_unsigned("<", a_low, a_high),
                                   b.icmp_unsigned("<", b_low, b_high)))
            self._code(b, fn, OVERLAP, shared)

    def _interned(self, text: str):
        """A constant pointer to the interned Python string `text` (held for the process)."""
        value = sys.intern(text)
        _keep.append(value)
        return ir.Constant(_i64, id(value)).inttoptr(_ptr)


def _entry_alloca(b: ir.IRBuilder, kind, name: str = ""):
    """An alloca at the start of the function (one stack slot however often the code runs),
    from anywhere."""
    block = b.block
    b.position_at_start(b.function.entry_basic_block)
    slot = b.alloca(kind, name=name)
    b.position_at_end(block)
    return slot


class _loop:
    """`with _loop(b, n) as k:` emits `for k in range(n)` (i64) around the body."""

    def __init__(self, b: ir.IRBuilder, count):
        self.b, self.count = b, count

    def __enter__(self):
        b = self.b
        fn = b.function
        self.head, self.body = fn.append_basic_block("loop"), fn.append_basic_block("body")
        self.exit = fn.append_basic_block("after")
        before = b.block
        b.branch(self.head)
        b.position_at_end(self.head)
        # a phi, not a stack slot: the launchers are compiled without optimization
        self.k = b.phi(_i64)
        self.k.add_incoming(_c(0), before)
        b.cbranch(b.icmp_signed("<", self.k, self.count), self.body, self.exit)
        b.position_at_end(self.body)
        return self.k

    def __exit__(self, *exc):
        if exc[0] is None:
            b = self.b
            self.k.add_incoming(b.add(self.k, _c(1)), b.block)
            b.branch(self.head)
            b.position_at_end(self.exit)
        return False


def _not_null(b, pointer, negate: bool = False):
    return b.icmp_unsigned("==" if negate else "!=", pointer, ir.Constant(_ptr, None))


def _c(value: int):
    return ir.Constant(_i64, value)
