"""Devices as numba presents them: `get_current_device()`, `select_device(n)`, `gpus`,
`list_devices()`, `detect()`. Without a GPU there is one device, the host, running kernels on
zymo's CPU backend (its compute capability is that of the PTX zymo targets by default, so
`skip_unless_cc_*` do not skip what the CPU backend runs)."""
from __future__ import annotations

import contextlib
import os

from .. import mode


class Device:
    """numba's Device: `id`, `name`, `compute_capability`, attributes in capitals."""

    def __init__(self, ordinal: int = 0):
        self.id = ordinal
        if mode.on_gpu():
            from ...runtime.cuda import driver
            self._device = driver.get_device(ordinal)
            self.name = self._device.name
            self.compute_capability = self._device.compute_capability
        else:
            from ...backend.nvptx.machine import DEFAULT_ARCH
            self._device = None
            self.name = "zymo CPU backend (no CUDA GPU)"
            self.compute_capability = (int(DEFAULT_ARCH[3:-1]), int(DEFAULT_ARCH[-1]))

    @property
    def uuid(self) -> str:
        return f"GPU-zymo-{self.id}"

    def __getattr__(self, name):
        # numba's attribute names: device.MAX_THREADS_PER_BLOCK, device.MULTIPROCESSOR_COUNT
        if name.isupper() and self.__dict__.get("_device") is not None:
            try:
                return self._device.attribute(name)
            except AttributeError:
                pass
        if name.isupper():
            host = _HOST_ATTRIBUTES.get(name)
            if host is not None and self.__dict__.get("_device") is None:
                return host
        raise AttributeError(f"Device has no attribute {name!r}")

    def reset(self) -> None:
        synchronize()

    def __enter__(self):
        self._previous = get_current_device().id
        select_device(self.id)
        return self

    def __exit__(self, *exc):
        select_device(self._previous)

    def __eq__(self, other) -> bool:
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"<CUDA device {self.id} '{self.name}'>"


_HOST_ATTRIBUTES = {"MAX_THREADS_PER_BLOCK": 1024, "MAX_BLOCK_DIM_X": 1024,
                    "MAX_BLOCK_DIM_Y": 1024, "MAX_BLOCK_DIM_Z": 64, "MAX_GRID_DIM_X": 2**31 - 1,
                    "MAX_GRID_DIM_Y": 65535, "MAX_GRID_DIM_Z": 65535, "WARP_SIZE": 32,
                    "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
                    "MULTIPROCESSOR_COUNT": os.cpu_count() or 1}


def _count() -> int:
    if not mode.on_gpu():
        return 1
    from ...runtime.cuda import driver
    return driver.device_count()


_selected: list = []


def get_current_device() -> Device:
    if mode.on_gpu():
        from ...runtime.cuda import driver
        return Device(driver.current_device().ordinal)
    return Device(0)


def select_device(device_id: int) -> Device:
    """Make device `device_id` the one arrays are allocated and kernels launched on."""
    if not 0 <= device_id < _count():
        raise ValueError(f"no CUDA device {device_id}: {_count()} device(s)")
    if mode.on_gpu():
        from ...runtime.cuda import driver
        driver.use_device(device_id)
    return Device(device_id)


def synchronize() -> None:
    """Wait for all work on the current device (on the host, launches return when done)."""
    if mode.on_gpu():
        from ...runtime.cuda import driver
        driver.synchronize()


def close() -> None:
    """numba releases the context; zymo keeps the primary context (CuPy and PyTorch share it)
    and waits for the work queued on it."""
    synchronize()


class _Gpus:
    """`cuda.gpus`: the devices, indexable, iterable, and `with cuda.gpus[1]:` selects one."""

    def __getitem__(self, index: int) -> Device:
        if not -_count() <= index < _count():
            raise IndexError(f"no CUDA device {index}")
        return Device(index % _count())

    def __len__(self) -> int:
        return _count()

    def __iter__(self):
        return (Device(k) for k in range(_count()))

    @property
    def current(self) -> Device:
        return get_current_device()

    @contextlib.contextmanager
    def _select(self, index):
        with self[index] as device:
            yield device


gpus = _Gpus()


def list_devices() -> list:
    return list(gpus)


def detect() -> bool:
    """Print the devices found and return whether there is a supported one (with no GPU: the
    CPU backend, and False)."""
    print(f"Found {_count() if mode.on_gpu() else 0} CUDA devices")
    if not mode.on_gpu():
        print("zymo.cuda: no CUDA GPU; kernels run on zymo's CPU backend")
        return False
    for device in gpus:
        cc = "%d.%d" % device.compute_capability
        print(f"id {device.id:<5} {device.name!r:>30}  [SUPPORTED]\n"
              f"{'compute capability: ' + cc:>40}")
    print("Summary:\n\t%d/%d devices are supported" % (_count(), _count()))
    return True


class Context:
    """numba's context: memory info and synchronization of the current device."""

    def __init__(self, device: Device):
        self.device = device

    def get_memory_info(self):
        if mode.on_gpu():
            from ...runtime.cuda import driver
            free, total = driver.call(driver.bindings().cuMemGetInfo, name="cuMemGetInfo")
            return _MemoryInfo(int(free), int(total))
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return _MemoryInfo(free, pages)

    def synchronize(self) -> None:
        synchronize()

    def reset(self) -> None:
        synchronize()


class _MemoryInfo(tuple):
    def __new__(cls, free, total):
        return super().__new__(cls, (free, total))

    free = property(lambda self: self[0])
    total = property(lambda self: self[1])


def current_context() -> Context:
    return Context(get_current_device())


get_context = current_context
