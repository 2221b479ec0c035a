"""zm.Tape: program-level reverse mode over several launches (ping-pong buffers, in-place
updates, gathers through index arrays), checked against central differences of the whole
program in float64, on the CPU backend and the interpreter."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm

N = 40


@zm.kernel
def diffuse(src, dst, c):
    i = zm.grid(1)
    n = src.shape[0]
    if i < n:
        dst[i] = (src[i] + c * (src[(i + 1) % n] - 2.0 * src[i] + src[(i - 1 + n) % n])
                  + 0.1 * math.sin(src[i]))


@zm.kernel
def grow_in_place(u):
    i = zm.grid(1)
    if i < u.shape[0]:
        u[i] = u[i] + 0.1 * u[i] * u[i]


@zm.kernel
def gather_scale(u, index, weight, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = weight[i] * u[index[i]]


def program(backend, u0, weight, index, steps=4):
    """Time steps over ping-pong buffers, an in-place update each step, then a gather."""
    a, b = u0.copy(), np.zeros_like(u0)
    first = a
    for _ in range(steps):
        diffuse.on(backend)[1, 64](a, b, 0.2)
        a, b = b, a
        grow_in_place.on(backend)[1, 64](a)
    out = np.zeros(len(index))
    gather_scale.on(backend)[1, 64](a, index, weight, out)
    return first, out


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    return (0.5 * rng.standard_normal(N), rng.standard_normal(N // 2),
            rng.integers(0, N, N // 2).astype(np.int32), rng.standard_normal(N // 2))


@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_program_gradient_matches_central_differences(backend, data):
    u0, weight, index, w = data
    with zm.Tape() as tape:
        first, out = program(backend, u0, weight, index)
    final = out.copy()
    tape.backward([(out, w)])
    du0, dweight = tape.gradient(first), tape.gradient(weight)

    def f(u, wt):
        return float(w @ program(backend, u, wt, index)[1])

    rng = np.random.default_rng(5)
    for grad, which in ((du0, 0), (dweight, 1)):
        v = rng.standard_normal(grad.shape)
        h = 1e-6
        args_plus = [u0, weight]
        args_minus = [u0, weight]
        args_plus[which] = args_plus[which] + h * v
        args_minus[which] = args_minus[which] - h * v
        fd = (f(*args_plus) - f(*args_minus)) / (2 * h)
        assert abs(grad @ v - fd) <= 1e-7 * max(1.0, abs(fd)), (which, grad @ v, fd)
    # the primal arrays end as the program left them; the seeded output is consumed
    np.testing.assert_array_equal(out, final)
    assert not tape.gradient(out).any()
    assert [id(a) for a, _ in tape.gradients()][:2] == [id(first), id(tape.launches[0].args[1])]


def test_one_array_seed_and_errors(data):
    u0, weight, index, w = data
    with zm.Tape() as tape:
        first, out = program("cpu", u0, weight, index, steps=1)
        with pytest.raises(zm.LaunchError, match="after the block"):
            tape.backward(out, w)
    with pytest.raises(zm.LaunchError, match="never passed"):
        tape.backward(np.zeros(3), np.ones(3))
    tape.backward(out, w)
    assert tape.gradient(first).any()
    assert len(tape.launches) == 3     # diffuse, grow_in_place, gather_scale
    assert set(tape.launches[0].before) == {1}     # diffuse writes only dst
