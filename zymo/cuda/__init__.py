"""numba.cuda's API on zymo: `from zymo import cuda` in place of `from numba import cuda`.

Kernels (`@cuda.jit`) are zymo kernels; the kernel language (`cuda.grid`, `cuda.threadIdx`,
`cuda.shared.array`, `cuda.atomic.add`, ...) is zymo's (`zymo.lang`), reached here by the same
names; numba's type names (`float32`, `int32[:, ::1]`, `void(...)`) stand for zymo's types; the
host API (device arrays, streams, events, devices) runs on the GPU where CUDA is usable and, on
a machine without one, in host memory with kernels on zymo's CPU backend.
"""
from .. import lang as _lang
from ..lang import *  # noqa: F401,F403  (the kernel language: grid, threadIdx, shared, ...)
from . import types  # noqa: F401
from .core import config, errors  # noqa: F401  (numba's config flags and error classes)
from . import np  # noqa: F401  (numba.np.numpy_support)
from .cudadrv import devicearray as _devicearray
from .cudadrv import devicearray  # noqa: F401  (numba's cuda.devicearray module)
from .cudadrv.devicearray import (  # noqa: F401
    DeviceNDArray, HostDeviceNDArray, ManagedNDArray, as_cuda_array, device_array,
    device_array_like, from_cuda_array_interface, is_cuda_array, is_device_array, managed_array,
    mapped, mapped_array, mapped_array_like, pinned, pinned_array, pinned_array_like,
    to_device,
)
from .cudadrv.devices import (  # noqa: F401
    close, current_context, detect, get_context, get_current_device, gpus, list_devices,
    select_device, synchronize,
)
from .cudadrv.driver import (  # noqa: F401
    CudaAPIError, CudaDriverError, CudaSupportError, Event, LinkerError, Stream, TypingError,
    default_stream, event, event_elapsed_time, external_stream, legacy_default_stream,
    per_thread_default_stream, stream,
)
from .dispatcher import DeviceDispatcher, Dispatcher, jit  # noqa: F401
from .foreign import CUSource, declare_device  # noqa: F401
from .args import In, InOut, Out  # noqa: F401
from . import compiler  # noqa: F401
from .compiler import (  # noqa: F401
    compile, compile_for_current_device, compile_ptx, compile_ptx_for_current_device,
)
from . import random  # noqa: F401,E402  (numba's cuda.random: xoroshiro128+ streams)
from . import libdevice  # noqa: F401,E402  (libdevice's functions by their names)
from .reduction import Reduce, reduce  # noqa: F401
from . import vectorize as _vectorizers
from .types import (  # noqa: F401
    b1, bool_, boolean, byte, c8, c16, complex64, complex128, double, f2, f4, f8, float16,
    float32, float64, float_, from_dtype, half, i1, i2, i4, i8, int8, int16, int32, int64,
    int_, intp, none, single, u1, u2, u4, u8, uint8, uint16, uint32, uint64, uintp, void,
)
from .vector_types import user_facing_names as _vector_type_names
from .mode import on_gpu as _on_gpu
from .execsource import install as _install_exec_source
from .core.errors import NumbaPerformanceWarning  # noqa: F401

_install_exec_source()
globals().update(_vector_type_names())   # cuda.float32x4, cuda.float4, cuda.int2, ...

HAS_NUMBA = False   # numba is not what runs here: numba tests skip their numba-only parts


def is_available() -> bool:
    """Whether kernels and device arrays are on a CUDA GPU; False on a machine without one
    (or with ZYMO_BACKEND=cpu), where the API works the same on the CPU backend."""
    return _on_gpu()


def is_supported_version() -> bool:
    return True


def profile_start() -> None:
    """Start the CUDA profiler's collection (nothing to do without a GPU)."""
    if _on_gpu():
        from ..runtime.cuda import driver
        driver.call(driver.bindings().cuProfilerStart, name="cuProfilerStart")


def profile_stop() -> None:
    if _on_gpu():
        from ..runtime.cuda import driver
        driver.call(driver.bindings().cuProfilerStop, name="cuProfilerStop")


class profiling:
    """`with cuda.profiling():` collects a profile for the block."""

    def __enter__(self):
        profile_start()

    def __exit__(self, *exc):
        profile_stop()


def __getattr__(name):
    # the kernel language's names as zymo.lang grows them (numba's `cuda.X` is zymo's `zm.X`)
    if not name.startswith("__"):
        try:
            return getattr(_lang, name)
        except AttributeError:
            pass
    raise AttributeError(f"module 'zymo.cuda' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(dir(_lang)))


del _devicearray


def vectorize(signatures=(), target: str = "cuda", **options):
    """numba's `cuda.vectorize`: `@vectorize` for the GPU (target "cuda"; device arrays where
    there is no GPU); `zymo.vectorize` is numba's, for the CPU by default."""
    return _vectorizers.vectorize(signatures, target=target, **options)


def guvectorize(signatures, layout: str, target: str = "cuda", **options):
    """numba's `cuda.guvectorize`: `@guvectorize` for the GPU (see vectorize)."""
    return _vectorizers.guvectorize(signatures, layout, target=target, **options)
