"""zymo.cuda on a GPU: device arrays in device memory, views, NumPy arrays copied in and back,
streams and events, and the launch path of zm.kernel."""
import warnings

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def test_device_arrays_views_and_copies(cuda):
    host = np.arange(20, dtype=np.float32).reshape(4, 5)
    d = cuda.to_device(host)
    assert type(d) is cuda.DeviceNDArray and d.__cuda_array_interface__["shape"] == (4, 5)
    np.testing.assert_array_equal(d.copy_to_host(), host)
    col = d[:, 1]
    assert col.shape == (4,) and not col.is_c_contiguous()
    np.testing.assert_array_equal(col.copy_to_host(), host[:, 1])
    col[:] = -1
    host[:, 1] = -1
    np.testing.assert_array_equal(d.copy_to_host(), host)
    d[2, 3] = 7
    assert d[2, 3] == 7
    np.testing.assert_array_equal(d.reshape(20).copy_to_host()[:5], host.ravel()[:5])
    s = cuda.stream()
    out = d.copy_to_host(stream=s)
    s.synchronize()
    assert out[2, 3] == 7


def test_kernels_on_device_arrays_views_and_numpy(cuda):
    @cuda.jit
    def inc(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += 1
    d = cuda.to_device(np.zeros((4, 4)))
    inc[1, 32](d[1])
    inc[1, 32](d[:, 0])
    expected = np.zeros((4, 4))
    expected[1] += 1
    expected[:, 0] += 1
    np.testing.assert_array_equal(d.copy_to_host(), expected)
    host = np.zeros(64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inc[2, 32](host)
        inc[2, 32](host)
    assert (host == 2).all()
    from zymo.runtime.cuda.launch import HostCopyWarning   # (2 blocks: also low occupancy)
    assert sum(issubclass(w.category, HostCopyWarning) for w in caught) == 1


def test_signatures_convert_scalars_on_the_gpu(cuda):
    @cuda.jit("void(float32[::1], int32)")
    def fill(x, n):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = n / 2
    d = cuda.device_array(8, np.float32)
    fill[1, 8](d, 7)
    np.testing.assert_array_equal(d.copy_to_host(), 3.5)


def test_events_streams_and_device(cuda):
    @cuda.jit
    def k(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = i
    s = cuda.stream()
    d = cuda.device_array(1024)
    start, end = cuda.event(), cuda.event()
    start.record(s)
    k[4, 256, s](d)
    end.record(s)
    end.synchronize()
    assert cuda.event_elapsed_time(start, end) >= 0
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(1024))
    device = cuda.get_current_device()
    assert device.compute_capability >= (7, 0) and device.MULTIPROCESSOR_COUNT > 0
    free, total = cuda.current_context().get_memory_info()
    assert 0 < free <= total
    m = cuda.managed_array(16, np.int32)
    k[1, 16](m)
    cuda.synchronize()
    np.testing.assert_array_equal(m, np.arange(16))
    assert cuda.detect()


def test_the_launch_after_the_first_takes_the_compiled_launcher(cuda):
    @cuda.jit
    def k(x, y):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = x[i] * 2
    x, y = cuda.to_device(np.arange(32.0)), cuda.device_array(32)
    launch = k[1, 32]
    launch(x, y)
    assert launch._fast is not None and launch._fast(x, y) == 0   # the guarded launcher ran
    np.testing.assert_array_equal(y.copy_to_host(), np.arange(32.0) * 2)


def test_zm_kernels_copy_numpy_arrays_on_cuda_too(cuda):
    import zymo as zm

    @zm.kernel
    def add_one(x):
        i = zm.grid(1)
        if i < x.size:
            x[i] += 1.0
    x = np.zeros(40, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        add_one.on("cuda")[1, 64](x)
        add_one.on("cuda").specialize(x).launch("cuda", (1, 1, 1), (64, 1, 1), [x])
    assert (x == 2).all()


def test_zero_dimensional_arrays_stay_zero_dimensional(cuda):
    """A 0-d NumPy array copied in for a launch (or by to_device) is a 0-d GPU array, so that
    `result[()] = v` stores its one element (np.ascontiguousarray would make it 1-d)."""
    import zymo as zm

    @cuda.jit
    def total(result, array):
        result[()] = array[0] + len(array)

    x = np.arange(10, dtype=np.float32)
    r = np.ndarray((), dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        total[1, 1](r, x)
    assert r.shape == () and r[()] == 10.0
    d = cuda.to_device(np.float32(3.5) * np.ones((), np.float32))
    assert d.shape == () and d.copy_to_host()[()] == 3.5
    assert zm.to_device(np.ones((), np.float64)).shape == ()
