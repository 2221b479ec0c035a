"""numba's host API without a GPU: device arrays in host memory, streams, events, devices."""
import numpy as np
import pytest

from zymo import cuda


def test_to_device_and_copy_to_host():
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = cuda.to_device(host)
    assert isinstance(d, cuda.DeviceNDArray) and cuda.is_cuda_array(d)
    assert (d.shape, d.dtype, d.size, d.ndim, d.strides) == ((3, 4), np.float32, 12, 2, (16, 4))
    host[0, 0] = 99     # a copy, not a view
    back = d.copy_to_host()
    assert type(back) is np.ndarray and back[0, 0] == 0
    out = np.empty((3, 4), np.float32)
    assert d.copy_to_host(out) is out and (out == back).all()
    with pytest.raises(ValueError):
        d.copy_to_host(np.empty(3))
    np.testing.assert_array_equal(np.asarray(d), back)
    target = cuda.device_array((3, 4), np.float32)
    cuda.to_device(host, to=target)
    assert target.copy_to_host()[0, 0] == 99
    s = cuda.stream()
    d2 = cuda.to_device(host, stream=s)
    s.synchronize()
    assert d2.copy_to_host(stream=s)[0, 0] == 99


def test_views_setitem_reshape_ravel_split():
    d = cuda.to_device(np.arange(10.0))
    view = d[2:8:2]
    assert view.shape == (3,) and not view.is_c_contiguous()
    view[:] = -1
    np.testing.assert_array_equal(d.copy_to_host(), [0, 1, -1, 3, -1, 5, -1, 7, 8, 9])
    d[0] = 42
    assert d[0] == 42
    m = d.reshape(2, 5)
    assert m.shape == (2, 5) and m.is_c_contiguous() and m.ravel().shape == (10,)
    parts = d.split(4)
    assert [p.shape for p in parts] == [(4,), (4,), (2,)]
    d.copy_to_device(np.zeros(10))
    assert d.copy_to_host().sum() == 0
    with pytest.raises(ValueError):
        d.copy_to_device(np.zeros(3))


def test_kernels_write_views_in_place():
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


def test_device_array_like_keeps_layout_and_device_array_takes_strides():
    f = np.asfortranarray(np.ones((3, 4)))
    d = cuda.device_array_like(f)
    assert d.is_f_contiguous() and d.shape == (3, 4) and d.dtype == np.float64
    s = cuda.device_array((2, 3), np.int32, strides=(16, 4))
    assert s.strides == (16, 4) and s.shape == (2, 3)
    assert cuda.device_array(5).dtype == np.float64
    assert cuda.device_array(4, dtype=cuda.float32).dtype == np.float32


def test_pinned_mapped_managed():
    p = cuda.pinned_array((2, 3), np.float32)
    assert p.shape == (2, 3) and p.dtype == np.float32 and isinstance(p, np.ndarray)
    assert cuda.pinned_array_like(p).shape == (2, 3)
    m = cuda.mapped_array(8, np.int32)
    g = cuda.managed_array(8, np.int32)

    @cuda.jit
    def fill(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = i
    for a in (m, g):
        fill[1, 8](a)
        cuda.synchronize()
        np.testing.assert_array_equal(np.asarray(a), np.arange(8))
    host = np.zeros(8, np.int32)
    with cuda.pinned(host):
        d = cuda.to_device(host)
    with cuda.mapped(host) as dev:
        fill[1, 8](dev)
    np.testing.assert_array_equal(host, np.arange(8))
    assert d.size == 8


def test_streams_events_and_devices():
    s = cuda.stream()
    with s.auto_synchronize():
        d = cuda.to_device(np.ones(3), stream=s)
    assert cuda.default_stream() is not None and cuda.per_thread_default_stream() is not None
    assert int(cuda.external_stream(0)) == 0
    start, end = cuda.event(), cuda.event(timing=True)
    start.record()
    d.copy_to_host()
    end.record(s)
    end.synchronize()
    end.wait(s)
    assert start.elapsed_time(end) >= 0 and cuda.event_elapsed_time(start, end) >= 0
    assert end.query()
    device = cuda.get_current_device()
    assert device.id == 0 and isinstance(device.name, str) and len(device.compute_capability) == 2
    assert device.MAX_THREADS_PER_BLOCK >= 1024 and device.WARP_SIZE == 32
    assert cuda.select_device(0) == device and len(cuda.gpus) >= 1
    assert cuda.list_devices()[0] == device
    with cuda.gpus[0]:
        pass
    free, total = cuda.current_context().get_memory_info()
    assert 0 < free <= total
    cuda.synchronize()
    cuda.close()


def test_without_a_gpu_the_api_says_so_and_still_works(capsys):
    if cuda.is_available():
        pytest.skip("a GPU is present")
    assert cuda.detect() is False
    assert "CPU backend" in capsys.readouterr().out


def test_cuda_array_interface_functions():
    d = cuda.device_array(4)
    assert cuda.as_cuda_array(d) is d and cuda.is_device_array(d)
    assert not cuda.is_cuda_array(np.zeros(3))
    with pytest.raises(TypeError):
        cuda.as_cuda_array(np.zeros(3))


def test_testing_helpers():
    from zymo.cuda import testing
    from zymo.cuda.tests.support import captured_stdout
    assert testing.cc_X_or_above(6, 0)
    with captured_stdout() as out:
        print("hidden")
    assert out.getvalue() == "hidden\n"

    @testing.skip_unless_cudasim("simulator only")
    def never():
        pass
    assert getattr(never, "__unittest_skip__", False)

    @testing.skip_on_cudasim("no sim")
    @testing.skip_if_cudadevrt_missing
    @testing.skip_unless_cc_60
    def runs():
        pass
    assert not getattr(runs, "__unittest_skip__", False)


PRICES = cuda.to_device(np.array([10.0, 25.0, 5.0], dtype=np.float32))


@cuda.jit
def _priced(quantities, totals):
    i = cuda.grid(1)
    if i < totals.size:
        totals[i] = quantities[i] * PRICES[i]


def test_a_module_level_device_array_is_read_by_reference():
    q, t = cuda.to_device(np.ones(3, np.float32)), cuda.device_array(3, np.float32)
    _priced[1, 32](q, t)
    np.testing.assert_array_equal(t.copy_to_host(), [10, 25, 5])
    PRICES[:] = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    _priced[1, 32](q, t)
    np.testing.assert_array_equal(t.copy_to_host(), [1, 2, 3])


def test_library_results_are_device_arrays():
    from zymo.cuda.random import create_xoroshiro128p_states
    from zymo.cuda import vectorize

    states = create_xoroshiro128p_states(4, seed=1)
    assert cuda.is_device_array(states) and states.copy_to_host().shape[0] == 4

    @vectorize(["float64(float64, float64)"], target="cuda")
    def mul(a, b):
        return a * b

    got = mul(cuda.to_device(np.arange(4.0)), 2.0)
    assert cuda.is_device_array(got)
    np.testing.assert_array_equal(got.copy_to_host(), np.arange(4.0) * 2)
    assert isinstance(mul(np.arange(4.0), 2.0), np.ndarray)
