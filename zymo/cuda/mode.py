"""Where `zymo.cuda` keeps device arrays and runs kernels: on the GPU where CUDA is usable, else
in host memory with kernels on the CPU backend (the API works the same; `is_available()` says
which). ZYMO_BACKEND=cpu or interp, or ZYMO_DEBUG=1, keep everything on the host."""
from __future__ import annotations

import os

_on_gpu: list = []


def on_gpu() -> bool:
    """True when device arrays live on a GPU and kernels launch there (decided once)."""
    if not _on_gpu:
        from ..runtime.cuda import driver
        from ..runtime.kernel import debug_mode
        forced_host = os.environ.get("ZYMO_BACKEND", "") in ("cpu", "interp") or debug_mode()
        _on_gpu.append(not forced_host and driver.is_available())
    return _on_gpu[0]
