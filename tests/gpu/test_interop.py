"""GPU arrays from CuPy, PyTorch, numba and DLPack producers as kernel arguments (strides
included), `zm.DeviceArray` handed to them, and launches on their streams and in CUDA graphs."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from zymo.runtime.cuda import driver

pytestmark = pytest.mark.gpu


@zm.kernel
def axpy2d(a, x, y):
    i, j = zm.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        y[i, j] = a * x[i, j] + y[i, j]


def _launch(x, y, a=2.0):
    axpy2d[(4, 4), (16, 16)](a, x, y)


def _expected(x, y, a=2.0):
    return a * np.asarray(x, np.float64) + np.asarray(y, np.float64)


def test_cupy_arrays_contiguous_and_strided():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.rand(50, 40).astype(cupy.float32)
    y = cupy.random.rand(50, 40).astype(cupy.float32)
    want = _expected(x.get(), y.get())
    _launch(x, y)
    np.testing.assert_allclose(y.get(), want, rtol=1e-6)
    xt, yt = x.T, cupy.ones((80, 50), cupy.float32)[::2]     # transposed and row-strided
    want = _expected(xt.get(), yt.get())
    _launch(xt, yt)
    np.testing.assert_allclose(yt.get(), want, rtol=1e-6)


def test_torch_tensors_contiguous_transposed_and_with_grad():
    torch = pytest.importorskip("torch")
    x = torch.rand(50, 40, device="cuda")
    y = torch.rand(50, 40, device="cuda", requires_grad=False)
    want = _expected(x.cpu().numpy(), y.cpu().numpy())
    _launch(x, y)
    np.testing.assert_allclose(y.cpu().numpy(), want, rtol=1e-6)
    xt = torch.rand(40, 50, device="cuda").t()
    yt = torch.zeros(40, 50, device="cuda").t()
    want = _expected(xt.cpu().numpy(), yt.cpu().numpy())
    _launch(xt, yt)
    np.testing.assert_allclose(yt.cpu().numpy(), want, rtol=1e-6)
    leaf = torch.rand(50, 40, device="cuda", requires_grad=True)
    out = torch.zeros(50, 40, device="cuda")
    _launch(leaf, out, 1.0)
    np.testing.assert_allclose(out.cpu().numpy(), leaf.detach().cpu().numpy(), rtol=1e-6)


def test_torch_cpu_tensor_is_refused_with_a_hint():
    torch = pytest.importorskip("torch")
    with pytest.raises(zm.LaunchError, match="cuda"):
        axpy2d.on("cuda")[1, 1](2.0, torch.zeros(2, 2), torch.zeros(2, 2, device="cuda"))


class _OnlyDLPack:
    """A producer with DLPack and nothing else (as JAX arrays are seen by consumers)."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None, **kwargs):
        return self.tensor.__dlpack__()

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def test_dlpack_producer():
    torch = pytest.importorskip("torch")
    x = torch.rand(30, 20, device="cuda")
    y = torch.rand(20, 30, device="cuda").t()        # strided: DLPack strides are in elements
    want = _expected(x.cpu().numpy(), y.cpu().numpy())
    _launch(_OnlyDLPack(x), _OnlyDLPack(y))
    np.testing.assert_allclose(y.cpu().numpy(), want, rtol=1e-6)


def test_numba_device_arrays():
    import numpy
    if not hasattr(numpy, "row_stack"):
        numpy.row_stack = numpy.vstack   # numba-cuda 0.30 still names it
    try:
        from numba import cuda
    except Exception as error:  # numba-cuda missing or broken here
        pytest.skip(f"numba-cuda: {error}")
    x = cuda.to_device(np.random.rand(20, 20).astype(np.float32))
    y = cuda.to_device(np.ones((20, 20), np.float32))
    want = _expected(x.copy_to_host(), y.copy_to_host())
    _launch(x, y)
    np.testing.assert_allclose(y.copy_to_host(), want, rtol=1e-6)


def test_device_array_is_read_by_cupy_and_torch():
    host = np.arange(24, dtype=np.float32).reshape(4, 6)
    array = zm.to_device(host)
    cupy = pytest.importorskip("cupy")
    np.testing.assert_array_equal(cupy.asarray(array).get(), host)      # __cuda_array_interface__
    np.testing.assert_array_equal(cupy.from_dlpack(array).get(), host)  # DLPack
    torch = pytest.importorskip("torch")
    tensor = torch.from_dlpack(array)
    assert tensor.is_cuda and tuple(tensor.shape) == (4, 6)
    np.testing.assert_array_equal(tensor.cpu().numpy(), host)
    tensor += 1                                                          # same memory
    np.testing.assert_array_equal(array.copy_to_host(), host + 1)
    del tensor
    import gc
    gc.collect()
    from zymo.runtime.cuda import dlpack
    assert not dlpack._live


def test_streams_of_zymo_cupy_and_torch():
    x = zm.to_device(np.ones((64, 64), np.float32))
    y = zm.to_device(np.zeros((64, 64), np.float32))
    stream = zm.Stream(non_blocking=True)
    start, end = zm.Event(), zm.Event()
    start.record(stream)
    axpy2d[(4, 4), (16, 16), stream](1.0, x, y)
    end.record(stream)
    stream.synchronize()
    assert end.elapsed_ms(start) >= 0
    cupy = pytest.importorskip("cupy")
    cupy_stream = cupy.cuda.Stream(non_blocking=True)
    axpy2d[(4, 4), (16, 16), cupy_stream](1.0, x, y)
    cupy_stream.synchronize()
    torch = pytest.importorskip("torch")
    torch_stream = torch.cuda.Stream()
    axpy2d[(4, 4), (16, 16), torch_stream](1.0, x, y)
    torch_stream.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), 3.0)


def test_launches_captured_into_a_cuda_graph():
    drv = driver.bindings()
    x = zm.to_device(np.ones((32, 32), np.float32))
    y = zm.to_device(np.zeros((32, 32), np.float32))
    axpy2d[(2, 2), (16, 16)](1.0, x, y)        # compile and warm up outside the capture
    driver.synchronize()
    stream = zm.Stream(non_blocking=True)
    mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
    driver.check(drv.cuStreamBeginCapture(stream.handle, mode), "cuStreamBeginCapture")
    for _ in range(3):
        axpy2d[(2, 2), (16, 16), stream](1.0, x, y)
    graph = driver.check(drv.cuStreamEndCapture(stream.handle), "cuStreamEndCapture")
    executable = driver.check(drv.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
    driver.check(drv.cuGraphLaunch(executable, stream.handle), "cuGraphLaunch")
    driver.check(drv.cuGraphLaunch(executable, stream.handle), "cuGraphLaunch")
    stream.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), 1.0 + 6.0)


def test_jax_arrays_as_inputs():
    import os
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # leave memory to others
    jnp = pytest.importorskip("jax.numpy")
    import jax
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    x = jnp.arange(600, dtype=jnp.float32).reshape(30, 20)
    y = zm.to_device(np.ones((30, 20), np.float32))
    want = _expected(np.asarray(x), y.copy_to_host())
    _launch(x, y)                    # JAX arrays are immutable: inputs only
    np.testing.assert_allclose(y.copy_to_host(), want, rtol=1e-6)
    _launch(_OnlyDLPack(x), y)       # and through DLPack alone
    np.testing.assert_allclose(y.copy_to_host(), _expected(np.asarray(x), want), rtol=1e-6)


def test_big_endian_host_data_is_converted():
    host = np.arange(6, dtype=">f4")
    np.testing.assert_array_equal(zm.to_device(host).copy_to_host(), host.astype("<f4"))
