"""`raise` and enums on the GPU: a checked launch (`boundscheck=True`, numba's `debug=True`)
raises the kernel's exception with numba's message, an unchecked one ends the raising threads
silently; checked divisions by zero and tuple indices raise; enum members pass their values."""
from __future__ import annotations

import enum

import numpy as np
import pytest

import zymo as zm
from zymo import cuda

from frontend import raise_kernels as K

pytestmark = pytest.mark.gpu


class Color(enum.Enum):
    red = 1
    green = 2


def checked(kernel):
    return zm.kernel(kernel.py_func, boundscheck=True)


def test_checked_launch_raises_the_kernels_exception():
    x = zm.to_device(np.array([1.0, 2.0, -3.0, 4.0]))
    out = zm.to_device(np.zeros(4))
    with pytest.raises(K.NegativeInput) as info:
        checked(K.check_positive)[1, 4](x, out)
    assert str(info.value).startswith("In function 'check_positive', file ")
    assert str(info.value).endswith(", line 20, tid=[0, 0, 2] ctaid=[0, 0, 0]: negative input")
    np.testing.assert_array_equal(out.copy_to_host(), [2.0, 2.0, 1.0, 2.0])


def test_unchecked_launch_ends_only_the_raising_threads():
    x = zm.to_device(np.array([1.0, -2.0, 3.0, -4.0]))
    out = zm.to_device(np.zeros(4))
    K.check_positive[1, 4](x, out)
    np.testing.assert_array_equal(out.copy_to_host(), [2.0, 1.0, 2.0, 1.0])


def test_block_and_thread_of_the_raise():
    x = np.arange(64, dtype=np.float64)
    x[45] = 500.0
    with pytest.raises(K.NegativeInput, match=r"tid=\[0, 0, 13\] ctaid=\[0, 0, 1\]$"):
        checked(K.bare_class)[2, 32](zm.to_device(x), zm.to_device(np.zeros(64)))


def test_checked_division_and_tuple_index():
    with pytest.raises(ZeroDivisionError, match="integer division by zero$"):
        checked(K.floor_divide)[1, 3](np.array([1, 2, 3]), np.array([1, 0, 1]), np.zeros(3))
    with pytest.raises(IndexError, match="tuple index out of range$"):
        checked(K.shape_from_end)[1, 3](np.zeros((5, 7)), np.zeros(3, np.int64))


def test_numba_debug_kernel_raises_user_exception():
    @cuda.jit("void(int32)", debug=True, opt=False)
    def kernel(x):
        if x == 2:
            raise K.NegativeInput("two")

    kernel[1, 1](0)
    with pytest.raises(K.NegativeInput, match=r"tid=\[0, 0, 0\] ctaid=\[0, 0, 0\]: two$"):
        kernel[1, 1](2)


def test_enum_arguments():
    @cuda.jit
    def kernel(a, b, out):
        out[0] = a == b
        out[1] = a is not b

    out = np.zeros(2, np.bool_)
    kernel[1, 1](Color.red, Color.green, out)
    assert out.tolist() == [False, True]
    kernel[1, 1](Color.green, Color.green, out)
    assert out.tolist() == [True, False]
