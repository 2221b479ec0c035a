"""XLA FFI handlers for zymo launches, generated as LLVM IR and compiled for the host.

A handler is what XLA calls for a custom call (`XLA_FFI_Handler`: one `XLA_FFI_CallFrame*` in,
an `XLA_FFI_Error*` out, NULL on success). zymo has no C compiler at run time, so each handler
is emitted with llvmlite for one fixed plan, known when JAX lowers the call: shapes are static
in an XLA program, so everything a launch passes but the buffers' addresses (grid, block,
extents, strides, the kernel's scalars) is a constant block of words; the handler copies it,
stores each buffer's data pointer into its word and launches, once per element of a `vmap`
batch (each batched buffer advanced by its element's bytes):

- on the CPU, the entry point of the kernel compiled by zymo's CPU backend
  (`entry(words, first unit, end unit, error buffer)`), on XLA's calling thread;
- on the GPU, `cuLaunchKernel` through the driver's address, on the stream XLA gives
  (`XLA_FFI_Stream_Get`); a launch refused for want of a current context makes the kernel's
  context current and tries again.

The structures below mirror xla/ffi/api/c_api.h (API 0.3, as shipped with jaxlib 0.10;
`jax.ffi.include_dir()`); tests/interop/test_jax.py compares their offsets with the installed
header where a C compiler is at hand. A call frame carrying the metadata extension asks for the
API version the handler was built against, and gets it.
"""
from __future__ import annotations

import ctypes
import itertools
from dataclasses import dataclass

import llvmlite.binding as llvm
import llvmlite.ir as ir

from ..backend.cpu import jit
from ..backend.llvm.context import ERROR_WORDS

API_MAJOR, API_MINOR = 0, 3
EXTENSION_METADATA = 1
ERROR_INTERNAL = 13
ERROR_FAILED_PRECONDITION = 9
CUDA_INVALID_CONTEXT = 201

_p = ctypes.c_void_p


class ExtensionBase(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("type", ctypes.c_int), ("next", _p)]


class ApiVersion(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p),
                ("major_version", ctypes.c_int), ("minor_version", ctypes.c_int)]


class Buffer(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p),
                ("dtype", ctypes.c_int), ("data", _p), ("rank", ctypes.c_int64),
                ("dims", _p)]


class Args(ctypes.Structure):   # XLA_FFI_Args and XLA_FFI_Rets alike
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p),
                ("size", ctypes.c_int64), ("types", _p), ("args", _p)]


class Attrs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p),
                ("size", ctypes.c_int64), ("types", _p), ("names", _p), ("attrs", _p)]


class CallFrame(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p), ("api", _p),
                ("ctx", _p), ("stage", ctypes.c_int), ("args", Args), ("rets", Args),
                ("attrs", Attrs), ("future", _p)]


class Metadata(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("api_version", ApiVersion),
                ("traits", ctypes.c_uint32), ("state_type_id", ctypes.c_int64)]


class MetadataExtension(ctypes.Structure):
    _fields_ = [("extension_base", ExtensionBase), ("metadata", _p)]


class ErrorCreateArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p), ("message", _p),
                ("errc", ctypes.c_int)]


class StreamGetArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p), ("ctx", _p),
                ("stream", _p)]


class DeviceOrdinalGetArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p), ("ctx", _p),
                ("device_ordinal", ctypes.c_int32)]


_API_FUNCTIONS = ("XLA_FFI_Error_Create", "XLA_FFI_Error_GetMessage", "XLA_FFI_Error_Destroy",
                  "XLA_FFI_Handler_Register", "XLA_FFI_Stream_Get", "XLA_FFI_Type_Register",
                  "XLA_FFI_ExecutionContext_Get", "XLA_FFI_State_Set", "XLA_FFI_State_Get",
                  "XLA_FFI_DeviceMemory_Allocate", "XLA_FFI_DeviceMemory_Free",
                  "XLA_FFI_ThreadPool_Schedule", "XLA_FFI_ThreadPool_NumThreads",
                  "XLA_FFI_Future_Create", "XLA_FFI_Future_SetAvailable",
                  "XLA_FFI_Future_SetError", "XLA_FFI_RunId_Get", "XLA_FFI_DeviceOrdinal_Get")


class Api(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p),
                ("api_version", ApiVersion), ("internal_api", _p)] + \
        [(name, _p) for name in _API_FUNCTIONS]


