"""Every corpus kernel on CUDA, through the NVPTX backend: arrays moved with `zm.to_device`
(strided views through CuPy, keeping their strides), results compared with the NumPy reference
and with the interpreter (tests/backend/test_corpus.py runs the same cases on the CPU backends)."""
from __future__ import annotations

import copy
import zlib

import numpy as np
import pytest

import zymo as zm
from corpus import ALL_CASES

pytestmark = pytest.mark.gpu


def _seed(case) -> int:
    return zlib.crc32(case.name.encode())


class _OnGPU:
    """A NumPy argument's GPU copy and how to read it back (views keep their strides)."""

    def __init__(self, host: np.ndarray):
        self.host = host
        if host.flags.c_contiguous:
            self.device = zm.to_device(host)
            self.read = self.device.copy_to_host
            return
        cupy = pytest.importorskip("cupy")
        root = host
        while isinstance(root.base, np.ndarray):
            root = root.base
        offset = host.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        whole = cupy.asarray(root)
        self.device = cupy.ndarray(host.shape, host.dtype, whole.data + offset, host.strides)

        def read():
            back = whole.get()
            return np.ndarray(host.shape, host.dtype, buffer=back, offset=offset,
                              strides=host.strides)
        self.read = read


def _run_on_cuda(case, seed: int) -> tuple[list, list]:
    """(arguments before the launch, the same arguments after it, read back)."""
    args = case.make_args(np.random.default_rng(seed))
    before = copy.deepcopy(args)
    moved = [_OnGPU(a) if isinstance(a, np.ndarray) else a for a in args]
    case.kernel[case.grid, case.block](*[m.device if isinstance(m, _OnGPU) else m
                                         for m in moved])
    return before, [m.read() if isinstance(m, _OnGPU) else m for m in moved]


def _assert_close(got, want, case, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol, equal_nan=True,
                                   err_msg=what)


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda case: case.name)
def test_case_on_cuda(case):
    seed = _seed(case)
    before, after = _run_on_cuda(case, seed)
    expected = case.reference(copy.deepcopy(before))
    for k, want in expected.items():
        _assert_close(after[k], want, case, f"{case.name} on cuda: argument {k}")
    interp_args = case.make_args(np.random.default_rng(seed))
    case.kernel.on("interp")[case.grid, case.block](*interp_args)
    for k, value in enumerate(after):
        if isinstance(value, np.ndarray):
            if k not in expected:
                np.testing.assert_array_equal(value, before[k],
                                              err_msg=f"{case.name}: input {k} changed")
            _assert_close(value, interp_args[k], case,
                          f"{case.name}: argument {k}, cuda vs interp")


@zm.kernel
def reverse_in_shared(x):
    buf = zm.shared.array(0, zm.f32)          # dynamic: sized by the launch
    n = x.shape[0]
    i = zm.threadIdx.x
    while i < n:
        buf[i] = x[i]
        i += zm.blockDim.x
    zm.syncthreads()
    i = zm.threadIdx.x
    while i < n:
        x[i] = buf[n - 1 - i]
        i += zm.blockDim.x


@zm.kernel
def two_dynamic_views(x, out, m):
    """`a` and `b` are one memory (both start at the dynamic shared bytes): the load of `b`
    must stay after the loop that writes `a` (codegen's EarlyLoads once moved it)."""
    a = zm.shared.array(0, zm.f64)
    b = zm.shared.array(0, zm.f64)
    t = zm.threadIdx.x
    i = zm.grid(1)
    b[t] = -1.0
    for k in range(m):
        a[t] = x[i] + k
    v = b[t]
    if i < out.shape[0]:
        out[i] = v


def test_dynamic_shared_arrays_alias():
    x = np.arange(64.0)
    out = zm.to_device(np.zeros(64))
    two_dynamic_views[2, 32, None, 256](zm.to_device(x), out, np.int32(3))
    np.testing.assert_array_equal(out.copy_to_host(), x + 2)


@pytest.mark.parametrize("n", [1000, 25600])   # 4 KB, and 100 KB (past the 48 KiB default)
def test_dynamic_shared_memory(n):
    host = np.arange(n, dtype=np.float32)
    x = zm.to_device(host)
    reverse_in_shared[1, 256, None, 4 * n](x)
    np.testing.assert_array_equal(x.copy_to_host(), host[::-1])


def test_dynamic_shared_extent_is_the_launchs():
    from frontend.test_kernel_language import dynamic_shared_views
    out = zm.to_device(np.zeros(4, np.int64))
    dynamic_shared_views[2, 32, None, 44](out)
    np.testing.assert_array_equal(out.copy_to_host(), [11, 5, 3, 9])
