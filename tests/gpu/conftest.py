"""GPU tests: marked `gpu`; skipped where cuda-bindings, the driver or a device is missing."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _why_no_gpu() -> str | None:
    try:
        import cuda.bindings  # noqa: F401
    except ImportError:
        try:
            from cuda import cuda  # noqa: F401  (cuda-python before 12.6)
        except ImportError:
            return "cuda-bindings is not installed"
    from zymo.runtime.cuda import driver
    try:
        return None if driver.device_count() > 0 else "no CUDA device"
    except driver.CudaError as error:
        return str(error)


WHY_NO_GPU = _why_no_gpu()


def pytest_collection_modifyitems(config, items):
    if WHY_NO_GPU is None:
        return
    skip = pytest.mark.skip(reason=f"no GPU: {WHY_NO_GPU}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def device():
    from zymo.runtime.cuda import driver
    return driver.current_device()


@pytest.fixture(scope="module")
def cuda():
    """zymo.cuda, with its arrays and kernels on the GPU (skipped where it runs on the host)."""
    from zymo import cuda
    if not cuda.is_available():
        pytest.skip("zymo.cuda is on the host (ZYMO_BACKEND or no GPU)")
    return cuda
