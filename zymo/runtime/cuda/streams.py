"""Streams and events, and the conversion of other libraries' streams (cuda.core, CuPy, PyTorch,
raw handles) into the CUstream a launch takes."""
from __future__ import annotations

from typing import Any

from ...diagnostics import LaunchError
from .driver import bindings, call, current_device, wait_for


class Stream:
    """A CUDA stream on the current device. `non_blocking=True` makes it run concurrently with
    the legacy default stream (where `zm.to_device`, CuPy and PyTorch work by default)."""

    def __init__(self, non_blocking: bool = False):
        drv = bindings()
        current_device()
        flags = drv.CUstream_flags.CU_STREAM_NON_BLOCKING if non_blocking else 0
        self.handle = call(drv.cuStreamCreate, int(flags), name="cuStreamCreate")

    def synchronize(self) -> None:
        drv = bindings()
        wait_for(drv.cuStreamQuery, self.handle, drv.cuStreamSynchronize, "cuStreamSynchronize")

    def wait(self, event: "Event") -> None:
        """Make later work on this stream wait for `event`."""
        call(bindings().cuStreamWaitEvent, self.handle, event.handle, 0,
             name="cuStreamWaitEvent")

    def __cuda_stream__(self) -> tuple[int, int]:
        """The stream protocol of cuda.core: (protocol version, handle)."""
        return (0, int(self.handle or 0))

    def __del__(self):
        handle, self.handle = getattr(self, "handle", None), None
        if handle is not None:
            try:
                bindings().cuStreamDestroy(handle)
            except Exception:  # interpreter shutdown: the driver may be gone already
                pass

    def __repr__(self) -> str:
        return f"<zymo Stream {int(self.handle or 0):#x}>"


class Event:
    """A CUDA event; `end.elapsed_ms(start)` times the work between two recorded events."""

    def __init__(self, timing: bool = True):
        drv = bindings()
        current_device()
        flags = 0 if timing else int(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        self.handle = call(drv.cuEventCreate, flags, name="cuEventCreate")

    def record(self, stream=None) -> "Event":
        call(bindings().cuEventRecord, self.handle, as_stream(stream), name="cuEventRecord")
        return self

    def synchronize(self) -> None:
        drv = bindings()
        wait_for(drv.cuEventQuery, self.handle, drv.cuEventSynchronize, "cuEventSynchronize")

    def elapsed_ms(self, start: "Event") -> float:
        """Milliseconds from `start` to this event (both recorded, this one completed)."""
        return call(bindings().cuEventElapsedTime, start.handle, self.handle,
                    name="cuEventElapsedTime")

    def __del__(self):
        handle, self.handle = getattr(self, "handle", None), None
        if handle is not None:
            try:
                bindings().cuEventDestroy(handle)
            except Exception:
                pass


_DEFAULT = None


def as_stream(stream):
    """The CUstream of `stream`: None or 0 (the legacy default stream), a zymo Stream, any
    object with the `__cuda_stream__` protocol (cuda.core), a CuPy (`.ptr`) or PyTorch
    (`.cuda_stream`) stream, a CUstream, or a raw handle as an int."""
    global _DEFAULT
    drv = bindings()
    if stream is None or (isinstance(stream, int) and stream == 0):
        if _DEFAULT is None:
            _DEFAULT = drv.CUstream(0)
        return _DEFAULT
    if isinstance(stream, Stream):
        return stream.handle
    if isinstance(stream, drv.CUstream):
        return stream
    if isinstance(stream, int):
        return drv.CUstream(stream)
    protocol: Any = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        version_and_handle: Any = protocol() if callable(protocol) else protocol
        return drv.CUstream(int(version_and_handle[1]))
    for attribute in ("ptr", "cuda_stream", "handle"):   # CuPy, PyTorch, others
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int):
            return drv.CUstream(handle)
    raise LaunchError(f"cannot use a {type(stream).__name__} as a CUDA stream: pass a "
                      f"zm.Stream, a cuda.core, CuPy or PyTorch stream, or a handle (int)")