def struct_size(struct: type, last: str) -> int:
    """XLA_FFI_STRUCT_SIZE: the bytes up to the end of field `last` (not sizeof: no tail
    padding), what a caller writes in `struct_size`."""
    field = getattr(struct, last)
    return field.offset + field.size


def offset(struct: type, *path: str) -> int:
    """The byte offset of a (nested) field."""
    total, kind = 0, struct
    for name in path:
        field = getattr(kind, name)
        total += field.offset
        kind = dict(kind._fields_)[name]
    return total


# what the handlers check and write
CALL_FRAME_SIZE = struct_size(CallFrame, "attrs")
API_VERSION_SIZE = struct_size(ApiVersion, "minor_version")
METADATA_SIZE = struct_size(Metadata, "traits")


# ---- the plans the handlers run ---------------------------------------------------------------
@dataclass(frozen=True)
class Patch:
    """Word `word` of a launch's block is the data pointer of operand (`ret=False`) or result
    `index`, advanced by `batch_stride` bytes per element of the batch."""
    word: int
    index: int
    ret: bool
    batch_stride: int = 0


@dataclass(frozen=True)
class HostLaunch:
    """A kernel compiled by the CPU backend: `entry(words, 0, units, errors)`."""
    entry: int
    words: tuple[int, ...]      # the block as unsigned 64-bit words
    units: int
    patches: tuple[Patch, ...]
    failure: str                # the message when the kernel reports an error


@dataclass(frozen=True)
class DeviceLaunch:
    """cuLaunchKernel(function, grid, block, shared, stream, slots, NULL)."""
    function: int
    launch_kernel: int
    dims: tuple[int, ...]       # grid (3), block (3), shared bytes
    words: tuple[int, ...]      # the parameter slots, 8 bytes each
    patches: tuple[Patch, ...]
    failure: str                # the message's start when the launch fails; the code follows


@dataclass(frozen=True)
class DeviceContext:
    set_current: int            # cuCtxSetCurrent's address
    context: int                # the context the functions were loaded in
    ordinal: int                # its device, which must be the one XLA runs the call on


_i8, _i32, _i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
_ptr = _i8.as_pointer()
_FALSE = ir.Constant(ir.IntType(1), 0)   # memcpy and memset: not volatile
_names = itertools.count()
_keep: list = []       # the handlers' ctypes wrappers, kept for the process


def build_handler(launches: list, batch: int = 1, device: DeviceContext | None = None) -> int:
    """Compile a handler running `launches` (all HostLaunch or all DeviceLaunch) `batch` times;
    its address."""
    name = f"zymo_xla_handler_{next(_names)}"
    module = ir.Module(name)
    _Emitter(module, name, launches, batch, device)
    ref = llvm.parse_assembly(str(module))
    ref.verify()
    return jit.quick_load(ref, [name])[0]


def capsule(address: int):
    """A PyCapsule of a handler's address, as jax.ffi.register_ffi_target takes."""
    import jax.ffi
    handler = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(address)
    _keep.append(handler)
    return jax.ffi.pycapsule(handler)


