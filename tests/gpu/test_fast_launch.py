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
    launch(np.float32(3), dx, 1.0, True, cy)          # a CuPy array: its own guarded table
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



@zm.kernel
def scale2d(x, y, a):
    i, j = zm.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        y[i, j] = a * x[i, j]


@zm.kernel
def shift(x, y):
    i = zm.grid(1)
    if i < y.shape[0]:
        y[i] = x[i] + 1


def _library_arrays(library):
    """(make(host array) -> device array, to_numpy, transpose) for CuPy or PyTorch."""
    if library == "cupy":
        cupy = pytest.importorskip("cupy")
        return cupy.asarray, cupy.asnumpy, lambda a: a.T
    torch = pytest.importorskip("torch")
    return (lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda(),
            lambda t: t.cpu().numpy(), lambda t: t.t())


@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_foreign_arrays_take_the_guarded_launcher_and_follow_their_layout(library):
    make, back, transpose = _library_arrays(library)
    host = np.arange(12 * 10, dtype=np.float32).reshape(12, 10)
    x, y = make(host), make(np.zeros((12, 10), np.float32))
    launch = scale2d[(1, 1), (16, 16)]
    launch(x, y, np.float32(2))
    fast = launch._fast
    assert fast is not None                          # the next launches skip the general path
    for k in range(3):
        launch(x, y, np.float32(k))
        np.testing.assert_array_equal(back(y), k * host)
    assert launch._fast.func is fast.func and launch._fast.args == fast.args   # same table
    xt, yt = transpose(x), make(np.zeros((10, 12), np.float32))   # another layout: a miss
    launch(xt, yt, np.float32(3))
    np.testing.assert_array_equal(back(yt), 3 * host.T)
    launch(x, y, np.float32(5))                      # and back
    np.testing.assert_array_equal(back(y), 5 * host)


def test_a_tensor_repointed_or_restrided_in_place_is_read_anew():
    torch = pytest.importorskip("torch")
    x, y = torch.ones(64, device="cuda"), torch.zeros(64, device="cuda")
    launch = shift[1, 128]
    launch(x, y)
    fast = launch._fast
    assert fast is not None
    other = torch.zeros(64, device="cuda")
    y.set_(other)                                    # the same object, other memory
    launch(x, y)
    assert launch._fast is fast                      # same layout: the guarded launcher
    np.testing.assert_array_equal(other.cpu().numpy(), 2)
    tail = torch.zeros(64, device="cuda")
    y.set_(tail.untyped_storage(), 0, (32,), (2,))   # every other element of `tail`
    launch(x, y)                                     # strided now: another plan
    expected = np.zeros(64, np.float32)
    expected[::2] = 2
    np.testing.assert_array_equal(tail.cpu().numpy(), expected)


@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_overlapping_foreign_arguments_run_the_build_without_noalias(library):
    make, back, _ = _library_arrays(library)
    data = make(np.arange(65, dtype=np.float32))
    launch = shift[1, 128]
    launch(data[:64], make(np.zeros(64, np.float32)))   # apart: the noalias build
    assert launch._fast is not None
    launch(data[:64], data[1:])                      # overlapping: the aliased build
    # data[i + 1] = data[i] + 1 holds before and after each write, in any order
    np.testing.assert_array_equal(back(data), np.arange(65, dtype=np.float32))


def _jax_gpu():
    import os
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # leave memory to others
    jax = pytest.importorskip("jax")
    try:
        return jax, jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX sees no GPU")


def test_jax_arrays_take_the_guarded_launcher_once_read():
    from zymo.runtime.cuda import launch as cuda_launch
    from zymo.runtime.cuda import native
    jax, gpu = _jax_gpu()
    host = np.arange(12 * 10, dtype=np.float32).reshape(12, 10)
    x, y = jax.device_put(host, gpu), zm.to_device(np.zeros((12, 10), np.float32))
    launch = scale2d[(1, 1), (16, 16)]
    launch(x, y, np.float32(2))                      # the general path leaves x's words on it
    np.testing.assert_array_equal(y.copy_to_host(), 2 * host)
    fast = launch._fast
    assert fast is not None and hasattr(x, cuda_launch.JAX_MEMO)
    assert fast(x, y, np.float32(3)) == 0            # read and launched by the compiled launcher
    np.testing.assert_array_equal(y.copy_to_host(), 3 * host)
    # computed by JAX, asynchronously: not read yet, so a miss, and the general path waits
    # for JAX before launching
    z = jax.jit(lambda a: jax.numpy.tanh(a @ a.T @ a) * 0 + 4 * a)(x)
    assert fast(z, y, np.float32(1)) == native.GUARD_MISS
    launch(z, y, np.float32(1))
    np.testing.assert_array_equal(y.copy_to_host(), 4 * host)
    for k in range(3):
        launch(z, y, np.float32(k))
        np.testing.assert_array_equal(y.copy_to_host(), 4 * k * host)
    assert launch._fast.func is fast.func and launch._fast.args == fast.args   # same table
    out = jax.device_put(np.zeros((12, 10), np.float32), gpu)
    launch(x, out, np.float32(5))                    # an output is written in place, as before
    launch(x, out, np.float32(5))
    np.testing.assert_array_equal(np.asarray(jax.device_put(out, jax.devices("cpu")[0])),
                                  5 * host)
    z.delete()                                       # deleted (or donated): a miss, then
    assert fast(z, y, np.float32(1)) == native.GUARD_MISS   # the general path's error
    with pytest.raises(Exception, match="deleted|donated"):
        launch(z, y, np.float32(1))


def test_jax_arrays_on_another_gpu_are_refused_with_a_hint():
    jax, _ = _jax_gpu()
    gpus = jax.devices("gpu")
    if len(gpus) < 2:
        pytest.skip("one GPU")
    x = jax.device_put(np.ones((4, 4), np.float32), gpus[1])
    with pytest.raises(zm.LaunchError, match="on GPU 1 passed to a launch on GPU 0"):
        scale2d[(1, 1), (16, 16)](x, zm.to_device(np.zeros((4, 4), np.float32)),
                                  np.float32(1))
