"""On the GPU, where threads really interleave: derivatives of kernels whose values depend on
the order of atomics follow the order of their own forward sweep, and derivative launches
whose arguments share memory are right (all-atomic shadow updates) or a LaunchError."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from ad import alias_kernels as A
from ad import race_kernels as R
from ad.test_order_dependent import exact_inputs

pytestmark = pytest.mark.gpu


def host(array) -> np.ndarray:
    return array.copy_to_host()


@pytest.mark.parametrize("dtype", (np.float32, np.float64))
def test_slot_counter_gradient_follows_the_derivatives_own_order(dtype):
    n = 256 * 64
    for seed in range(3):
        x, dy_seed = (a.astype(dtype) for a in exact_inputs(n, seed))
        x_d, y_d = zm.to_device(x), zm.to_device(np.zeros(n, dtype))
        dx_d, dy_d = zm.to_device(np.zeros(n, dtype)), zm.to_device(dy_seed)
        cnt = zm.to_device(np.zeros(1, np.int32))
        zm.grad(R.slots)[64, 256](cnt, zm.Duplicated(x_d, dx_d), zm.Duplicated(y_d, dy_d))
        assert host(cnt)[0] == n, "the derivative's forward sweep runs each atomic once"
        assert not host(dy_d).any(), "the output cotangents are consumed"
        R.check_slots_gradient(host(dx_d), dy_seed, x, host(y_d))


def test_slot_counter_in_a_loop_with_a_scalar_trip_count():
    n, m = 128 * 32, 3
    x, _ = exact_inputs(n, 3)
    dy_seed = np.random.default_rng(4).integers(-1000, 1000, n * m) / 64.0
    x_d, y_d = zm.to_device(x), zm.to_device(np.zeros(n * m))
    dx_d, dy_d = zm.to_device(np.zeros(n)), zm.to_device(dy_seed)
    cnt = zm.to_device(np.zeros(1, np.int32))
    zm.grad(R.slots_loop)[32, 128](cnt, zm.Duplicated(x_d, dx_d), zm.Duplicated(y_d, dy_d), m)
    assert host(cnt)[0] == n * m
    R.check_slots_loop_gradient(host(dx_d), dy_seed, x, host(y_d), m)


def test_a_counter_read_inside_a_loop_is_kept():
    n = 128 * 16
    x = 1.0 + np.arange(n) / n
    x_d, y_d = zm.to_device(x), zm.to_device(np.zeros(n))
    dx_d, dy_d = zm.to_device(np.zeros(n)), zm.to_device(np.ones(n))
    cnt = zm.to_device(np.zeros(1, np.int32))
    zm.grad(R.counter_read_in_loop)[16, 128](cnt, zm.Duplicated(x_d, dx_d),
                                            zm.Duplicated(y_d, dy_d), 1)
    y = host(y_d)
    c = np.rint(y / x - x)
    np.testing.assert_allclose(host(dx_d), 2 * x + c, rtol=1e-12)


def test_forward_mode_runs_each_atomic_once():
    n = 256 * 16
    x, _ = exact_inputs(n, 6)
    tx = np.random.default_rng(6).integers(-50, 50, n) / 8.0
    x_d, y_d = zm.to_device(x), zm.to_device(np.zeros(n))
    tx_d, ty_d = zm.to_device(tx), zm.to_device(np.zeros(n))
    cnt = zm.to_device(np.zeros(1, np.int32))
    zm.jvp(R.slots)[16, 256](cnt, zm.Duplicated(x_d, tx_d), zm.Duplicated(y_d, ty_d))
    assert host(cnt)[0] == n
    owners = R.slot_owners(x, host(y_d))
    assert np.array_equal(host(ty_d), 2 * x[owners] * tx[owners])


DEVICE = (zm.to_device, host)
N = 256 * 48


def test_one_array_and_its_shadow_passed_twice():
    def args(m, s):
        if s is None:
            return [m["x"], m["x"], m["y"]]
        return [zm.Duplicated(m["x"], s["x"]), zm.Duplicated(m["x"], s["x"]),
                zm.Duplicated(m["y"], s["y"])]

    rng = np.random.default_rng(0)
    A.views_check(A.Launch(A.mul, 48, 256), {"x": rng.uniform(0.5, 2, N), "y": np.zeros(N)},
                  args, "cuda", to_device=DEVICE)
    x = rng.uniform(0.5, 2, N)
    x_d, dx_d = zm.to_device(x), zm.to_device(np.zeros(N))
    zm.grad(A.mul)[48, 256](zm.Duplicated(x_d, dx_d), zm.Duplicated(x_d, dx_d),
                            zm.Duplicated(zm.to_device(np.zeros(N)), zm.to_device(np.ones(N))))
    np.testing.assert_array_equal(host(dx_d), 2 * x)


def test_in_place_with_one_shadow():
    def args(m, s):
        if s is None:
            return [m["x"], m["x"]]
        return [zm.Duplicated(m["x"], s["x"]), zm.Duplicated(m["x"], s["x"])]

    x = np.random.default_rng(1).uniform(0.5, 2, N)
    A.views_check(A.Launch(A.square_in_place, 48, 256), {"x": x}, args, "cuda",
                  to_device=DEVICE)


def test_sharing_no_variant_gets_right_is_a_launch_error():
    x = zm.to_device(np.random.default_rng(2).uniform(0.5, 2, 1024))
    dy = zm.to_device(np.ones(1024))
    y = zm.to_device(np.zeros(1024))
    with pytest.raises(zm.LaunchError, match="share array memory"):
        zm.grad(A.mul)[4, 256](zm.Duplicated(x, zm.to_device(np.zeros(1024))),
                               zm.Duplicated(x, zm.to_device(np.zeros(1024))),
                               zm.Duplicated(y, dy))
    with pytest.raises(zm.LaunchError, match="Const"):
        zm.grad(A.mul)[4, 256](zm.Duplicated(x, zm.to_device(np.zeros(1024))), x,
                               zm.Duplicated(y, dy))
    with pytest.raises(zm.LaunchError, match="shares memory with the array"):
        zm.grad(A.mul)[4, 256](zm.Duplicated(x, y), zm.Duplicated(x, y), zm.Duplicated(y, dy))


def test_forward_mode_with_one_array_and_tangent_passed_twice():
    rng = np.random.default_rng(3)
    x, tx = rng.uniform(0.5, 2, N), rng.uniform(0.5, 2, N)
    x_d, tx_d = zm.to_device(x), zm.to_device(tx)
    ty_d = zm.to_device(np.zeros(N))
    zm.jvp(A.mul)[48, 256](zm.Duplicated(x_d, tx_d), zm.Duplicated(x_d, tx_d),
                           zm.Duplicated(zm.to_device(np.zeros(N)), ty_d))
    np.testing.assert_allclose(host(ty_d), 2 * x * tx, rtol=1e-15)
