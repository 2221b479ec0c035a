"""numba's warnings, configuration and user errors in zymo.cuda's host API: cuda.jit's debug/opt
warning and config.OPT, the low-occupancy and host-copy performance warnings (given on the CPU
as numba gives them on a GPU), launch-dimension and forall errors, and cuda.grid's literal."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from zymo import cuda
from zymo.cuda.core import config
from zymo.cuda.core.errors import NumbaInvalidConfigWarning, NumbaPerformanceWarning
from zymo.cuda.tests.support import override_config


@pytest.fixture(autouse=True)
def quiet():
    """The performance warnings off, as numba's CUDATestCase has them; tests turn one on."""
    with override_config("CUDA_LOW_OCCUPANCY_WARNINGS", 0):
        with override_config("CUDA_WARN_ON_IMPLICIT_COPY", 0):
            yield


def fill(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = i + 1


def test_opt_level_is_an_int_that_remembers_max():
    assert config._OptLevel(2) == 2 and not config._OptLevel(2).is_opt_max
    top = config._OptLevel("max")
    assert top == 3 and top.is_opt_max and repr(top) == "_OptLevel('max')"
    assert config.OPT == 3 and isinstance(config.OPT, config._OptLevel)


@pytest.mark.parametrize("kwargs", [{"debug": True, "opt": True}, {"debug": True}])
def test_debug_with_opt_warns(kwargs):
    with pytest.warns(NumbaInvalidConfigWarning, match="not supported by CUDA"):
        cuda.jit(**kwargs)


def test_debug_and_opt_defaults_come_from_config():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cuda.jit(debug=True, opt=False)
        cuda.jit()
        with override_config("OPT", config._OptLevel(0)):
            cuda.jit(debug=True)
            with override_config("CUDA_DEBUGINFO_DEFAULT", 1):
                kernel = cuda.jit(fill)
    assert kernel.boundscheck           # the configured debug default: bounds checks on
    for level in (1, 2, 3, "max"):
        with override_config("OPT", config._OptLevel(level)):
            with override_config("CUDA_DEBUGINFO_DEFAULT", 1):
                with pytest.warns(NumbaInvalidConfigWarning, match="not supported by CUDA"):
                    cuda.jit()
    with pytest.warns(NumbaInvalidConfigWarning, match="mutually exclusive"):
        cuda.jit(debug=True, opt=False, lineinfo=True)


def test_low_occupancy_warning_under_128_blocks():
    kernel = cuda.jit(fill)
    with override_config("CUDA_LOW_OCCUPANCY_WARNINGS", 1):
        with pytest.warns(NumbaPerformanceWarning, match=r"Grid size 4 .+ low occupancy"):
            launch = kernel[4, 32]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            big = kernel[128, 32]
            with override_config("DISABLE_PERFORMANCE_WARNINGS", 1):
                kernel[3, 32]
    x = np.zeros(4 * 32, np.float32)
    launch(x)
    np.testing.assert_array_equal(x, np.arange(1, 129))
    y = np.zeros(128 * 32, np.float32)
    big(y)
    assert y[-1] == 128 * 32


def test_host_copy_warning_for_numpy_and_pinned_arrays_only():
    with override_config("CUDA_WARN_ON_IMPLICIT_COPY", 1):
        for make in (lambda n: np.zeros(n, np.float32),
                     lambda n: cuda.pinned_array(n, np.float32)):
            kernel = cuda.jit(fill)
            x = make(16)
            with pytest.warns(NumbaPerformanceWarning,
                              match="Host array used in CUDA kernel will incur.+copy overhead"):
                kernel[1, 16](x)
            np.testing.assert_array_equal(x, np.arange(1, 17))
        for make in (cuda.device_array, cuda.mapped_array, cuda.managed_array):
            kernel = cuda.jit(fill)
            x = make(16, np.float32)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                kernel[1, 16](x)
            np.testing.assert_array_equal(x.copy_to_host(), np.arange(1, 17))
    kernel = cuda.jit(fill)
    with override_config("CUDA_WARN_ON_IMPLICIT_COPY", 0):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            kernel[1, 16](np.zeros(16))


def test_launch_dimension_errors_are_numbas():
    kernel = cuda.jit(fill)
    with pytest.raises(ValueError, match=r"griddim must be a sequence of 1, 2 or 3 integers, "
                                         r"got \[1, 2, 3, 4\]"):
        kernel[(1, 2, 3, 4), 5]
    with pytest.raises(ValueError, match=r"blockdim .+ got \[3, 4, 5, 6\]"):
        kernel[(1, 2), (3, 4, 5, 6)]
    with pytest.raises(TypeError, match=r"griddim must be a sequence of integers, got \[2.0\]"):
        kernel[2.0, 3]
    with pytest.raises(TypeError, match=r"blockdim must be a sequence of integers, got \[3.0\]"):
        kernel[2, 3.0]
    x = np.zeros(8)
    kernel[np.int64(1), (8,)](x)                  # NumPy integers are integers
    np.testing.assert_array_equal(x, np.arange(1, 9))


def test_forall_negative_task_count():
    with pytest.raises(ValueError, match="Can't create ForAll with negative task count"):
        cuda.jit(fill).forall(-1)


def test_grid_of_a_non_literal_names_require_literal_value():
    def nonliteral(n):
        cuda.grid(n)

    with pytest.raises(cuda.TypingError, match="RequireLiteralValue") as raised:
        cuda.jit("void(int32)")(nonliteral)
    message = str(raised.value)
    assert "test_warnings_errors.py:" in message and "hint: write zm.grid(1)" in message
