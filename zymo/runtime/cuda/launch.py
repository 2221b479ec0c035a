"""Launch plans: per (kernel, argument types, device) the CUfunction and a launcher for its
parameter slots, so a warm launch is: read each argument (one describer per Python type), call
the plan's launcher. The launcher is compiled for the host (native.py) and converts the words
into the slots and calls cuLaunchKernel in one C call; where the host JIT cannot build one, the
plan packs preallocated slot blocks with `struct.pack_into` and calls cuda-bindings.
The configuration (block and grid limits, shared memory, stream) is validated once per
(configuration, plan), not per launch.

Arrays the codegen stage proved private to a thread are `noalias` in a plan's kernel
(passes/alias.py). That needs the arguments apart in memory and, for some, a launch with one
thread along the axes their indices do not use: the launchers check the overlap of the pairs
that matter (in the compiled launcher, a few comparisons), the configuration picks the plan,
and a launch that breaks either runs the program's build without `noalias` instead.

The `.entry` ABI: per kernel argument in order, an array is its data pointer (u64), then `ndim`
int64 extents, then `ndim` int64 strides in elements; a scalar is passed by value (bool as a
byte). Each parameter gets an 8-byte slot; the driver copies each parameter's size from the
start of its slot.
"""
from __future__ import annotations

import ctypes
import functools
import math
import os
import struct
import threading
import warnings

import numpy as np

from ...backend.llvm.context import ERROR_WORDS, RAISED, raised_exception
from ...diagnostics import BoundsError, Diagnostic, LaunchError
from ...ir.types import SMALL_ELEMENTS, Array, byte_span, is_small
from . import driver, native
from .arguments import param_of_arg
from .arrays import (KEYED_TYPES, DeviceArray, _is_cupy, _is_jax, _is_torch, array_info,
                     c_strides, dtype_key, info_is_small, is_c_contiguous, to_device)
from .driver import CudaError, error_text
from .streams import as_stream

_SLOT_CODES = {"f16": "e6x", "f32": "f4x", "f64": "d", "i8": "b7x", "i16": "h6x",
               "i32": "i4x", "i64": "q", "u8": "B7x", "u16": "H6x", "u32": "I4x",
               "u64": "Q", "bool": "?7x"}
_OUT_OF_RESOURCES = 701


def slot_kinds(params) -> list[str]:
    """The type of each argument slot of a kernel taking `params` ("u64" for pointers)."""
    kinds = []
    for param in params:
        kind = param.type
        if isinstance(kind, Array):
            kinds += ["u64"] + ["i64"] * (2 * kind.ndim)
        elif kind.is_complex:   # two slots: the real part, then the imaginary part
            kinds += [kind.part.name] * 2
        else:
            kinds.append(kind.name)
    return kinds


def slot_format(params) -> str:
    """The struct format of the argument slots of a kernel taking `params`."""
    return "<" + "".join(_SLOT_CODES[kind] for kind in slot_kinds(params))


