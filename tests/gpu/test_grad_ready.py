"""Warm `zm.grad` launches on the GPU reuse the launch `prepare` made for the same words
(GradLaunch._read): the same gradients as a fresh derivative, a new preparation whenever what
it decided from changes (arrays that overlap, an integer argument, the grid), none when only a
float scalar or the pointers of arrays apart do, and derivatives specialized once per kernel,
not per `zm.grad` object."""
from __future__ import annotations

import time

import numpy as np
import pytest

import zymo as zm

pytestmark = pytest.mark.gpu


@zm.kernel
def scaled_square(x, y, a, n):
    i = zm.grid(1)
    if i < n:
        y[i] = a * x[i] * x[i]


def expected(x, seed, a, n):
    out = np.zeros_like(x)
    out[:n] = 2 * a * x[:n] * seed[:n]
    return out


def launch(dk, x, y, dx, dy, a, n, grid=4):
    dk[grid, 64](zm.Duplicated(x, dx), zm.Duplicated(y, dy), a, n)


def test_warm_launches_reuse_the_preparation_and_stay_exact():
    rng = np.random.default_rng(0)
    x_host = rng.standard_normal(256)
    seed = rng.standard_normal(256)
    x, y = zm.to_device(x_host), zm.device_array(256, np.float64)
    dx, dy = zm.to_device(np.zeros(256)), zm.to_device(seed)
    dk = zm.grad(scaled_square)
    dk.ready.clear()
    for a in (0.5, 1.5, -2.0):               # a float scalar: the same preparation
        dx.copy_from_host(np.zeros(256))
        dy.copy_from_host(seed)
        launch(dk, x, y, dx, dy, a, 256)
        np.testing.assert_allclose(dx.copy_to_host(), expected(x_host, seed, a, 256),
                                   rtol=1e-14)
        np.testing.assert_array_equal(dy.copy_to_host(), 0.0)   # consumed
    assert len(dk.ready) == 1
    # an integer argument decides (launch conditions, tape sizes): a new preparation
    dx.copy_from_host(np.zeros(256))
    dy.copy_from_host(seed)
    launch(dk, x, y, dx, dy, 1.0, 100)
    np.testing.assert_allclose(dx.copy_to_host(), expected(x_host, seed, 1.0, 100), rtol=1e-14)
    assert len(dk.ready) == 2
    other = zm.to_device(seed)                # another pointer, apart: the same preparation
    dx.copy_from_host(np.zeros(256))
    launch(dk, x, y, dx, other, 1.0, 100)
    np.testing.assert_allclose(dx.copy_to_host(), expected(x_host, seed, 1.0, 100), rtol=1e-14)
    assert len(dk.ready) == 2
    # a second zm.grad object shares the specializations and the preparations
    again = zm.grad(scaled_square)
    assert again.ready is dk.ready and again._specs is dk._specs


def test_overlapping_arguments_are_not_taken_from_a_disjoint_preparation():
    """x and y the same array: the derivative must take the aliased variant, although a launch
    with the same types and distinct arrays was prepared before."""
    rng = np.random.default_rng(1)
    x_host = rng.standard_normal(256)
    seed = rng.standard_normal(256)
    dk = zm.grad(scaled_square)
    x, y = zm.to_device(x_host), zm.device_array(256, np.float64)
    launch(dk, x, y, zm.to_device(np.zeros(256)), zm.to_device(seed), 1.0, 256)
    # in place: y is x, and its shadow too. The CPU backend's gradient is the reference
    both, shadow = zm.to_device(x_host), zm.to_device(seed)
    for _ in range(2):   # the second launch runs the first one's preparation
        both.copy_from_host(x_host)
        shadow.copy_from_host(seed)
        launch(dk, both, both, shadow, shadow, 1.0, 256)
    # the aliased launch's preparation is kept for its own pointers (key, pointers), x's is y's
    assert sum(len(key) == 2 and key[1][0] == key[1][2] for key in dk.ready) == 1
    cpu_x, cpu_shadow = x_host.copy(), seed.copy()
    zm.grad(scaled_square.on("cpu"))[4, 64](zm.Duplicated(cpu_x, cpu_shadow),
                                            zm.Duplicated(cpu_x, cpu_shadow), 1.0, 256)
    np.testing.assert_allclose(shadow.copy_to_host(), cpu_shadow, rtol=1e-14)


def test_a_warm_derivative_launch_costs_about_a_kernel_launch():
    x, y = zm.to_device(np.ones(1 << 10)), zm.device_array(1 << 10, np.float64)
    dx, dy = zm.to_device(np.zeros(1 << 10)), zm.to_device(np.ones(1 << 10))
    dk = zm.grad(scaled_square)
    launch(dk, x, y, dx, dy, 1.0, 1 << 10, grid=16)
    zm.synchronize()
    count = 300
    start = time.perf_counter()
    for _ in range(count):
        launch(dk, x, y, dx, dy, 1.0, 1 << 10, grid=16)
    zm.synchronize()
    per_launch = (time.perf_counter() - start) / count
    print(f"warm zm.grad launch: {per_launch * 1e6:.1f} us")
    assert per_launch < 60e-6
