"""The CUDA driver through cuda-bindings, imported on first use: initialization, devices and their
primary contexts, error checking, module loading (PTX -> cubin with nvJitLink where present, else
the driver's JIT), and the PTX ISA version the installed driver accepts.

zymo imports without cuda-bindings; only the first call that needs the GPU imports it.
"""
from __future__ import annotations

import ctypes
import importlib
import os
import re
import threading
import time
from contextlib import contextmanager
from typing import Any

from ...diagnostics import InternalError, KernelRuntimeError, LaunchError

_driver = None
_lock = threading.Lock()
_devices: dict[int, "Device"] = {}
_current: "Device | None" = None
# incremented whenever `_current` changes: a launch configuration validated under another epoch
# may name another device's function, so the compiled launchers (native.py) decline it
DEVICE_EPOCH = ctypes.c_int64(0)


class CudaError(KernelRuntimeError):
    """A CUDA driver call failed: the message names the call (and the launch, for launches)."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code

    def __reduce__(self):
        return (type(self), (self.args[0], self.code))


class CudaUnavailable(CudaError):
    """No usable CUDA: cuda-bindings, the NVIDIA driver or a device is missing."""


def bindings():
    """The `cuda.bindings.driver` module (older cuda-python names it `cuda.cuda`)."""
    global _driver
    if _driver is None:
        try:
            driver = importlib.import_module("cuda.bindings.driver")
        except ImportError:
            try:
                driver = importlib.import_module("cuda.cuda")  # cuda-python before 12.6
            except ImportError:
                raise CudaUnavailable("the CUDA backend needs cuda-bindings: pip install "
                                      "\"zymo[cuda]\" (CUDA 12 wheels; \"zymo[cuda13]\" for "
                                      "CUDA 13 drivers)") from None
        _driver = driver
    return _driver


def error_text(code) -> str:
    """`CUDA_ERROR_X: description` for a CUresult."""
    drv = bindings()
    name = drv.cuGetErrorName(code)
    text = drv.cuGetErrorString(code)
    name = name[1].decode() if not name[0] else f"CUresult {int(code)}"
    return f"{name}: {text[1].decode()}" if not text[0] else name


# errors raised by a later call for an earlier kernel's fault: say where to look
_STICKY = {700, 714, 715, 716, 718, 719}
_STICKY_HINT = ("\nhint: a kernel launched earlier failed (asynchronously) and the context is "
                "unusable now; rerun the launch on the \"interp\" backend (kernel.on(\"interp\")) "
                "or with boundscheck=True to find the faulting access")


def check(result, call: str) -> Any:
    """The value(s) of a cuda-bindings call's `(CUresult, *values)`, or CudaError naming `call`."""
    code = result[0]
    if code:
        hint = _STICKY_HINT if int(code) in _STICKY else ""
        raise CudaError(f"{call} failed: {error_text(code)}{hint}", int(code))
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


INVALID_CONTEXT = 201


def call(fn, *args, name: str | None = None) -> Any:
    """Call a driver function that needs a current context; a thread that never used zymo has
    none, so on CUDA_ERROR_INVALID_CONTEXT make the device's context current and retry once."""
    result = fn(*args)
    if result[0] == INVALID_CONTEXT:
        current_device().make_current()
        result = fn(*args)
    return check(result, name or fn.__name__)


def _init():
    drv = bindings()
    try:
        result = drv.cuInit(0)
    except Exception as error:  # the driver library itself is missing (cuda-pathfinder raises)
        raise CudaUnavailable(f"the NVIDIA driver library could not be loaded: {error}") from None
    if result[0]:
        raise CudaUnavailable(f"cuInit failed: {error_text(result[0])}", int(result[0]))
    return drv



_launch_addresses: dict[bool, int] = {}


