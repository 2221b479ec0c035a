"""The compiled launchers on a GPU: the guarded path launches what the general path would, steps
aside for other argument types, devices and values, and its errors read as the general path's."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import zymo as zm
from zymo.runtime.cuda import driver

pytestmark = pytest.mark.gpu


@zm.kernel
def axpb(a, x, b, flag, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        if flag:
            y[i] = a * x[i] + b
        else:
            y[i] = x[i]


def _arrays(n=100):
    x = np.arange(n, dtype=np.float32)
    return x, zm.to_device(x), zm.to_device(np.zeros(n, np.float32))


def test_repeated_launches_go_through_the_guarded_launcher():
    x, dx, dy = _arrays()
    launch = axpb[1, 128]
    launch(np.float32(2), dx, 1.5, True, dy)
    assert launch._fast is not None
    for k in range(5):
        launch(np.float32(k), dx, 0.25, True, dy)
        np.testing.assert_allclose(dy.copy_to_host(), k * x + 0.25)
    launch(np.float32(3), dx, 0.0, False, dy)
    np.testing.assert_array_equal(dy.copy_to_host(), x)


def test_other_argument_types_take_the_general_path_and_still_run():
    x, dx, dy = _arrays()
    launch = axpb[1, 128]
    launch(np.float32(2), dx, 1.0, True, dy)
    launch(np.float64(2), dx, 1.0, True, dy)          # another scalar type: a new plan
    np.testing.assert_allclose(dy.copy_to_host(), 2 * x + 1)
    launch(np.float32(2), dx, 1, True, dy)            # int for b
    np.testing.assert_allclose(dy.copy_to_host(), 2 * x + 1)
    cupy = pytest.importorskip("cupy")
    cy = cupy.zeros(100, cupy.float32)
    launch(np.float32(3), dx, 1.0, True, cy)          # a CuPy array: no guarded launcher
    np.testing.assert_allclose(cupy.asnumpy(cy), 3 * x + 1)
    launch(np.float32(4), dx, 1.0, True, dy)          # and back
    np.testing.assert_allclose(dy.copy_to_host(), 4 * x + 1)


@zm.kernel
def fill(y, value):
    i = zm.grid(1)
    if i < y.shape[0]:
        y[i] = value


def test_a_value_too_large_is_named_on_either_path():
    dy = zm.to_device(np.zeros(8, np.int64))
    launch = fill[1, 8]
    launch(dy, 7)
    assert launch._fast is not None
    with pytest.raises(zm.LaunchError, match="argument 1"):
        launch(dy, 2**70)
    launch(dy, -3)
    np.testing.assert_array_equal(dy.copy_to_host(), -3)


def test_a_new_device_epoch_sends_launches_through_the_general_path():
    x, dx, dy = _arrays()
    launch = axpb[1, 128]
    launch(np.float32(1), dx, 0.0, True, dy)
    before = launch._fast
    driver.DEVICE_EPOCH.value += 1                    # as use_device(other) does
    launch(np.float32(5), dx, 0.0, True, dy)
    np.testing.assert_allclose(dy.copy_to_host(), 5 * x)
    assert launch._fast is not None and launch._fast is not before
    launch(np.float32(6), dx, 0.0, True, dy)
    np.testing.assert_allclose(dy.copy_to_host(), 6 * x)


def test_guarded_launch_from_a_thread_without_a_context():
    x, dx, dy = _arrays()
    launch = axpb[1, 128]
    launch(np.float32(1), dx, 0.0, True, dy)
    errors = []

    def work():
        try:
            launch(np.float32(7), dx, 0.0, True, dy)
            driver.synchronize()
        except Exception as error:   # reported in the test's thread
            errors.append(error)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not errors
    np.testing.assert_allclose(dy.copy_to_host(), 7 * x)