class LaunchPlan:
    """One kernel signature on one device, ready to launch."""

    def __init__(self, program, device):
        self.name, self.device, self.params = program.name, device, program.params
        self.function = program.function(device)
        checked = program.bounds_sites is not None
        kinds = slot_kinds(program.params) + (["u64"] if checked else [])
        self.slot_count = len(kinds)
        self.pack = struct.Struct("<" + "".join(_SLOT_CODES[k] for k in kinds)).pack_into
        # Argument blocks for the struct path (see _new_block). A launch pops one and
        # puts it back: list.pop/append are atomic under the GIL, so threads launching at once
        # never pack the same block (a second thread finds the list empty and makes another),
        # without the cost of a lock. The driver copies the parameters before returning.
        self.blocks = [self._new_block()]
        self.cooperative = getattr(program, "cooperative", False)
        self.launch_kernel = _cooperative_launch() if self.cooperative else \
            driver.bindings().cuLaunchKernel
        self.launch_address = driver.launch_kernel_address(self.cooperative)
        self.kinds = kinds
        # the compiled launchers (native.py) and this plan's table for them; None where the
        # host JIT cannot build them
        self.launchers = _launchers()
        private = program.private
        self.aliased = program.aliased      # () -> the program without noalias
        self.pairs = _overlap_pairs(program.params, private)
        self.single = tuple(k for k, axis in enumerate("xyz") if axis in private.single) \
            if private is not None else ()
        self.table = None if self.launchers is None or len(kinds) > native.MAX_SLOTS else \
            native.PlanTable(
                kinds, int(self.function), self.launch_address, pairs=self.pairs)
        self._guarded: dict = {}   # launch key -> guarded table (or None)
        self.max_threads = driver.function_attribute(self.function, "MAX_THREADS_PER_BLOCK")
        self.registers = driver.function_attribute(self.function, "NUM_REGS")
        self.static_shared = driver.function_attribute(self.function, "SHARED_SIZE_BYTES")
        if getattr(program, "shared_carveout", None) is not None:
            driver.set_function_attribute(self.function, "PREFERRED_SHARED_MEMORY_CARVEOUT",
                                          program.shared_carveout)
        self.dynamic_shared = device.attribute("MAX_SHARED_MEMORY_PER_BLOCK") - self.static_shared
        self.bounds_sites = program.bounds_sites
        self.raises = getattr(program, "raises", ())   # the kernel's raises, by number
        self.errors = DeviceArray(ERROR_WORDS, np.int64) if checked else None
        self.checked_lock = threading.Lock()
        # run(state, words), state from `configure`: bound once, so that the unchecked launch
        # costs no extra call
        self._launch = self._launch_native if self.table is not None else self._launch_block
        self.run = self._run_checked if checked else self._launch

    def _new_block(self) -> tuple:
        """(slots, address of the pointer array, the pointer array)"""
        count = max(self.slot_count, 1)
        slots = (ctypes.c_uint64 * count)()
        base = ctypes.addressof(slots)
        pointers = (ctypes.c_void_p * count)(*[base + 8 * k for k in range(count)])
        return (slots, ctypes.addressof(pointers) if self.slot_count else 0, pointers)

    # ---- validation, once per configuration ---------------------------------------------
    def configure(self, grid, block, shared: int, stream) -> tuple:
        """cuLaunchKernel's arguments before the parameters, after checking them: the state
        `run` takes, (dims tuple, address of the native LaunchConfig, the LaunchConfig)."""
        device, problems, hints = self.device, [], []
        for what, dims, prefix in (("block", block, "MAX_BLOCK_DIM_"),
                                   ("grid", grid, "MAX_GRID_DIM_")):
            for axis, extent in zip("XYZ", dims):
                limit = device.attribute(prefix + axis)
                if extent > limit:
                    problems.append(f"{what}.{axis.lower()} = {extent} is above the device's "
                                    f"limit of {limit}")
        threads = block[0] * block[1] * block[2]
        if threads > self.max_threads:
            problems.append(f"{threads} threads per block; this kernel can run at most "
                            f"{self.max_threads}")
            if self.max_threads < device.attribute("MAX_THREADS_PER_BLOCK"):
                hints.append(f"it uses {self.registers} registers per thread; launch fewer "
                             f"threads per block")
        optin = device.attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
        if self.static_shared + shared > optin:
            problems.append(f"{self.static_shared} bytes of static and {shared} bytes of "
                            f"dynamic shared memory per block; the device allows at most "
                            f"{optin} in all")
            hints.append(f"above {device.attribute('MAX_SHARED_MEMORY_PER_BLOCK')} bytes zymo "
                         f"opts the kernel in to the device's maximum of {optin}; use smaller "
                         f"shared arrays, or tile the data")
        elif shared > self.dynamic_shared:
            # CUDA caps dynamic shared memory at 48 KiB unless the kernel opts in; do it for
            # the user, who has no cuFuncSetAttribute in the kernel language
            driver.set_function_attribute(self.function, "MAX_DYNAMIC_SHARED_SIZE_BYTES", shared)
            self.dynamic_shared = shared
        if self.cooperative and not problems:
            fits = driver.max_resident_blocks(self.function, device, threads, shared)
            blocks = grid[0] * grid[1] * grid[2]
            if blocks > fits:
                problems.append(f"{blocks} blocks, and the kernel waits at grid.sync(), which "
                                f"needs every block resident at once: at most {fits} fit")
                hints.append("launch fewer blocks (at most that many) and give each thread "
                             "several elements with a grid-stride loop")
        if problems:
            text = "\n".join(["cannot launch " + describe_config(self.name, grid, block, shared)
                              + ":"] + ["  " + p for p in problems] + ["hint: " + h for h in hints])
            raise LaunchError(text)
        dims = (*grid, *block, shared, as_stream(stream))
        config = native.LaunchConfig(grid, block, shared, int(dims[7]),
                                     driver.DEVICE_EPOCH.value)
        return (dims, ctypes.addressof(config), config)

    def fast_launcher(self, key: tuple, state: tuple, args=()):
        """`launcher(*args)` for arguments like `args`, with launch key `key`, under
        configuration `state`: the compiled guarded launcher (returns 0 when it launched; see
        native.py), or None where an argument is neither a DeviceArray, a scalar nor a
        foreign array with a reader, or the plan is checked."""
        if key in self._guarded:   # DeviceArrays and scalars: the key names their types
            table = self._guarded[key]
        else:   # foreign arrays: a table per exact type and dtype object (the table holds
            # the dtype, so its id names no other object while the entry lives)
            found = (key, *[(type(a), id(a.dtype)) for a in args if _READERS.get(type(a))])
            table = self._guarded.get(found, False)
            if table is False:
                table = self._guarded_table(key, args)
                self._guarded[found if len(found) > 1 else key] = table
        if table is None:
            return None
        # the plan keeps the table and config._cuda the LaunchConfig, for as long as the
        # Launch holds this launcher
        return functools.partial(self.launchers[1], table.address, state[1])

    def _guarded_table(self, key: tuple, values=()):
        if self.table is None or self.launchers[1] is None or self.run is not self._launch \
                or len(key) != len(self.params):
            return None
        args = []
        for index, (item, param) in enumerate(zip(key, self.params)):
            reader = _READERS.get(type(values[index])) if index < len(values) else None
            if isinstance(item, str) and isinstance(param.type, Array):   # DeviceArray._key
                args.append(native.ArrayArg(KEYED_TYPES[item.split(" ", 1)[0]], item,
                                            1 + 2 * param.type.ndim))
            elif reader is not None and isinstance(param.type, Array):
                # the key of a foreign array: (dtype, ndim, contiguous, small)
                value, (_, ndim, contiguous, small) = values[index], item
                args.append(native.ForeignArrayArg(type(value), reader, value.dtype,
                                                   param.type.dtype.nbytes, ndim,
                                                   contiguous, small, owner=self.device))
            elif isinstance(item, type) and not isinstance(param.type, Array) \
                    and not param.type.is_complex:   # (a complex scalar fills two slots)
                args.append(native.ScalarArg(item))
            else:
                return None
        return native.PlanTable(self.kinds, int(self.function),
                                self.launch_address, args, self.pairs)

    # ---- the launch ---------------------------------------------------------------------
    def _launch_native(self, state: tuple, words: list, retried: bool = False) -> None:
        """Launch through the compiled launcher (a plan's `run`, unchecked)."""
        try:
            result = self.launchers[0](self.table.address, state[1], *words)
        except (TypeError, OverflowError) as error:
            raise self._bad_arguments(error, words) from None
        if result:
            if result == native.WRONG_COUNT:
                raise self._bad_arguments(None, words)
            if result == native.OVERLAP:
                return self._launch_aliased(state, words)
            self._failed(result, state, words, retried)

    def _launch_block(self, state: tuple, words: list, retried: bool = False) -> None:
        """Pack `words` into a free argument block and launch through cuda-bindings."""
        if self.pairs and _overlap(self.pairs, words):
            return self._launch_aliased(state, words)
        try:
            block = self.blocks.pop()
        except IndexError:                     # another thread is packing the only block
            block = self._new_block()
        try:
            self.pack(block[0], 0, *words)
            result = self.launch_kernel(self.function, *state[0], block[1], 0)
        except struct.error as error:
            raise self._bad_arguments(error, words) from None
        finally:
            self.blocks.append(block)
        if result[0]:
            self._failed(result[0], state, words, retried)

    def for_shape(self, grid, block) -> "LaunchPlan":
        """This plan, or its build without `noalias` where the launch's shape breaks what the
        private arrays assume (one thread along an axis their indices do not use)."""
        for k in self.single:
            if grid[k] != 1 or block[k] != 1:
                return plan_of(self.aliased(), self.device)
        return self

    def _launch_aliased(self, state: tuple, words: list) -> None:
        """Launch `words` (whose arrays overlap) with the build without `noalias`."""
        plan = plan_of(self.aliased(), self.device)
        dims = state[0]
        plan._launch(plan.configure(dims[:3], dims[3:6], dims[6], dims[7]), words)

    def _run_checked(self, state: tuple, words: list) -> None:
        """A bounds-checked launch: the kernel reports the first bad index in `errors`; reading
        it back waits for the kernel (checking is for debugging, not speed)."""
        errors, sites = self.errors, self.bounds_sites
        assert errors is not None and sites is not None
        with self.checked_lock:                # one error buffer per plan
            errors.copy_from_host(np.zeros(ERROR_WORDS, np.int64))
            self._launch(state, [*words, errors.data])
            drv = driver.bindings()
            driver.wait_for(drv.cuStreamQuery, state[0][7], drv.cuStreamSynchronize,
                            "cuStreamSynchronize")
            found = errors.copy_to_host()
        if found[0] == RAISED:   # the kernel's own exception (ops/raising.py)
            raise raised_exception(self.raises, found)
        if found[0]:
            array, loc = sites[int(found[1])]
            ndim = int(found[2])
            index = tuple(int(i) for i in found[3:3 + ndim])
            shape = tuple(int(n) for n in found[7:7 + ndim])
            message = (f"index {index[0] if ndim == 1 else index} is out of bounds for array "
                       f"`{array}` with shape {shape}")
            error = BoundsError(Diagnostic(loc, message).format())
            error.array, error.index, error.shape, error.loc = array, index, shape, loc
            raise error

    def _failed(self, code, state: tuple, words: list, retried: bool) -> None:
        if code == driver.INVALID_CONTEXT and not retried:   # a thread new to this device
            self.device.make_current()
            return self._launch(state, words, True)
        code, dims = int(code), state[0]
        text = (f"launching {describe_config(self.name, dims[:3], dims[3:6], dims[6])} failed: "
                f"{error_text(code)}")
        if code == _OUT_OF_RESOURCES:
            text += (f"\nhint: the kernel uses {self.registers} registers per thread; launch "
                     f"fewer threads per block")
        raise CudaError(text, code)

    def _bad_arguments(self, error: Exception | None, words: list) -> LaunchError:
        offset = 0
        for index, param in enumerate(self.params):
            count = len(slot_kinds([param]))
            piece = words[offset:offset + count]
            try:
                struct.pack(slot_format([param]), *piece)
            except struct.error as found:
                return LaunchError(f"{self.name}: argument {index} ({piece[0]!r}) cannot be "
                                   f"passed as {param}: {found}")
            offset += count
        return LaunchError(f"{self.name}: the arguments do not match the kernel's parameters "
                           f"{list(self.params)}: {error}")


