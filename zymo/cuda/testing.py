"""numba's `cuda.testing` helpers for tests written against numba.cuda, keyed to zymo's facts:
zymo has no simulator (without a GPU kernels are compiled for the CPU), the compute capability
is the device's (or, without one, that of the PTX zymo targets), cooperative grids and the
device runtime need nothing extra."""
from __future__ import annotations

import platform
import shutil
import unittest
from pathlib import Path

import numpy as np

from . import mode
from .core import config
from .cudadrv.devices import get_current_device
from .cudadrv.driver import _have_nvjitlink
from .tests.support import TestCase

ENABLE_CUDASIM = config.ENABLE_CUDASIM   # False: zymo has no simulator
test_data_dir = Path(__file__).parent / "tests"   # zymo ships no numba test data (CUDA C, PTX)


class CUDATestCase(TestCase):
    """A test case for CUDA code: within each test the low-occupancy and host-copy warnings
    are off (config.CUDA_LOW_OCCUPANCY_WARNINGS, config.CUDA_WARN_ON_IMPLICIT_COPY), as in
    numba's."""

    FLOAT16_RTOL = float(np.finfo(np.float16).eps)   # one float16 rounding

    def setUp(self):
        self._saved_flags = (config.CUDA_LOW_OCCUPANCY_WARNINGS,
                             config.CUDA_WARN_ON_IMPLICIT_COPY)
        config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
        config.CUDA_WARN_ON_IMPLICIT_COPY = 0

    def tearDown(self):
        config.CUDA_LOW_OCCUPANCY_WARNINGS, config.CUDA_WARN_ON_IMPLICIT_COPY = \
            self._saved_flags

    def skip_if_lto(self, reason):
        """zymo links no LTO-IR: nothing to skip."""


ContextResettingTestCase = CUDATestCase


def skip_on_cudasim(reason):
    """Skip under numba's simulator: zymo has none, so never."""
    return unittest.skipIf(ENABLE_CUDASIM, reason)


def skip_unless_cudasim(reason):
    """Run only under numba's simulator: zymo has none, so always skipped."""
    return unittest.skipUnless(ENABLE_CUDASIM, reason)


def skip_on_standalone_numba_cuda(reason_or_fn):
    return _passthrough(reason_or_fn)


def _passthrough(reason_or_fn):
    if callable(reason_or_fn):
        return reason_or_fn
    return lambda fn: fn


def skip_if_external_memmgr(reason):
    return unittest.skipIf(False, reason)


def skip_under_cuda_memcheck(reason):
    import os
    return unittest.skipIf(os.environ.get("CUDA_MEMCHECK") is not None, reason)


def skip_without_nvdisasm(reason):
    return unittest.skipIf(shutil.which("nvdisasm") is None, reason)


def skip_with_nvdisasm(reason):
    return unittest.skipIf(shutil.which("nvdisasm") is not None, reason)


def skip_on_arm(reason):
    return unittest.skipIf(platform.machine().startswith(("arm", "aarch")), reason)


def skip_if_mvc_enabled(reason):
    """numba's minor version compatibility mode: zymo has none."""
    return unittest.skipIf(False, reason)


def skip_if_cudadevrt_missing(fn):
    """zymo's grid sync needs no device runtime library: never skipped."""
    return fn


def skip_if_nvjitlink_missing(reason):
    """Skip where NVIDIA's nvJitLink (cuda.bindings.nvjitlink) cannot be imported."""
    return unittest.skipUnless(_have_nvjitlink(), reason)


def skip_on_nvjitlink_13_1_sm_120(reason):
    """numba skips link failures of nvJitLink 13.1 on sm_120; zymo links nothing with
    nvJitLink, so never."""
    return unittest.skipIf(False, reason)


def skip_on_wsl2(reason):
    """Skip under WSL2 (its kernel release names it)."""
    release = platform.release().lower()
    return unittest.skipIf("wsl2" in release, reason)


def skip_if_cuda_includes_missing(fn):
    return unittest.skip("zymo compiles no CUDA C")(fn)


def skip_if_curand_kernel_missing(fn):
    return unittest.skip("zymo compiles no CUDA C (curand_kernel.h)")(fn)


def skip_if_mvc_libraries_unavailable(fn):
    return unittest.skip("zymo has no minor version compatibility mode")(fn)


def skip_if_cupy_unavailable(fn):
    try:
        import cupy  # noqa: F401
        return fn
    except ImportError:
        return unittest.skip("CuPy is not installed")(fn)


def skip_unless_cuda_python(reason):
    return _passthrough(reason)


def skip_with_cuda_python(reason):
    return unittest.skipIf(False, reason)


def cc_X_or_above(major: int, minor: int) -> bool:   # noqa: N802
    """Whether the device (the CPU backend counts as sm_90) is at least `major.minor`."""
    return get_current_device().compute_capability >= (major, minor)


def _cc_skip(major: int, minor: int):
    def skip(fn):
        return unittest.skipUnless(cc_X_or_above(major, minor),
                                   f"requires cc >= {major}.{minor}")(fn)
    return skip


skip_unless_cc_50 = _cc_skip(5, 0)
skip_unless_cc_53 = _cc_skip(5, 3)
skip_unless_cc_60 = _cc_skip(6, 0)
skip_unless_cc_70 = _cc_skip(7, 0)
skip_unless_cc_75 = _cc_skip(7, 5)
skip_unless_cc_80 = _cc_skip(8, 0)
skip_unless_cc_90 = _cc_skip(9, 0)


def xfail_unless_cudasim(fn):
    """numba marks with it tests its GPU target fails by its own bugs (numba#8036: an
    exception raised in a device function); zymo's target passes them, so they run as tests."""
    return fn


def skip_unless_gpu(reason="needs a CUDA GPU"):
    """zymo's own: skip where kernels run on the CPU backend."""
    return unittest.skipUnless(mode.on_gpu(), reason)


class ForeignArray:
    """An array from "another library": only its `__cuda_array_interface__` shows."""

    def __init__(self, arr):
        self._arr = arr
        self.__cuda_array_interface__ = arr.__cuda_array_interface__