class _Emitter:
    def __init__(self, module, name, launches, batch, device):
        self.module, self.device = module, device
        fn = ir.Function(module, ir.FunctionType(_ptr, [_ptr]), name)
        self.fn = fn
        self.memcpy = module.declare_intrinsic("llvm.memcpy", [_ptr, _ptr, _i64])
        self.memset = module.declare_intrinsic("llvm.memset", [_ptr, _i64])
        self.strings = itertools.count()
        b = self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        frame = fn.args[0]
        self._answer_metadata(frame)
        self.api = self.load(frame, offset(CallFrame, "api"), _ptr)
        self.ctx = self.load(frame, offset(CallFrame, "ctx"), _ptr)
        size = self.load(frame, offset(CallFrame, "struct_size"), _i64)
        with b.if_then(b.icmp_unsigned("<", size, _c(offset(CallFrame, "attrs")))):
            self.fail(f"zymo: this XLA passes a call frame of {{}} bytes; zymo's handlers "
                      f"read the layout of XLA FFI {API_MAJOR}.{API_MINOR}",
                      ERROR_FAILED_PRECONDITION, size)
        self.args = self.load(frame, offset(CallFrame, "args", "args"), _ptr)
        self.rets = self.load(frame, offset(CallFrame, "rets", "args"), _ptr)
        stream = None
        if launches and isinstance(launches[0], DeviceLaunch):
            self._check_device()
            stream = self._stream()
        counter = b.alloca(_i64, name="element")
        b.store(_c(0), counter)
        head, body, done = (fn.append_basic_block(n) for n in ("head", "body", "done"))
        b.branch(head)
        b.position_at_end(head)
        element = b.load(counter)
        b.cbranch(b.icmp_signed("<", element, _c(batch)), body, done)
        b.position_at_end(body)
        for launch in launches:
            if isinstance(launch, HostLaunch):
                self._host_launch(launch, element)
            else:
                self._device_launch(launch, element, stream)
        b.store(b.add(element, _c(1)), counter)
        b.branch(head)
        b.position_at_end(done)
        b.ret(ir.Constant(_ptr, None))

    # ---- memory -----------------------------------------------------------------------
    def at(self, base, byte_offset: int, kind):
        """A `kind*` to `base` + `byte_offset` bytes."""
        return self.b.bitcast(self.b.gep(base, [_c(byte_offset)]), kind.as_pointer())

    def load(self, base, byte_offset: int, kind):
        return self.b.load(self.at(base, byte_offset, kind))

    def store(self, value, base, byte_offset: int):
        self.b.store(value, self.at(base, byte_offset, value.type))

    def string(self, text: str):
        data = bytearray(text.encode()) + b"\0"
        kind = ir.ArrayType(_i8, len(data))
        var = ir.GlobalVariable(self.module, kind, f"message_{next(self.strings)}")
        var.global_constant, var.linkage = True, "internal"
        var.initializer = ir.Constant(kind, data)
        return self.b.bitcast(var, _ptr)

    def words(self, values: tuple[int, ...]):
        """A stack copy of the constant words `values` (an i8* to it)."""
        b = self.b
        count = max(len(values), 1)
        kind = ir.ArrayType(_i64, count)
        var = ir.GlobalVariable(self.module, kind, f"words_{next(self.strings)}")
        var.global_constant, var.linkage = True, "internal"
        var.initializer = ir.Constant(kind, [v & (2**64 - 1) for v in values] or [0])
        with b.goto_entry_block():   # one stack slot per launch, however long the batch
            block = b.alloca(_i64, count)
        block = b.bitcast(block, _ptr)
        b.call(self.memcpy, [block, b.bitcast(var, _ptr), _c(8 * count), _FALSE])
        return block

    def buffer_data(self, patch: Patch, element):
        b = self.b
        table = self.rets if patch.ret else self.args
        buffer = b.load(b.gep(b.bitcast(table, _ptr.as_pointer()), [_c(patch.index)]))
        data = b.ptrtoint(self.load(buffer, offset(Buffer, "data"), _ptr), _i64)
        if patch.batch_stride:
            data = b.add(data, b.mul(element, _c(patch.batch_stride)))
        return data

    def patch(self, block, patches, element) -> None:
        for patch in patches:
            self.store(self.buffer_data(patch, element), block, 8 * patch.word)

    # ---- errors -----------------------------------------------------------------------
    def fail(self, message: str, code: int, number=None) -> None:
        """Return an XLA error with `message`, whose `{}` (if any) is `number` in decimal."""
        b = self.b
        if number is None:
            text = self.string(message)
        else:
            before, after = message.split("{}")
            text = self._formatted(before, number, after)
        args = b.bitcast(b.alloca(ir.ArrayType(_i8, ctypes.sizeof(ErrorCreateArgs))), _ptr)
        self.store(_c(struct_size(ErrorCreateArgs, "errc")), args, 0)
        self.store(ir.Constant(_ptr, None), args, offset(ErrorCreateArgs, "extension_start"))
        self.store(text, args, offset(ErrorCreateArgs, "message"))
        self.store(ir.Constant(_i32, code), args, offset(ErrorCreateArgs, "errc"))
        create = self.load(self.api, offset(Api, "XLA_FFI_Error_Create"),
                           ir.FunctionType(_ptr, [_ptr]).as_pointer())
        b.ret(b.call(create, [args]))

    def _formatted(self, before: str, number, after: str):
        """`before` + decimal(number) + `after` in a stack buffer (XLA copies the message)."""
        b = self.b
        size = len(before.encode()) + 24 + len(after.encode()) + 1
        out = b.bitcast(b.alloca(ir.ArrayType(_i8, size)), _ptr)
        b.call(self.memcpy, [out, self.string(before), _c(len(before.encode())),
                             _FALSE])
        digits = b.bitcast(b.alloca(ir.ArrayType(_i8, 24)), _ptr)
        value = b.alloca(_i64)
        count = b.alloca(_i64)
        number = b.sext(number, _i64) if number.type != _i64 else number
        negative = b.icmp_signed("<", number, _c(0))
        b.store(b.select(negative, b.neg(number), number), value)
        b.store(_c(0), count)
        loop, finish = self.fn.append_basic_block(), self.fn.append_basic_block()
        b.branch(loop)
        b.position_at_end(loop)     # digits, last first
        v, k = b.load(value), b.load(count)
        b.store(b.trunc(b.add(b.urem(v, _c(10)), _c(48)), _i8), b.gep(digits, [k]))
        b.store(b.udiv(v, _c(10)), value)
        b.store(b.add(k, _c(1)), count)
        b.cbranch(b.icmp_unsigned(">", v, _c(9)), loop, finish)
        b.position_at_end(finish)
        start = _c(len(before.encode()))
        with b.if_then(negative):
            b.store(ir.Constant(_i8, ord("-")), b.gep(out, [start]))
        position = b.add(start, b.zext(negative, _i64))
        total = b.load(count)
        copy, copied = self.fn.append_basic_block(), self.fn.append_basic_block()
        index = b.alloca(_i64)
        b.store(_c(0), index)
        b.branch(copy)
        b.position_at_end(copy)
        i = b.load(index)
        digit = b.load(b.gep(digits, [b.sub(b.sub(total, i), _c(1))]))
        b.store(digit, b.gep(out, [b.add(position, i)]))
        b.store(b.add(i, _c(1)), index)
        b.cbranch(b.icmp_signed("<", b.add(i, _c(1)), total), copy, copied)
        b.position_at_end(copied)
        tail = b.add(position, total)
        b.call(self.memcpy, [b.gep(out, [tail]), self.string(after),
                             _c(len(after.encode()) + 1), _FALSE])
        return out

    # ---- the call frame ---------------------------------------------------------------
    def _answer_metadata(self, frame) -> None:
        """A frame whose extension is the metadata one asks for the API version: give it."""
        b, fn = self.b, self.fn
        extension = self.load(frame, offset(CallFrame, "extension_start"), _ptr)
        check, answer, execute = (fn.append_basic_block(n) for n in ("ext", "meta", "exec"))
        b.cbranch(b.icmp_unsigned("!=", extension, ir.Constant(_ptr, None)), check, execute)
        b.position_at_end(check)
        kind = self.load(extension, offset(ExtensionBase, "type"), _i32)
        b.cbranch(b.icmp_signed("==", kind, ir.Constant(_i32, EXTENSION_METADATA)), answer,
                  execute)
        b.position_at_end(answer)
        metadata = self.load(extension, offset(MetadataExtension, "metadata"), _ptr)
        version = offset(Metadata, "api_version")
        self.store(_c(API_VERSION_SIZE), metadata, version)
        self.store(ir.Constant(_ptr, None), metadata,
                   version + offset(ApiVersion, "extension_start"))
        self.store(ir.Constant(_i32, API_MAJOR), metadata,
                   version + offset(ApiVersion, "major_version"))
        self.store(ir.Constant(_i32, API_MINOR), metadata,
                   version + offset(ApiVersion, "minor_version"))
        self.store(ir.Constant(_i32, 0), metadata, offset(Metadata, "traits"))
        size = self.load(metadata, 0, _i64)
        with b.if_then(b.icmp_unsigned(">=", size, _c(ctypes.sizeof(Metadata)))):
            self.store(_c(0), metadata, offset(Metadata, "state_type_id"))   # stateless
        b.ret(ir.Constant(_ptr, None))
        b.position_at_end(execute)

    def _api_call(self, field: str, args):
        """Call api->`field`(args); return its error if it gives one."""
        b = self.b
        fn = self.load(self.api, offset(Api, field), ir.FunctionType(_ptr, [_ptr]).as_pointer())
        error = b.call(fn, [args])
        with b.if_then(b.icmp_unsigned("!=", error, ir.Constant(_ptr, None))):
            b.ret(error)

    def _stream(self):
        b = self.b
        args = b.bitcast(b.alloca(ir.ArrayType(_i8, ctypes.sizeof(StreamGetArgs))), _ptr)
        self.store(_c(struct_size(StreamGetArgs, "stream")), args, 0)
        self.store(ir.Constant(_ptr, None), args, offset(StreamGetArgs, "extension_start"))
        self.store(self.ctx, args, offset(StreamGetArgs, "ctx"))
        self._api_call("XLA_FFI_Stream_Get", args)
        return b.ptrtoint(self.load(args, offset(StreamGetArgs, "stream"), _ptr), _i64)

    def _check_device(self) -> None:
        """The functions were loaded for one device: refuse a call XLA runs on another (where
        this XLA can say which device it runs on)."""
        b, device = self.b, self.device
        api_size = self.load(self.api, 0, _i64)
        field = offset(Api, "XLA_FFI_DeviceOrdinal_Get")
        with b.if_then(b.icmp_unsigned(">=", api_size, _c(field + 8))):
            args = b.bitcast(b.alloca(ir.ArrayType(_i8, ctypes.sizeof(DeviceOrdinalGetArgs))),
                             _ptr)
            self.store(_c(struct_size(DeviceOrdinalGetArgs, "device_ordinal")), args, 0)
            self.store(ir.Constant(_ptr, None), args,
                       offset(DeviceOrdinalGetArgs, "extension_start"))
            self.store(self.ctx, args, offset(DeviceOrdinalGetArgs, "ctx"))
            self._api_call("XLA_FFI_DeviceOrdinal_Get", args)
            ordinal = self.load(args, offset(DeviceOrdinalGetArgs, "device_ordinal"), _i32)
            with b.if_then(b.icmp_signed("!=", ordinal, ir.Constant(_i32, device.ordinal))):
                self.fail(f"zymo: this kernel was loaded on CUDA device {device.ordinal} "
                          f"(zymo's current device: zm.cuda.select_device / ZYMO_DEVICE), and "
                          f"XLA runs the call on device {{}}: make that device zymo's before "
                          f"tracing", ERROR_FAILED_PRECONDITION, ordinal)

    # ---- launches ---------------------------------------------------------------------
    def _host_launch(self, launch: HostLaunch, element) -> None:
        b = self.b
        block = self.words(launch.words)
        self.patch(block, launch.patches, element)
        with b.goto_entry_block():
            errors = b.alloca(ir.ArrayType(_i64, ERROR_WORDS))
        errors = b.bitcast(errors, _ptr)
        b.call(self.memset, [errors, ir.Constant(_i8, 0), _c(8 * ERROR_WORDS),
                             _FALSE])
        entry_type = ir.FunctionType(ir.VoidType(), [_ptr, _i64, _i64, _ptr])
        entry = b.inttoptr(_c(launch.entry), entry_type.as_pointer())
        b.call(entry, [block, _c(0), _c(launch.units), errors])
        with b.if_then(b.icmp_signed("!=", self.load(errors, 0, _i64), _c(0))):
            self.fail(launch.failure, ERROR_INTERNAL)

    def _device_launch(self, launch: DeviceLaunch, element, stream) -> None:
        b = self.b
        slots = self.words(launch.words)
        self.patch(slots, launch.patches, element)
        count = max(len(launch.words), 1)
        with b.goto_entry_block():
            pointers = b.alloca(_ptr, count)
        for k in range(len(launch.words)):
            b.store(b.gep(slots, [_c(8 * k)]), b.gep(pointers, [_c(k)]))
        params = pointers if launch.words else ir.Constant(_ptr.as_pointer(), None)
        kind = ir.FunctionType(_i32, [_i64] + [_i32] * 7 + [_i64, _ptr.as_pointer(),
                                                             _ptr.as_pointer()])
        call = b.inttoptr(_c(launch.launch_kernel), kind.as_pointer())
        arguments = [_c(launch.function), *[ir.Constant(_i32, d) for d in launch.dims],
                     stream, params, ir.Constant(_ptr.as_pointer(), None)]
        result = b.call(call, arguments)
        with b.if_then(b.icmp_signed("==", result, ir.Constant(_i32, CUDA_INVALID_CONTEXT))):
            # an XLA thread with no current context: the kernel's, then once more
            device = self.device
            set_current = b.inttoptr(_c(device.set_current),
                                     ir.FunctionType(_i32, [_i64]).as_pointer())
            b.call(set_current, [_c(device.context)])
            again = b.call(call, arguments)
            with b.if_then(b.icmp_signed("!=", again, ir.Constant(_i32, 0))):
                self.fail(launch.failure, ERROR_INTERNAL, again)
        with b.if_then(b.icmp_signed("!=", result, ir.Constant(_i32, 0))):
            with b.if_then(b.icmp_signed("!=", result, ir.Constant(_i32, CUDA_INVALID_CONTEXT))):
                self.fail(launch.failure, ERROR_INTERNAL, result)


def _c(value: int):
    return ir.Constant(_i64, value)