def _cooperative_launch():
    """cuLaunchCooperativeKernel with cuLaunchKernel's arguments (it takes no `extra`)."""
    launch = driver.bindings().cuLaunchCooperativeKernel
    return lambda function, *rest: launch(function, *rest[:-1])


def _launchers():
    """native.entries(), or None where they cannot be had: no driver library to call, a host
    JIT failure (then plans pack with struct and launch through cuda-bindings: slower, same
    results), or ZYMO_NATIVE_LAUNCH=0."""
    if os.environ.get("ZYMO_NATIVE_LAUNCH", "1") == "0" or \
            driver.launch_kernel_address() is None:
        return None
    try:
        return native.entries()
    except Exception as error:   # noqa: BLE001 - any JIT failure leaves the struct path
        warnings.warn(f"zymo: no compiled launchers ({error}); launching through "
                      f"cuda-bindings", RuntimeWarning, stacklevel=2)
        return None


def describe_config(name: str, grid, block, shared: int) -> str:
    return (f"{name} with grid {tuple(grid)}, block {tuple(block)} and {shared} bytes of "
            f"dynamic shared memory")


# ---- reading arguments: one describer per Python type ----------------------------------------
# A describer appends to `key` something that determines the kernel parameter (dtype, ndim,
# layout; for scalars the type) and to `words` the slot values (pointer, extents, strides).
def _describe_scalar(value, key: list, words: list) -> None:
    key.append(type(value))
    words.append(value)