def launch_kernel_address(cooperative: bool = False) -> int | None:
    """The address of the driver's cuLaunchKernel, or cuLaunchCooperativeKernel (the same
    arguments but the last, which the launchers pass as NULL and the C convention lets it
    ignore); the per-thread-default-stream variant when cuda-bindings uses that stream, as
    CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM=1 asks. For the compiled launchers; None where
    the driver library cannot be opened by name."""
    address = _launch_addresses.get(cooperative)
    if address is None:
        import sys
        per_thread = os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0") != "0"
        name = "cuLaunchCooperativeKernel" if cooperative else "cuLaunchKernel"
        name += "_ptsz" if per_thread else ""
        try:
            library = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
            address = ctypes.cast(getattr(library, name), ctypes.c_void_p).value or 0
        except (OSError, AttributeError):
            address = 0
        _launch_addresses[cooperative] = address
    return address or None


def max_resident_blocks(function, device, threads: int, shared: int) -> int:
    """How many blocks of `threads` threads and `shared` bytes of dynamic shared memory the
    device holds at once (what a cooperative launch may have)."""
    per_sm = check(bindings().cuOccupancyMaxActiveBlocksPerMultiprocessor(
        function, threads, shared), "cuOccupancyMaxActiveBlocksPerMultiprocessor")
    return int(per_sm) * device.attribute("MULTIPROCESSOR_COUNT")

def device_count() -> int:
    return check(_init().cuDeviceGetCount(), "cuDeviceGetCount")


def is_available() -> bool:
    """True when cuda-bindings, the driver and at least one device are present; never raises."""
    try:
        return device_count() > 0
    except CudaError:
        return False


def driver_version() -> tuple[int, int]:
    """The CUDA version the installed driver supports, e.g. (13, 0)."""
    version = check(_init().cuDriverGetVersion(), "cuDriverGetVersion")
    return version // 1000, version % 1000 // 10


