"""numba's driver-level names that users catch or call: errors, and the streams and events
(`cuda.stream()`, `cuda.event()`), on the GPU through zymo's runtime and, without one, as
host objects with the same methods (work on the CPU backend is done when a launch returns)."""
from __future__ import annotations

import contextlib
import itertools
import time

from ...diagnostics import CompileError
from ...runtime.cuda.driver import CudaError, CudaUnavailable
from .. import mode

CudaAPIError = CudaError            # a driver call failed (`.code` is the CUresult)
CudaDriverError = CudaError
CudaSupportError = CudaUnavailable  # no usable CUDA
TypingError = CompileError          # numba's TypingError: zymo's compile error, at file:line
LinkerError = CudaError


def _have_nvjitlink() -> bool:
    """Whether NVIDIA's nvJitLink is importable (cuda.bindings.nvjitlink); zymo links no
    LTO-IR with it, numba's tests ask."""
    try:
        from cuda.bindings import nvjitlink  # noqa: F401
    except ImportError:
        return False
    return True


class Driver:
    """numba's `driver`: the CUDA driver API by name (`driver.cuMemGetInfo()`), each call
    returning its values without the status and raising CudaAPIError for a failed one (what
    zymo's runtime calls go through). Attributes set on it (a test's mock) replace a name."""

    def __getattr__(self, name: str):
        if not name.startswith("cu"):
            raise AttributeError(name)
        from ...runtime.cuda import driver as zdriver
        function = getattr(zdriver.bindings(), name)
        return lambda *args: zdriver.call(function, *args, name=name)

    def get_device_count(self) -> int:
        from ...runtime.cuda import driver as zdriver
        return zdriver.device_count() if mode.on_gpu() else 0

    @property
    def is_available(self) -> bool:
        return mode.on_gpu()


driver = Driver()


# ---- streams ----------------------------------------------------------------------------------
class Stream:
    """numba's Stream: `synchronize()`, `auto_synchronize()`, usable as `kernel[g, b, stream]`.
    `handle` is the CUstream on a GPU; on the host, 0 for the default stream and a number
    naming the stream for others."""

    def __init__(self, handle=None, owner=None, external: bool = False):
        self._owner, self._handle, self.external = owner, handle, external

    @property
    def handle(self):
        """The CUstream (of the zymo stream this one is, where it is one), or the number."""
        return self._owner.handle if self._owner is not None else self._handle

    def synchronize(self) -> None:
        if self._owner is not None:
            self._owner.synchronize()
        elif self._handle is not None and mode.on_gpu():
            from ...runtime.cuda.driver import bindings, wait_for
            from ...runtime.cuda.streams import as_stream
            drv = bindings()
            wait_for(drv.cuStreamQuery, as_stream(self._handle), drv.cuStreamSynchronize,
                     "cuStreamSynchronize")

    @contextlib.contextmanager
    def auto_synchronize(self):
        """Synchronizes the stream when the block ends."""
        yield self
        self.synchronize()

    def __cuda_stream__(self):
        return (0, int(self))

    def __int__(self) -> int:
        if self._owner is not None:
            return int(self._owner.__cuda_stream__()[1])
        return int(self._handle or 0)

    def __bool__(self) -> bool:
        return True    # numba: a stream object is a stream, even the default one (handle 0)

    def add_callback(self, callback, arg=None):
        """Calls `callback(stream, None, arg)` once the work queued so far is done."""
        self.synchronize()
        callback(self, None, arg)

    def async_done(self):
        import asyncio
        future = asyncio.get_event_loop().create_future()
        self.synchronize()
        future.set_result(None)
        return future

    def __repr__(self) -> str:
        return f"<zymo.cuda Stream {int(self):#x}>"


# handles of host streams: distinct and not 0, 1 or 2 (the CUDA array interface reads those as
# the default streams), so that arrays on a host stream name it in their interface
_host_stream_handles = itertools.count(0x1000)


def stream() -> Stream:
    """A new stream (on the host: work is synchronous, the stream is a name for it)."""
    if mode.on_gpu():
        from ...runtime.cuda.streams import Stream as GpuStream
        return Stream(owner=GpuStream())
    return Stream(next(_host_stream_handles))


def default_stream() -> Stream:
    return Stream(0)


def legacy_default_stream() -> Stream:
    return Stream(1 if mode.on_gpu() else 0)


def per_thread_default_stream() -> Stream:
    return Stream(2 if mode.on_gpu() else 0)


def external_stream(ptr: int) -> Stream:
    """A stream made elsewhere (its CUstream as an int)."""
    return Stream(int(ptr), external=True)


# ---- events -----------------------------------------------------------------------------------
class Event:
    """numba's Event: `record(stream)`, `synchronize()`, `wait(stream)`, `query()`,
    `elapsed_time(end)` in milliseconds."""

    def __init__(self, timing: bool = True):
        self.timing = timing
        self._gpu = None
        self._at = None
        if mode.on_gpu():
            from ...runtime.cuda.streams import Event as GpuEvent
            self._gpu = GpuEvent(timing=timing)

    def record(self, stream=0) -> "Event":
        if self._gpu is not None:
            self._gpu.record(_stream_arg(stream))
        else:
            self._at = time.perf_counter()
        return self

    def synchronize(self) -> None:
        if self._gpu is not None:
            self._gpu.synchronize()

    def query(self) -> bool:
        if self._gpu is None:
            return True
        from ...runtime.cuda.driver import bindings
        return not bindings().cuEventQuery(self._gpu.handle)[0]

    def wait(self, stream=0) -> None:
        if self._gpu is not None:
            from ...runtime.cuda.driver import bindings, call
            from ...runtime.cuda.streams import as_stream
            call(bindings().cuStreamWaitEvent, as_stream(_stream_arg(stream)), self._gpu.handle,
                 0, name="cuStreamWaitEvent")

    def elapsed_time(self, evtend: "Event") -> float:
        return event_elapsed_time(self, evtend)


def _stream_arg(stream):
    return None if stream in (0, None) else stream


def event(timing: bool = True) -> Event:
    return Event(timing)


def event_elapsed_time(evtstart: Event, evtend: Event) -> float:
    """Milliseconds between two recorded events."""
    if not (evtstart.timing and evtend.timing):
        raise RuntimeError("elapsed_time needs events made with timing=True")
    if evtstart._gpu is not None:
        return float(evtend._gpu.elapsed_ms(evtstart._gpu))
    if evtstart._at is None or evtend._at is None:
        raise RuntimeError("elapsed_time needs both events recorded")
    return (evtend._at - evtstart._at) * 1000.0