def _describe_time(value, key: list, words: list) -> None:
    key.append(value.dtype)                       # the unit matters, not only the type
    words.append(int(np.asarray(value).view(np.int64)))


def _describe_complex(value, key: list, words: list) -> None:
    key.append(type(value))
    words += [value.real, value.imag]


def _describe_device_array(value, key: list, words: list) -> None:
    key.append(value._key)
    words.extend(value._words)


def _describe_torch(value, key: list, words: list) -> None:
    if not value.is_cuda:
        raise LaunchError(f"a PyTorch tensor on {value.device} cannot be passed to a CUDA "
                          f"launch: move it with tensor.cuda()")
    shape = value.shape
    contiguous = value.is_contiguous()
    small = contiguous and value.numel() < SMALL_ELEMENTS
    key.append((value.dtype, len(shape), contiguous, small))
    words.append(value.data_ptr())
    words.extend(shape)
    words.extend(value.stride())


def _describe_cupy(value, key: list, words: list) -> None:
    # `_c_contiguous` is the flag CuPy keeps; `.flags` builds a new object on every access
    item, shape = value.itemsize, value.shape
    contiguous = value._c_contiguous
    small = contiguous and value.size < SMALL_ELEMENTS
    key.append((dtype_key(value.dtype), len(shape), contiguous, small))
    words.append(value.data.ptr)
    words.extend(shape)
    words.extend([stride // item for stride in value.strides])


def _describe_cupy_flags(value, key: list, words: list) -> None:
    item, shape = value.itemsize, value.shape
    contiguous = value.flags.c_contiguous
    small = contiguous and value.size < SMALL_ELEMENTS
    key.append((dtype_key(value.dtype), len(shape), contiguous, small))
    words.append(value.data.ptr)
    words.extend(shape)
    words.extend([stride // item for stride in value.strides])


# the attribute a JAX array's words are left in, for the compiled launcher (see _describe_jax)
JAX_MEMO = "_zymo_launch_words"


def _describe_jax(value, key: list, words: list) -> None:
    """A JAX array, read through DLPack: its export waits until JAX (which computes
    asynchronously, on its own streams) has written the array, and gives its layout (JAX's
    default is row-major; a custom one comes as strides). JAX arrays never change, so the
    words are left on the array for the compiled launcher, which then reads only its pointer
    (a deleted or donated array raises there, a replaced buffer differs). As with any GPU
    array, one passed as an output is written in place."""
    from . import dlpack
    try:
        dtype, shape, strides, data, (place, ordinal) = dlpack.read(value)
    except BufferError as error:
        raise LaunchError(f"this JAX array cannot be passed to a CUDA launch ({error}): pass "
                          f"one device's piece (x.addressable_data(0)) or jax.device_put it "
                          f"onto one GPU") from None
    if place not in dlpack.GPU_DEVICE_TYPES:
        raise LaunchError(f"a JAX array in host memory (DLPack device type {place}) cannot be "
                          f"passed to a CUDA launch: jax.device_put it into the GPU's memory")
    device = driver.current_device()
    if ordinal != device.ordinal:
        raise LaunchError(f"a JAX array on GPU {ordinal} passed to a launch on GPU "
                          f"{device.ordinal}: jax.device_put(x, jax.devices('gpu')"
                          f"[{device.ordinal}]), or launch on its GPU with "
                          f"zymo.cuda.select_device({ordinal})")
    strides = c_strides(shape) if strides is None else tuple(strides)
    contiguous = is_c_contiguous(shape, strides)
    key.append((dtype, len(shape), contiguous, is_small(math.prod(shape), contiguous)))
    words.append(data)
    words.extend(shape)
    words.extend(strides)
    remember_jax(value, value.dtype if value.dtype == dtype else dtype, device, data, shape,
                 strides)


def remember_jax(value, dtype, device, data: int, shape: tuple, strides: tuple) -> None:
    """Leave a JAX array's words on it for the compiled launcher's reader; nothing where the
    array takes no attributes."""
    try:
        setattr(value, JAX_MEMO, (dtype, device, data, *shape, *strides))
    except (AttributeError, TypeError):
        pass


def _describe_other(value, key: list, words: list) -> None:
    info = array_info(value)
    if info is None:
        raise LaunchError(f"unsupported argument of type {type(value).__name__} for a CUDA "
                          f"launch: pass GPU arrays (__cuda_array_interface__ or DLPack), "
                          f"zm.to_device arrays or scalars")
    key.append((info.dtype, len(info.shape), info.contiguous, info_is_small(info)))
    words.append(info.data)
    words.extend(info.shape)
    words.extend(info.strides)


class _HostArray(Exception):
    """A NumPy array among a CUDA launch's arguments: the launch copies it in and back."""


def _describe_host_array(value, key: list, words: list) -> None:
    raise _HostArray


class PerformanceWarning(UserWarning):
    """A launch that is slower than it need be (numba's NumbaPerformanceWarning)."""


class HostCopyWarning(PerformanceWarning):
    """A NumPy array was passed to a CUDA launch: copied to the GPU and back at each launch."""


# the switch for HostCopyWarning; zymo.cuda's config (numba's CUDA_WARN_ON_IMPLICIT_COPY and
# DISABLE_PERFORMANCE_WARNINGS) sets it
WARN_ON_HOST_COPY = [True]


def warn_low_occupancy(blocks: int, stacklevel: int = 1) -> None:
    """numba's low-occupancy warning: fewer than 128 blocks leave a GPU mostly idle (twice the
    multiprocessors is the aim; 128 covers most GPUs). `stacklevel` counts from the caller."""
    if blocks < 128:
        warnings.warn(f"Grid size {blocks} will likely leave the GPU under-utilized, with "
                      f"low occupancy: launch 128 blocks or more", PerformanceWarning,
                      stacklevel=stacklevel + 1)


def _copied(value) -> bool:
    """Whether a launch copies `value` to the GPU: host memory, not a host view of managed
    memory (which has a __cuda_array_interface__)."""
    return isinstance(value, np.ndarray) and not hasattr(value, "__cuda_array_interface__")


def warn_host_copy(kernel, stacklevel: int = 1) -> None:
    """The HostCopyWarning, once per kernel (while WARN_ON_HOST_COPY is on); `stacklevel`
    counts from the caller."""
    if WARN_ON_HOST_COPY[0] and not getattr(kernel, "_warned_host_copy", False):
        kernel._warned_host_copy = True
        warnings.warn(f"{kernel.__name__}: Host array used in CUDA kernel will incur "
                      f"copy overhead to and from the GPU at each launch; copy it once with "
                      f"to_device(array) and read results with .copy_to_host()",
                      HostCopyWarning, stacklevel=stacklevel + 1)


def _launch_copying(config, args) -> None:
    """numba's behaviour for host arrays: each NumPy array is copied to the GPU, the kernel
    runs, and the (writeable) arrays are copied back once it is done."""
    warn_host_copy(config.kernel, stacklevel=3)
    copies = [to_device(value) if _copied(value) else value for value in args]
    launch(config, copies)
    driver.synchronize()
    for value, copy in zip(args, copies):
        if copy is not value and value.flags.writeable:
            value[...] = copy.copy_to_host()


_DESCRIBERS: dict = {DeviceArray: _describe_device_array}

# What the compiled guarded launcher reads of a foreign library's arrays (native.ArrayReader),
# by describer: the same parts the describer reads, so that both see one layout. A type whose
# describer has none here (DLPack and __cuda_array_interface__ producers) takes the general
# path at every launch.
_READER_OF = {
    # PyTorch: `data_ptr()` is where the tensor's elements start (storage offset included)
    _describe_torch: native.ArrayReader(flag="is_cuda", dtype="dtype", pointer="data_ptr()",
                                        shape="shape", strides="stride()",
                                        contiguous="is_contiguous()"),
    # CuPy: `data` is the array's MemoryPointer (offset included), strides are in bytes
    _describe_cupy: native.ArrayReader(dtype="dtype", pointer_via="data", pointer="ptr",
                                       shape="shape", strides="strides",
                                       strides_in_bytes=True, contiguous="_c_contiguous"),
}
_READER_OF[_describe_cupy_flags] = _READER_OF[_describe_cupy]
# JAX: the words _describe_jax left on the array, and its pointer read anew at each launch
_READER_OF[_describe_jax] = native.ArrayReader(dtype=None, pointer="unsafe_buffer_pointer()",
                                               memo=JAX_MEMO)
_READERS: dict = {}   # type -> its ArrayReader or None, filled by _describer_for


def _describer_for(kind: type):
    if issubclass(kind, DeviceArray):     # subclasses keep `_key` and `_words` as well
        describe = _describe_device_array
    elif issubclass(kind, np.ndarray) and not hasattr(kind, "__cuda_array_interface__"):
        describe = _describe_host_array   # (managed memory's host views are GPU arrays too)
    elif issubclass(kind, (complex, np.complexfloating)):
        describe = _describe_complex
    elif issubclass(kind, (np.datetime64, np.timedelta64)):
        describe = _describe_time
    elif issubclass(kind, (bool, int, float, np.generic)):
        describe = _describe_scalar
    elif _is_torch(kind):
        describe = _describe_torch
    elif _is_cupy(kind):
        describe = _describe_cupy if hasattr(kind, "_c_contiguous") else _describe_cupy_flags
    elif _is_jax(kind):
        describe = _describe_jax
    else:
        describe = _describe_other
    _DESCRIBERS[kind] = describe
    _READERS[kind] = _READER_OF.get(describe)
    return describe


# ---- entry points ---------------------------------------------------------------------------
def launch(config, args) -> None:
    """`kernel[grid, block, stream, shared](*args)` on CUDA (`config` is the runtime Launch)."""
    key: list = []
    words: list = []
    describers, add_key = _DESCRIBERS, key.append
    for value in args:
        if type(value) is DeviceArray:         # zymo's own arrays: no describer call
            add_key(value._key)
            words += value._words
        else:
            try:
                (describers.get(type(value)) or _describer_for(type(value)))(value, key, words)
            except _HostArray:
                return _launch_copying(config, args)
    signature = tuple(key)
    plan = config.kernel._plans.get(signature)
    if plan is None or plan.device is not driver._current:
        plan = _new_plan(config.kernel, signature, args)
    if plan.single:
        plan = plan.for_shape(config.grid, config.block)
    state = config._cuda
    if state is None or state[0] is not plan or \
            state[1][2].epoch != driver.DEVICE_EPOCH.value:
        state = config._cuda = (plan, plan.configure(config.grid, config.block, config.shared,
                                                     config.stream))
    # the next launch with arguments like these skips this function (Launch.__call__)
    config._fast = plan.fast_launcher(signature, state[1], args)
    plan.run(state[1], words)


def describe_args(values) -> tuple | None:
    """(key, words, starts) of `values` as one launch reads them (`starts[k]`: where value k's
    words begin), or None where one is a host array, which a launch copies in and out."""
    key: list = []
    words: list = []
    starts: list = []
    for value in values:
        starts.append(len(words))
        try:
            (_DESCRIBERS.get(type(value)) or _describer_for(type(value)))(value, key, words)
        except _HostArray:
            return None
    return key, words, starts


def _new_plan(kernel, key: tuple, args) -> LaunchPlan:
    """The plan for `args` on the current device (the kernel keeps the latest per key)."""
    device = driver.current_device()
    spec = kernel.specialization(tuple(param_of_arg(value) for value in args))
    if len(args) != len(spec.params):
        raise LaunchError(f"{kernel.__name__} takes {len(spec.params)} arguments, "
                          f"got {len(args)}")
    plan = plan_of(spec.compiled("cuda"), device)
    kernel._plans[key] = plan
    return plan


def plan_of(program, device) -> LaunchPlan:
    plan = program.plans.get(device)
    if plan is None:
        plan = program.plans[device] = LaunchPlan(program, device)
    return plan


def launch_program(program, grid, block, args, shared: int = 0, stream=None) -> None:
    """Launch a compiled program with checked arguments (the slow, general path:
    `Specialization.launch("cuda", ...)` and tests)."""
    for index, (value, param) in enumerate(zip(args, program.params)):
        given = param_of_arg(value)
        if not _accepts(param, given):
            raise LaunchError(f"{program.name}: argument {index} is {given}; the kernel was "
                              f"compiled for {param}")
    if len(args) != len(program.params):
        raise LaunchError(f"{program.name} takes {len(program.params)} arguments, "
                          f"got {len(args)}")
    copies = [to_device(value) if _copied(value) else value for value in args]
    _, words, _ = describe_args(copies)
    grid, block = _three(grid), _three(block)
    plan = plan_of(program, driver.current_device()).for_shape(grid, block)
    plan.run(plan.configure(grid, block, shared, stream), words)
    if any(copy is not value for copy, value in zip(copies, args)):   # NumPy arrays: back
        driver.synchronize()
        for value, copy in zip(args, copies):
            if copy is not value and value.flags.writeable:
                value[...] = copy.copy_to_host()


def _three(dims) -> tuple:
    """A grid or block given as an int or 1 to 3 ints, as three."""
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


def _overlap_pairs(params, private) -> tuple:
    """((first slot, ndim, itemsize) of one array, the same of another) for each pair of array
    arguments whose overlap breaks a `noalias` of `private` (PrivateArrays or None)."""
    if private is None:
        return ()
    where, slot = {}, 0
    for index, param in enumerate(params):
        if isinstance(param.type, Array):
            where[index] = (slot, param.type.ndim, param.type.dtype.nbytes)
        slot += len(slot_kinds([param]))
    return tuple((where[a], where[b]) for a, b in private.overlap_pairs(sorted(where)))


def _span(words: list, first: int, ndim: int, item: int) -> tuple[int, int]:
    """[low, high) bytes of the array whose pointer, extents and strides (in elements) start
    at `first`."""
    extents = words[first + 1:first + 1 + ndim]
    strides = words[first + 1 + ndim:first + 1 + 2 * ndim]
    return byte_span(words[first], extents, [s * item for s in strides], item)


def _overlap(pairs: tuple, words: list) -> bool:
    """Whether the arrays of one of `pairs` (see _overlap_pairs) share a byte."""
    for a, b in pairs:
        a_low, a_high = _span(words, *a)
        b_low, b_high = _span(words, *b)
        if a_low < a_high and b_low < b_high and a_low < b_high and b_low < a_high:
            return True
    return False


def _accepts(param, given) -> bool:
    """Can an argument typed `given` be passed where the kernel expects `param`?"""
    if param.kind == "weak":      # Python numbers arrive converted to the weak type
        return not isinstance(given.type, Array)
    if isinstance(param.type, Array) and isinstance(given.type, Array):
        expected, got = param.type, given.type
        return (expected.dtype, expected.ndim) == (got.dtype, got.ndim) and \
            (expected.layout == "A" or got.layout == "C") and (got.small or not expected.small)
    return param.key() == given.key()
