"""The memory model on a GPU (tests/passes/test_memory_model.py on the CPU): exchanges between
threads across barriers and fences, overlapping arguments through every launch path (the
general one, the compiled launcher of a warm launch, views of other libraries), and launch
shapes that break what the `noalias` build assumes. Every result equals the interpreter's."""
from __future__ import annotations

import time

import numpy as np
import pytest

import zymo as zm
from memory_kernels import (fences, partner, ping, publish, rows, shared_partner,
                            square_then_sine)

pytestmark = pytest.mark.gpu


class View:
    """A strided window of a DeviceArray, as another library would pass it."""

    def __init__(self, base: zm.DeviceArray, offset: int, shape: tuple, strides: tuple):
        item = base.dtype.itemsize
        self.__cuda_array_interface__ = {
            "shape": shape, "strides": tuple(s * item for s in strides),
            "typestr": base.dtype.str, "data": (base.data + offset * item, False),
            "version": 3}


def _interp(kernel, grid, block, *args):
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    kernel.on("interp")[grid, block](*copies)
    return copies


def test_partner_exchange_across_barriers():
    rng = np.random.default_rng(0)
    a, b = rng.random(65).astype(np.float32), rng.random(64).astype(np.float32)
    want = _interp(partner, 1, 64, a, b)
    da, db = zm.to_device(a), zm.to_device(b)
    partner[1, 64](da, db)
    np.testing.assert_array_equal(da.copy_to_host(), want[0])
    np.testing.assert_array_equal(db.copy_to_host(), want[1])


def test_exchanges_through_shared_and_global_memory_in_loops():
    a = np.random.default_rng(1).random(64).astype(np.float32)
    want = _interp(ping, 1, 64, a, np.zeros(64, np.float32), 5)
    da, db = zm.to_device(a), zm.to_device(np.zeros(64, np.float32))
    ping[1, 64](da, db, 5)
    np.testing.assert_array_equal(da.copy_to_host(), want[0])
    x = np.random.default_rng(2).random(256).astype(np.float32)
    out = zm.to_device(np.zeros(256, np.float32))
    shared_partner[4, 64](zm.to_device(x), out)
    np.testing.assert_array_equal(out.copy_to_host(),
                                  _interp(shared_partner, 4, 64, x, np.zeros(256, np.float32))[1])


def _square_sine(x):
    square = x * x
    return square + np.sin(square.astype(np.float64)).astype(np.float32)


@pytest.mark.parametrize("path", ["general", "warm"])
def test_the_same_array_twice(path):
    """y is x: the sine reads the square just stored. The warm launch goes through the
    compiled launcher, which must see the overlap and hand over to the build without noalias."""
    x = np.random.default_rng(3).random(4096).astype(np.float32)
    launch = square_then_sine[16, 256]
    apart = zm.to_device(np.zeros_like(x))
    if path == "warm":
        launch(zm.to_device(x), apart)              # a plan and a guarded launcher exist
        launch(zm.to_device(x), apart)
    y = zm.to_device(x)
    launch(y, y)
    np.testing.assert_allclose(y.copy_to_host(), _square_sine(x), rtol=3e-6)
    other = zm.to_device(x)
    launch(zm.to_device(x), other)                  # and back: apart again
    np.testing.assert_allclose(other.copy_to_host(), x * x + np.sin(x), rtol=3e-6)


def test_overlapping_views_of_another_library():
    base = np.random.default_rng(4).random(4096).astype(np.float32)
    whole = zm.to_device(base)
    every_other = View(whole, 0, (2048,), (2,))
    again = View(whole, 0, (2048,), (2,))
    square_then_sine[8, 256](every_other, again)
    got = whole.copy_to_host()
    np.testing.assert_allclose(got[::2], _square_sine(base[::2]), rtol=3e-6)
    np.testing.assert_array_equal(got[1::2], base[1::2])


def test_a_launch_shape_that_breaks_ownership():
    x = np.random.default_rng(5).random(64).astype(np.float32)
    y = zm.to_device(np.zeros(64, np.float32))
    launch = rows[1, (64, 2)]
    launch(zm.to_device(x), y)                       # two threads share each y[i]
    plan = launch._cuda[0]
    assert plan.single == () and plan.pairs == ()   # the build without noalias ran
    got = y.copy_to_host()
    assert np.all((got == x) | (got == 2 * x))      # each thread adds once; a race, bounded


def test_fences_publish_to_other_blocks():
    data = zm.to_device(np.zeros(8, np.float32))
    flag = zm.to_device(np.zeros(1, np.int32))
    seen = zm.to_device(np.zeros(8 * 32, np.float32))
    publish[8, 32](data, flag, seen)
    assert flag.copy_to_host()[0] == 8
    np.testing.assert_array_equal(seen.copy_to_host(), np.repeat(np.arange(8) * 3.0 + 1.0, 32))
    x = zm.to_device(np.zeros(64, np.float32))
    fences[2, 32](x)
    assert np.all(x.copy_to_host() == 4.0)


def test_a_static_loop_nest_derivative_compiles_in_seconds():
    from backend.nvptx_kernels import nest_30x30
    x = np.random.default_rng(6).random(64)
    dx, y, dy = np.ones(64), np.zeros(64), np.zeros(64)
    start = time.perf_counter()
    zm.jvp(nest_30x30)[1, 64](zm.Duplicated(zm.to_device(x), zm.to_device(dx)),
                              zm.Duplicated(zm.to_device(y), zm.to_device(dy)))
    assert time.perf_counter() - start < 60


@pytest.mark.parametrize("how", ["struct", "boundscheck"])
def test_overlap_on_the_other_launch_paths(how, monkeypatch):
    """The struct fallback (no compiled launcher) checks the overlap in Python; a bounds-checked
    launch goes through the same launchers with its error buffer."""
    if how == "struct":
        monkeypatch.setenv("ZYMO_NATIVE_LAUNCH", "0")
        kernel = zm.kernel(square_then_sine.py_func)        # fresh plans
    else:
        kernel = zm.kernel(square_then_sine.py_func, boundscheck=True)
    x = np.random.default_rng(8).random(2048).astype(np.float32)
    for _ in range(2):
        y = zm.to_device(x)
        kernel[8, 256](y, y)
        np.testing.assert_allclose(y.copy_to_host(), _square_sine(x), rtol=3e-6)
