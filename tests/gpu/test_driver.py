"""The driver, arrays and launch layers on a GPU with hand-written PTX (no NVPTX backend)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import zymo as zm
from hand_ptx import SAXPY, empty_kernel_ptx, give_ptx
from zymo.runtime.cuda import cache, driver

pytestmark = pytest.mark.gpu


@zm.kernel
def saxpy(a, x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]


def test_device_facts(device):
    assert device.compute_capability >= (7, 0)
    assert device.arch == "sm_%d%d" % device.compute_capability
    assert device.name and driver.driver_version() >= (11, 0)
    assert device.attribute("MAX_THREADS_PER_BLOCK") == 1024


def test_ptx_loads_through_the_jit_and_through_nvjitlink(device):
    jitted = driver.load_module(device, SAXPY)
    assert driver.get_function(jitted, "saxpy")
    if driver.nvjitlink_version() is None:
        pytest.skip("nvJitLink is not installed")
    cubin = driver.link_ptx(SAXPY, device.arch)
    assert cubin[:4] == b"\x7fELF"
    function = driver.get_function(driver.load_module(device, cubin), "saxpy")
    assert driver.function_attribute(function, "NUM_REGS") > 0


def test_newer_ptx_version_is_capped_for_the_driver(device):
    too_new = SAXPY.replace(".version 7.0", ".version 99.9")
    assert driver.get_function(driver.load_module(device, too_new), "saxpy")


def test_to_device_round_trip():
    host = np.arange(12, dtype=np.float64).reshape(3, 4)
    array = zm.to_device(host)
    assert (array.shape, array.dtype, array.strides, array.size, array.nbytes) == \
        ((3, 4), np.dtype(np.float64), (32, 8), 12, 96)
    np.testing.assert_array_equal(array.copy_to_host(), host)
    np.testing.assert_array_equal(zm.device_array((2, 2), np.int32).copy_to_host(), 0)
    assert zm.to_device(np.zeros(0, np.float32)).copy_to_host().shape == (0,)
    interface = array.__cuda_array_interface__
    assert interface["data"][0] == array.data and interface["typestr"] == "<f8"


def test_hand_ptx_saxpy_launch():
    n = 1000
    x, y = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    dx, dy = zm.to_device(x), zm.to_device(y)
    a = np.float32(2.0)
    give_ptx(saxpy, (a, dx, dy), SAXPY, "saxpy")
    saxpy[(n + 127) // 128, 128](a, dx, dy)
    np.testing.assert_allclose(dy.copy_to_host(), 2 * x + 1)
    saxpy[(n + 127) // 128, 128](a, dx, dy)          # warm: the plan is reused
    np.testing.assert_allclose(dy.copy_to_host(), 4 * x + 1)
    assert len(saxpy._plans) == 1


def test_hand_ptx_strided_arrays_through_cupy():
    cupy = pytest.importorskip("cupy")
    base = cupy.arange(40, dtype=cupy.float32)
    out = cupy.zeros(60, dtype=cupy.float32)
    x, y = base[::2], out[::3]                 # element strides 2 and 3
    a = np.float32(3.0)
    give_ptx(saxpy, (a, x, y), SAXPY, "saxpy")
    saxpy[1, 32](a, x, y)
    expected = np.zeros(60, np.float32)
    expected[::3] = 3 * np.arange(40, dtype=np.float32)[::2]
    np.testing.assert_allclose(out.get(), expected)


def test_launch_from_another_thread():
    x, y = zm.to_device(np.ones(64, np.float32)), zm.to_device(np.zeros(64, np.float32))
    a = np.float32(1.0)
    give_ptx(saxpy, (a, x, y), SAXPY, "saxpy")
    errors = []

    def work():
        try:
            saxpy[1, 64](a, x, y)
            driver.synchronize()
        except Exception as error:  # reported below, in the test's thread
            errors.append(error)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not errors
    np.testing.assert_array_equal(y.copy_to_host(), 1.0)


@zm.kernel
def noop4(a, b, c, d):
    pass


def test_cubin_cache_hit_and_corruption(tmp_path, monkeypatch, device):
    if driver.nvjitlink_version() is None:
        pytest.skip("nvJitLink is not installed")
    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))
    ptx = empty_kernel_ptx("noop4_cache", 4)
    misses, hits = cache.stats["cubin_miss"], cache.stats["cubin_hit"]
    first = cache.with_cubin("noop4", ptx, "noop4_cache", device.arch, ())
    second = cache.with_cubin("noop4", ptx, "noop4_cache", device.arch, ())
    assert (cache.stats["cubin_miss"], cache.stats["cubin_hit"]) == (misses + 1, hits + 1)
    assert first.cubin == second.cubin
    [entry] = tmp_path.rglob("*.cubin")
    entry.write_bytes(entry.read_bytes()[:100])
    third = cache.with_cubin("noop4", ptx, "noop4_cache", device.arch, ())
    assert cache.stats["cubin_miss"] == misses + 2 and third.cubin == first.cubin
    assert driver.get_function(driver.load_module(device, third.cubin), "noop4_cache")
