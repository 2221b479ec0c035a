"""numba's transfer hints for host arrays given to a kernel: `cuda.In(a)` (copied to the
device, not back), `cuda.Out(a)` (copied back, not in), `cuda.InOut(a)` (both, what a bare
NumPy array gets), and `wrap_arg`, which launch extensions use to choose one."""
from __future__ import annotations

import numpy as np

from . import mode


class ArgHint:
    copy_in = copy_out = True

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"

    def to_device(self, retrieve: list):
        """What the launch passes; appends to `retrieve` what brings results back after it."""
        host = self.value
        if type(host) is not np.ndarray:
            return host                         # device arrays are where kernels read them
        if not mode.on_gpu() or host.dtype.names is not None:
            # host memory is the device's (records: the launch copies NumPy arrays in and
            # back); a copy keeps an In array from the kernel's writes
            return host if self.copy_out else host.copy()
        from .cudadrv.devicearray import device_array_like, to_device
        device = to_device(host) if self.copy_in else device_array_like(host)
        if self.copy_out:
            retrieve.append(lambda: device.copy_to_host(host))
        return device


class In(ArgHint):
    copy_out = False


class Out(ArgHint):
    copy_in = False


class InOut(ArgHint):
    pass


def wrap_arg(value, default=InOut):
    """`value` with a transfer hint: its own, or `default`."""
    return value if isinstance(value, ArgHint) else default(value)
