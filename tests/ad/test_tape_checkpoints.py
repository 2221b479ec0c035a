"""zm.Tape(checkpoints=k): the gradients of a checkpointed tape are the full tape's, whatever
the budget (1, 2, 3 states or enough for every launch), for time loops over ping-pong buffers
whose steps are one or two launches and whose length is no power of two; the launches run again
are the fewest the binomial schedule allows; float64 central differences of the whole program
agree; and the tape holds a fraction of the full tape's copies."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm
from zymo.runtime.revolve import optimal_cost


# ---- a heat equation: interior cells only, so each buffer's edges stay as they began -------------
@zm.kernel
def heat(src, dst, c):
    i = zm.grid(1)
    n = src.shape[0]
    if i > 0 and i < n - 1:
        dst[i] = (src[i] + c * (src[i + 1] - 2.0 * src[i] + src[i - 1])
                  + 0.05 * math.sin(src[i]))


@zm.kernel
def source(u, w):
    i = zm.grid(1)
    if i < u.shape[0]:
        u[i] = u[i] + 0.1 * w[i] * u[i] * u[i]


def heat_program(u0, b0, w, steps, backend="cpu", two_kernels=True):
    a, b = u0.copy(), b0.copy()
    first = (a, b)
    for _ in range(steps):
        heat.on(backend)[1, 64](a, b, 0.2)
        a, b = b, a
        if two_kernels:
            source.on(backend)[1, 64](a, w)
    return first, a


# ---- D1Q3 lattice Boltzmann: pull streaming into the other buffer, then BGK collision in place --
@zm.kernel
def stream(f, g):
    i = zm.grid(1)
    n = f.shape[1]
    if i < n:
        g[0, i] = f[0, i]
        g[1, i] = f[1, (i - 1 + n) % n]
        g[2, i] = f[2, (i + 1) % n]


@zm.kernel
def collide(g, omega):
    i = zm.grid(1)
    if i < g.shape[1]:
        rho = g[0, i] + g[1, i] + g[2, i]
        u = (g[1, i] - g[2, i]) / rho
        g[0, i] = g[0, i] - omega * (g[0, i] - 2.0 / 3.0 * rho * (1.0 - 1.5 * u * u))
        g[1, i] = g[1, i] - omega * (g[1, i] - rho / 6.0 * (1.0 + 3.0 * u + 3.0 * u * u))
        g[2, i] = g[2, i] - omega * (g[2, i] - rho / 6.0 * (1.0 - 3.0 * u + 3.0 * u * u))


def lbm_program(f0, steps, backend="cpu"):
    f, g = f0.copy(), np.zeros_like(f0)
    first = f
    for _ in range(steps):
        stream.on(backend)[1, 64](f, g)
        collide.on(backend)[1, 64](g, 1.3)
        f, g = g, f
    return first, f


N = 40


@pytest.fixture
def heat_data():
    rng = np.random.default_rng(11)
    return (0.5 * rng.standard_normal(N), 0.5 * rng.standard_normal(N), rng.standard_normal(N),
            rng.standard_normal(N))


def heat_gradients(data, steps, checkpoints, backend="cpu", two_kernels=True):
    u0, b0, w, g = data
    with zm.Tape(checkpoints=checkpoints) as tape:
        (a, b), out = heat_program(u0, b0, w, steps, backend, two_kernels)
    final = out.copy()
    tape.backward(out, g)
    np.testing.assert_array_equal(out, final)     # the arrays end as the program left them
    return tape, [tape.gradient(a), tape.gradient(b)] + ([tape.gradient(w)] if two_kernels else [])


@pytest.mark.parametrize("two_kernels", [True, False])
def test_heat_gradients_equal_the_full_tape_for_every_budget(heat_data, two_kernels):
    steps = 13                                     # 26 launches with two kernels a step
    full, expected = heat_gradients(heat_data, steps, None, two_kernels=two_kernels)
    assert full.replayed == 0
    launches = len(full.launches)
    assert launches == steps * (2 if two_kernels else 1)
    for k in (1, 2, 3, 5, launches, launches + 7):
        tape, got = heat_gradients(heat_data, steps, k, two_kernels=two_kernels)
        for x, y in zip(got, expected):
            np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-15)
        assert tape.replayed == optimal_cost(launches, k), k
        # after backward a checkpointed tape holds the initial state, the full one every copy
        assert tape.nbytes == tape.state_nbytes == 2 * N * 8
    assert full.nbytes == launches * N * 8
    # the edges of the second buffer are read by every other step and never written
    assert expected[1][0] != 0.0 and expected[1][-1] != 0.0


def test_the_binomial_counts_for_the_heat_loop(heat_data):
    """26 launches: one state replays 25 + 24 + ... + 1; two states, C(2 + t, 2) >= 26 at t = 6
    so 6 * 26 - C(3 + 5, 3) = 100; three, C(3 + 4, 3) = 35 >= 26 at t = 4:
    4 * 26 - C(4 + 3, 4) = 69; 26 states: one sweep, 25."""
    for k, count in ((1, 325), (2, 100), (3, 69), (26, 25)):
        tape, _ = heat_gradients(heat_data, 13, k)
        assert tape.replayed == count == optimal_cost(26, k)


def test_lbm_two_kernels_a_step_equals_the_full_tape():
    rng = np.random.default_rng(4)
    f0 = np.array([2 / 3, 1 / 6, 1 / 6])[:, None] * (1 + 0.1 * rng.standard_normal((3, N)))
    g = rng.standard_normal((3, N))
    steps = 11
    results = {}
    for k in (None, 1, 2, 3, 2 * steps):
        with zm.Tape(checkpoints=k) as tape:
            first, out = lbm_program(f0, steps)
        tape.backward(out, g)
        results[k] = tape.gradient(first), tape
    expected, full = results[None]
    for k in (1, 2, 3, 2 * steps):
        gradient, tape = results[k]
        np.testing.assert_allclose(gradient, expected, rtol=1e-13, atol=1e-15)
        assert tape.replayed == optimal_cost(2 * steps, k)
    # the full tape copied each launch's output, 22 of them, and the final state at backward;
    # reversing collide, which updates g in place, takes a scratch copy of g. Three states
    # hold the initial f and g and two kept states of both
    state = 2 * f0.nbytes
    assert full.state_nbytes == results[3][1].state_nbytes == state
    assert full.peak_nbytes == 2 * steps * f0.nbytes + state + f0.nbytes
    assert results[3][1].peak_nbytes <= 4 * state
    assert results[1][1].peak_nbytes == 2 * state


@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_checkpointed_gradient_matches_central_differences(heat_data, backend):
    u0, b0, w, g = heat_data
    steps = 5
    tape, (du, db, dw) = heat_gradients(heat_data, steps, 2, backend)
    assert tape.replayed == optimal_cost(2 * steps, 2)

    def f(u, b, wt):
        return float(g @ heat_program(u, b, wt, steps, backend)[1])

    rng = np.random.default_rng(5)
    args = [u0, b0, w]
    for grad, which in ((du, 0), (db, 1), (dw, 2)):
        v = rng.standard_normal(N)
        h = 1e-6
        plus, minus = list(args), list(args)
        plus[which] = args[which] + h * v
        minus[which] = args[which] - h * v
        fd = (f(*plus) - f(*minus)) / (2 * h)
        assert abs(grad @ v - fd) <= 1e-7 * max(1.0, abs(fd)), (which, grad @ v, fd)


def test_a_bad_budget_is_refused():
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="number of program states"):
            zm.Tape(checkpoints=bad)
