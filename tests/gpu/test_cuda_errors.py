"""Launch-time validation and CUDA errors on a GPU: block and grid limits, shared memory (with
the automatic opt-in above 48 KiB), argument values, bounds checking, a faulting kernel, and the
PTX/cubin disk cache seen from a launch."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import zymo as zm
from zymo.runtime.cuda import cache

pytestmark = pytest.mark.gpu


@zm.kernel
def fill(x, value):
    i = zm.grid(1)
    if i < x.shape[0]:
        x[i] = value


def _x(n=64):
    return zm.to_device(np.zeros(n, np.float32))


@pytest.mark.parametrize("block, message", [
    (2048, "2048 threads per block; this kernel can run at most"),
    ((1, 1, 128), "block.z = 128 is above the device's limit of 64"),
    ((2048, 1), "block.x = 2048 is above the device's limit of 1024"),
])
def test_bad_block_sizes(block, message):
    with pytest.raises(zm.LaunchError, match=message.replace(".", r"\.")) as info:
        fill[1, block](_x(), 1.0)
    assert "fill with grid (1, 1, 1)" in str(info.value)


def test_grid_limit():
    with pytest.raises(zm.LaunchError, match=r"grid\.y = 70000 is above"):
        fill[(1, 70000), 32](_x(), 1.0)


def test_too_much_shared_memory_names_the_opt_in_limit(device):
    optin = device.attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
    with pytest.raises(zm.LaunchError, match="opts the kernel in") as info:
        fill[1, 32, None, optin + 1024](_x(), 1.0)
    assert f"at most {optin}" in str(info.value)


def test_shared_memory_above_48k_is_opted_in(device):
    x = _x()
    fill[1, 64, None, 100 * 1024](x, 3.0)
    np.testing.assert_array_equal(x.copy_to_host(), 3.0)


def test_argument_errors():
    with pytest.raises((zm.LaunchError, zm.CompileError), match="takes 2 arguments"):
        fill[1, 32](_x())
    with pytest.raises(zm.LaunchError, match=r"integer argument \d+ is beyond int64"):
        fill[1, 32](_x(), 2 ** 70)


@zm.kernel(boundscheck=True)
def off_by_one(x):
    i = zm.grid(1)
    if i <= x.shape[0]:
        x[i] = 1.0


def test_bounds_check_on_the_gpu():
    with pytest.raises(zm.BoundsError, match=r"index 64 is out of bounds for array `x`") as info:
        off_by_one[1, 128](_x(64))
    assert info.value.index == (64,) and info.value.shape == (64,)


def test_faulting_kernel_reports_the_call_and_a_hint():
    # an illegal address ruins the context for good: run it in its own process
    code = textwrap.dedent("""
        import numpy as np, zymo as zm
        from zymo.runtime.cuda import driver

        class Wild:
            __cuda_array_interface__ = {"shape": (1 << 20,), "typestr": "<f4",
                                        "data": (0x10, False), "version": 3}

        import faulting
        faulting.fill[4096, 256](Wild(), 1.0)
        try:
            driver.synchronize()
        except zm.CudaError as error:
            print("CAUGHT", error)
        """)
    import os
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(__file__)] + sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert "CAUGHT cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS" in out.stdout, out.stderr
    assert "interp" in out.stdout


def test_disk_cache_from_launches(tmp_path, monkeypatch):
    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))
    misses, hits = cache.stats["ptx_miss"], cache.stats["ptx_hit"]
    first = zm.kernel(fill.py_func)
    x = _x()
    first[1, 64](x, 5.0)
    assert cache.stats["ptx_miss"] == misses + 1
    second = zm.kernel(fill.py_func)     # as in a new process: nothing in memory
    second[1, 64](x, 6.0)
    assert cache.stats["ptx_hit"] == hits + 1
    np.testing.assert_array_equal(x.copy_to_host(), 6.0)
    for entry in tmp_path.rglob("*.*"):
        entry.write_bytes(b"garbage")
    third = zm.kernel(fill.py_func)
    third[1, 64](x, 7.0)                  # damaged entries: rebuilt, not a crash
    assert cache.stats["ptx_miss"] == misses + 2
    np.testing.assert_array_equal(x.copy_to_host(), 7.0)
    assert all(cache.read_entry(entry) for entry in tmp_path.rglob("*.*"))
