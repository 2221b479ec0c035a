"""Derivative launches whose arguments share memory: right where the sharing means the same
for arrays and shadows (one array and its shadow passed twice, the same views of both, in
place), a LaunchError naming the arguments everywhere else; never a silent wrong answer."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from ad import alias_kernels as A

BACKENDS = ("interp", "cpu")
N = 32 * 24    # many blocks on the CPU: lost updates between threads would show


def rand(n, seed=0):
    return np.random.default_rng(seed).uniform(0.5, 2.0, n)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_array_and_its_shadow_passed_twice(backend):
    def args(m, s):
        if s is None:
            return [m["x"], m["x"], m["y"]]
        return [zm.Duplicated(m["x"], s["x"]), zm.Duplicated(m["x"], s["x"]),
                zm.Duplicated(m["y"], s["y"])]

    A.views_check(A.Launch(A.mul, 24, 32), {"x": rand(N), "y": np.zeros(N)}, args, backend)
    # and the closed form: d(sum y)/dx = 2x
    x, dx = rand(N, 1), np.zeros(N)
    zm.grad(A.mul).on(backend)[24, 32](zm.Duplicated(x, dx), zm.Duplicated(x, dx),
                                       zm.Duplicated(np.zeros(N), np.ones(N)))
    np.testing.assert_array_equal(dx, 2 * x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_overlapping_views_with_the_same_views_of_the_shadow(backend):
    """a = x[:n], b = x[1:]: thread i adds into dx[i] and dx[i + 1], as thread i + 1 does into
    dx[i + 1]: plain updates would race (lose updates); the launch takes atomic ones."""
    def args(m, s):
        views = [m["x"][:N], m["x"][1:], m["y"]]
        if s is None:
            return views
        return [zm.Duplicated(v, d) for v, d in zip(views, [s["x"][:N], s["x"][1:], s["y"]])]

    A.views_check(A.Launch(A.mul, 24, 32), {"x": rand(N + 1), "y": np.zeros(N)}, args,
                  backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_with_one_shadow(backend):
    def args(m, s):
        if s is None:
            return [m["x"], m["x"]]
        return [zm.Duplicated(m["x"], s["x"]), zm.Duplicated(m["x"], s["x"])]

    A.views_check(A.Launch(A.square_in_place, 24, 32), {"x": rand(N)}, args, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_interleaved_views_are_apart(backend):
    """x[::2] and x[1::2] meet in their byte spans but share no element: no error, and the
    gradient of each is its own."""
    x, dx = rand(2 * N), np.zeros(2 * N)
    y, dy = np.zeros(N), np.ones(N)
    zm.grad(A.mul).on(backend)[24, 32](zm.Duplicated(x[::2], dx[::2]),
                                       zm.Duplicated(x[1::2], dx[1::2]),
                                       zm.Duplicated(y, dy))
    np.testing.assert_array_equal(dx[::2], x[1::2])
    np.testing.assert_array_equal(dx[1::2], x[::2])


def launch_error(kernel, *args, mode="grad"):
    derivative = zm.grad(kernel) if mode == "grad" else zm.jvp(kernel)
    with pytest.raises(zm.LaunchError) as info:
        derivative.on("cpu")[2, 32](*args)
    return str(info.value)


def test_one_array_with_two_shadows_is_an_error():
    x = rand(64)
    text = launch_error(A.mul, zm.Duplicated(x, np.zeros(64)), zm.Duplicated(x, np.zeros(64)),
                        zm.Duplicated(np.zeros(64), np.ones(64)))
    assert "arguments 0 and 1 share array memory" in text and "zm.Duplicated(x, dx)" in text


def test_a_shadow_over_another_arguments_array_is_an_error():
    x, y = rand(64), np.zeros(64)
    text = launch_error(A.mul, zm.Duplicated(x, y), zm.Duplicated(rand(64), np.zeros(64)),
                        zm.Duplicated(y, np.ones(64)))
    assert "the shadow of argument 0 shares memory with the array of argument 2" in text


def test_a_shadow_over_its_own_array_is_an_error():
    x = rand(64)
    text = launch_error(A.mul, zm.Duplicated(x, x), zm.Duplicated(rand(64), np.zeros(64)),
                        zm.Duplicated(np.zeros(64), np.ones(64)))
    assert "the shadow of argument 0 shares memory with the array of argument 0" in text


def test_one_shadow_for_two_arrays_is_an_error():
    d = np.zeros(64)
    text = launch_error(A.mul, zm.Duplicated(rand(64), d), zm.Duplicated(rand(64, 1), d),
                        zm.Duplicated(np.zeros(64), np.ones(64)))
    assert "the shadows of arguments 0 and 1 share memory, but their arrays do not" in text


def test_a_const_over_a_duplicated_array_is_an_error():
    x = rand(64)
    text = launch_error(A.mul, zm.Duplicated(x, np.zeros(64)), x,
                        zm.Duplicated(np.zeros(64), np.ones(64)))
    assert "argument 1 (Const) shares memory with the array of argument 0" in text


def test_a_const_over_a_shadow_is_an_error():
    dx = np.zeros(64)
    text = launch_error(A.mul, zm.Duplicated(rand(64), dx), dx,
                        zm.Duplicated(np.zeros(64), np.ones(64)))
    assert "argument 1 (Const) shares memory with the shadow of argument 0" in text


def test_a_const_the_kernel_never_touches_may_overlap():
    x, dx = rand(64), np.zeros(64)
    zm.grad(A.unused_second).on("cpu")[2, 32](zm.Duplicated(x, dx), x,
                                              zm.Duplicated(np.zeros(64), np.ones(64)))
    np.testing.assert_array_equal(dx, 2 * x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_mode_with_one_array_and_tangent_passed_twice(backend):
    x, tx = rand(N), rand(N, 2)
    y, ty = np.zeros(N), np.zeros(N)
    zm.jvp(A.mul).on(backend)[24, 32](zm.Duplicated(x, tx), zm.Duplicated(x, tx),
                                      zm.Duplicated(y, ty))
    np.testing.assert_allclose(ty, 2 * x * tx, rtol=1e-15)
    x, tx = rand(N, 3), rand(N, 4)
    x0, tx0 = x.copy(), tx.copy()
    zm.jvp(A.square_in_place).on(backend)[24, 32](zm.Duplicated(x, tx), zm.Duplicated(x, tx))
    np.testing.assert_allclose(tx, 2 * x0 * tx0, rtol=1e-15)


def test_forward_mode_sharing_errors():
    x = rand(64)
    text = launch_error(A.mul, zm.Duplicated(x, np.zeros(64)), zm.Duplicated(x, np.ones(64)),
                        zm.Duplicated(np.zeros(64), np.zeros(64)), mode="jvp")
    assert "arguments 0 and 1 share array memory, but their tangents" in text
    y = np.zeros(64)
    text = launch_error(A.mul, zm.Duplicated(x, y), zm.Duplicated(rand(64), np.ones(64)),
                        zm.Duplicated(y, np.zeros(64)), mode="jvp")
    assert "the tangent of argument 0 shares memory with the array of argument 2" in text
    text = launch_error(A.mul, zm.Duplicated(x, np.ones(64)), x,
                        zm.Duplicated(np.zeros(64), np.zeros(64)), mode="jvp")
    assert "argument 1 (Const) shares memory with the array of argument 0" in text


def test_a_shadow_folded_onto_itself_is_an_error():
    dx = np.lib.stride_tricks.as_strided(np.zeros(1), shape=(64,), strides=(0,))
    text = launch_error(A.mul, zm.Duplicated(rand(64), dx), zm.Duplicated(rand(64), np.zeros(64)),
                        zm.Duplicated(np.zeros(64), np.ones(64)))
    assert "the shadow of argument 0 puts several elements in one place" in text