class Device:
    """One GPU and its primary context (the one the CUDA runtime, CuPy and PyTorch also use, so
    pointers from those libraries are valid in it)."""

    def __init__(self, ordinal: int):
        drv = _init()
        count = device_count()
        if not 0 <= ordinal < count:
            raise CudaUnavailable(f"no CUDA device {ordinal}: {count} device(s) present")
        self.ordinal = ordinal
        self.handle = check(drv.cuDeviceGet(ordinal), "cuDeviceGet")
        self.context = check(drv.cuDevicePrimaryCtxRetain(self.handle), "cuDevicePrimaryCtxRetain")
        self.make_current()
        self._attributes: dict[str, int] = {}
        self.compute_capability = (self.attribute("COMPUTE_CAPABILITY_MAJOR"),
                                   self.attribute("COMPUTE_CAPABILITY_MINOR"))
        self.arch = "sm_%d%d" % self.compute_capability
        raw = check(drv.cuDeviceGetName(256, self.handle), "cuDeviceGetName")
        self.name = bytes(raw).split(b"\0", 1)[0].decode()

    def make_current(self) -> None:
        check(bindings().cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def attribute(self, name: str) -> int:
        """A CU_DEVICE_ATTRIBUTE_<name> value, cached (they never change)."""
        value = self._attributes.get(name)
        if value is None:
            drv = bindings()
            attr = getattr(drv.CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + name)
            value = check(drv.cuDeviceGetAttribute(attr, self.handle), "cuDeviceGetAttribute")
            self._attributes[name] = value
        return value

    def synchronize(self) -> None:
        if getattr(_limit, "at", None) is None:
            call(bindings().cuCtxSynchronize, name="cuCtxSynchronize")
            return
        # under a time limit: wait for the legacy default stream, which every blocking stream
        # joins, through an event that can be polled
        drv = bindings()
        event = call(drv.cuEventCreate, int(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING),
                     name="cuEventCreate")
        try:
            call(drv.cuEventRecord, event, 0, name="cuEventRecord")
            wait_for(drv.cuEventQuery, event, drv.cuEventSynchronize, "cuEventSynchronize")
        finally:
            drv.cuEventDestroy(event)

    def __repr__(self) -> str:
        return f"<CUDA device {self.ordinal}: {self.name}, {self.arch}>"


def get_device(ordinal: int) -> Device:
    with _lock:
        device = _devices.get(ordinal)
        if device is None:
            device = _devices[ordinal] = Device(ordinal)
        return device


def current_device() -> Device:
    """The device zymo allocates and launches on: `use_device(n)`, else $ZYMO_DEVICE, else 0."""
    device = _current
    return device if device is not None else use_device(int(os.environ.get("ZYMO_DEVICE", "0")))


def use_device(ordinal: int) -> Device:
    """Make device `ordinal` the one zymo allocates and launches on (in every thread)."""
    global _current
    device = get_device(ordinal)
    device.make_current()
    if device is not _current:
        _current = device
        DEVICE_EPOCH.value += 1
    return device


def synchronize() -> None:
    """Wait for all work on the current device."""
    current_device().synchronize()


# ---- waiting under a time limit ---------------------------------------------------------------
class KernelTimeout(CudaError):
    """The GPU did not finish within `time_limit`. The work goes on running: the context is
    only good for being abandoned (the evolutionary search replaces the worker process)."""


_limit = threading.local()
_NOT_READY = 600   # CUDA_ERROR_NOT_READY
# set once a wait has timed out: the process's GPU work may never end, so freeing memory (which
# waits for it) is skipped; the process is expected to be replaced
ABANDONED = False


@contextmanager
def time_limit(seconds: float):
    """Within it (in this thread), every wait for the GPU (`synchronize`, events, streams,
    bounds-checked launches) raises KernelTimeout once `seconds` have passed since entry,
    instead of blocking forever on a kernel that never ends."""
    before = getattr(_limit, "at", None)
    at = time.monotonic() + seconds
    _limit.at = at if before is None else min(before, at)
    try:
        yield
    finally:
        _limit.at = before


def wait_for(query, handle, synchronize, name: str) -> None:
    """`synchronize(handle)`, or under a time limit, `query(handle)` polled until it is no
    longer CUDA_ERROR_NOT_READY."""
    global ABANDONED
    at = getattr(_limit, "at", None)
    if at is None:
        call(synchronize, handle, name=name)
        return
    pause = 2e-5
    while True:
        result = query(handle)
        if result[0] == INVALID_CONTEXT:   # a thread that never used zymo
            current_device().make_current()
            continue
        if int(result[0]) != _NOT_READY:
            check(result, name)
            return
        if time.monotonic() > at:
            ABANDONED = True
            raise KernelTimeout(f"{name}: the GPU was still busy when the time limit ran out")
        time.sleep(pause)
        pause = min(2 * pause, 1e-3)


# ---- PTX ISA versions -----------------------------------------------------------------------
# The newest PTX ISA each CUDA release accepts (from the PTX ISA release notes). A driver
# rejects PTX whose `.version` is newer than it knows, even when nothing in it needs the newer
# ISA; LLVM writes the version it defaults to, so the line is lowered to what the driver takes.
_PTX_ISA = {
    (11, 0): (7, 0), (11, 1): (7, 1), (11, 2): (7, 2), (11, 3): (7, 3), (11, 4): (7, 4),
    (11, 5): (7, 5), (11, 6): (7, 6), (11, 7): (7, 7), (11, 8): (7, 8), (12, 0): (8, 0),
    (12, 1): (8, 1), (12, 2): (8, 2), (12, 3): (8, 3), (12, 4): (8, 4), (12, 5): (8, 5),
    (12, 6): (8, 5), (12, 8): (8, 7), (12, 9): (8, 8), (13, 0): (9, 0), (13, 1): (9, 1),
}
_VERSION_LINE = re.compile(r"^(\s*\.version\s+)(\d+)\.(\d+)", re.MULTILINE)


def max_ptx_isa(cuda_version: tuple[int, int]) -> tuple[int, int]:
    """The newest PTX ISA that CUDA `cuda_version` accepts (a newer, unknown CUDA gets the
    newest one known here, which it accepts too)."""
    known = [release for release in _PTX_ISA if release <= cuda_version]
    return _PTX_ISA[max(known)] if known else (6, 0)


def cap_ptx_version(ptx: str, limit: tuple[int, int]) -> str:
    """`ptx` with its `.version` lowered to `limit` where it is newer."""
    match = _VERSION_LINE.search(ptx)
    if match is None or (int(match.group(2)), int(match.group(3))) <= limit:
        return ptx
    return _VERSION_LINE.sub(lambda m: f"{m.group(1)}{limit[0]}.{limit[1]}", ptx, count=1)


# ---- PTX -> cubin ---------------------------------------------------------------------------
_nvjitlink: object | None = None
_nvjitlink_version: tuple[int, int] | None = None


def nvjitlink_version() -> tuple[int, int] | None:
    """nvJitLink's (major, minor), or None when it is not installed."""
    global _nvjitlink, _nvjitlink_version
    if _nvjitlink is None:
        _nvjitlink = False
        if os.environ.get("ZYMO_NVJITLINK", "1") != "0":
            try:
                nvjitlink = importlib.import_module("cuda.bindings.nvjitlink")
                _nvjitlink_version = tuple(nvjitlink.version())  # type: ignore[assignment]
                _nvjitlink = nvjitlink
            except Exception:  # not installed, or its shared library is missing
                _nvjitlink = False
    return _nvjitlink_version


def link_ptx(ptx: str, arch: str, inputs: list[tuple[str, bytes, str]] = ()) -> bytes:
    """A cubin for `arch` from `ptx` and further `inputs` ((kind, data, name): kind "ptx",
    "cubin", "fatbin", "object", "library" or "ltoir"), through nvJitLink (which must be
    present)."""
    version = nvjitlink_version()
    assert version is not None and _nvjitlink
    nvjitlink = _nvjitlink
    data = cap_ptx_version(ptx, max_ptx_isa(version)).encode()
    options = [f"-arch={arch}"]
    handle = nvjitlink.create(len(options), options)  # type: ignore[attr-defined]
    try:
        kinds = nvjitlink.InputType  # type: ignore[attr-defined]
        ptx_kind = getattr(kinds, "PTX", None) or getattr(kinds, "NVJITLINK_INPUT_PTX")
        nvjitlink.add_data(handle, ptx_kind, data, len(data), "zymo.ptx")  # type: ignore
        for kind, content, name in inputs:
            if kind == "ptx":
                content = cap_ptx_version(content.decode(), max_ptx_isa(version)).encode()
            kind_name = kind.upper()
            input_kind = getattr(kinds, kind_name, None) or \
                getattr(kinds, "NVJITLINK_INPUT_" + kind_name)
            nvjitlink.add_data(handle, input_kind, content, len(content), name)  # type: ignore
        nvjitlink.complete(handle)  # type: ignore[attr-defined]
        size = nvjitlink.get_linked_cubin_size(handle)  # type: ignore[attr-defined]
        cubin = bytearray(size)
        nvjitlink.get_linked_cubin(handle, cubin)  # type: ignore[attr-defined]
        return bytes(cubin)
    except nvjitlink.nvJitLinkError as error:  # type: ignore[attr-defined]
        size = nvjitlink.get_error_log_size(handle)  # type: ignore[attr-defined]
        log = bytearray(size)
        nvjitlink.get_error_log(handle, log)  # type: ignore[attr-defined]
        text = f"nvJitLink could not link the program for {arch} ({error}):\n" \
            f"{log.decode(errors='replace').strip()}"
        if inputs:   # foreign code the user gave: an error of theirs, not zymo's
            raise LaunchError(text + "\nhint: check the declarations (cuda.declare_device) "
                              "against the linked sources") from None
        raise InternalError(text) from None
    finally:
        nvjitlink.destroy(handle)  # type: ignore[attr-defined]


def load_module(device: Device, image: bytes | str):
    """A CUmodule from a cubin (bytes) or PTX (str, JIT-compiled by the driver) in `device`'s
    context."""
    if isinstance(image, str):
        image = cap_ptx_version(image, max_ptx_isa(driver_version())).encode() + b"\0"
    device.make_current()
    return check(bindings().cuModuleLoadData(image), "cuModuleLoadData")


def get_function(module, name: str):
    return check(bindings().cuModuleGetFunction(module, name.encode()), "cuModuleGetFunction")


def function_attribute(function, name: str) -> int:
    drv = bindings()
    attr = getattr(drv.CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + name)
    return check(drv.cuFuncGetAttribute(attr, function), "cuFuncGetAttribute")


def set_function_attribute(function, name: str, value: int) -> None:
    drv = bindings()
    attr = getattr(drv.CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + name)
    check(drv.cuFuncSetAttribute(function, attr, value), "cuFuncSetAttribute")
