"""The CUDA runtime on cuda-bindings: driver and devices, GPU arrays and interop, launch plans,
and caches of compiled code. Importing it needs no GPU and no cuda-bindings; the first call that
touches the GPU imports them."""
from .arrays import DeviceArray, device_array, is_gpu_array, to_device  # noqa: F401
from .driver import (  # noqa: F401
    CudaError, CudaUnavailable, KernelTimeout, current_device, is_available, synchronize,
    time_limit, use_device,
)
from .streams import Event, Stream  # noqa: F401
