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


def test_backward_copies_only_what_a_launch_updates_in_place(data, monkeypatch):
    """diffuse only writes dst and reads src: its derivative runs on the tape's copies, with
    no copy made; grow_in_place reads u and writes it: a scratch copy of u as it was. The
    arrays are put back once, at the end, as the program left them."""
    from zymo.runtime import tape as tape_module
    u0, weight, index, w = data
    with zm.Tape() as tape:
        first, out = program("cpu", u0, weight, index, steps=2)
    left = [tape._buffers[m].array.copy() for m in tape._writes]
    assigned, copied = [], []
    assign, copy = tape_module._assign, tape_module._copy
    monkeypatch.setattr(tape_module, "_assign",
                        lambda a, v: (assigned.append(a.shape), assign(a, v)))
    monkeypatch.setattr(tape_module, "_copy", lambda a: (copied.append(a.shape), copy(a))[1])
    tape.backward(out, w)
    kinds = [entry.kernel.__name__ for entry in tape.launches]
    assert [len(e.reread) for e in tape.launches] == [
        {"diffuse": 0, "grow_in_place": 1, "gather_scale": 0}[k] for k in kinds]
    assert len(assigned) == len(tape._writes)
    # the seed's copy, the final state of each written array, a scratch copy per in-place update
    assert len(copied) == 1 + len(tape._writes) + sum(len(e.reread) for e in tape.launches)
    for m, array in zip(tape._writes, left):
        np.testing.assert_array_equal(tape._buffers[m].array, array)
    reference = tape.gradient(first).copy()
    with zm.Tape() as again:
        first2, out2 = program("interp", u0, weight, index, steps=2)
    again.backward(out2, w)
    np.testing.assert_allclose(reference, again.gradient(first2), rtol=1e-12, atol=1e-14)


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


# ---- arrays are identified by memory, not by Python object -------------------------------------
@zm.kernel
def square_into(x, y):
    i = zm.grid(1)
    if i < y.shape[0]:
        y[i] = x[i] * x[i]


@zm.kernel
def scale_into(y, z):
    i = zm.grid(1)
    if i < z.shape[0]:
        z[i] = 3.0 * y[i]


@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_fresh_views_of_one_buffer_chain_the_launches(backend):
    """Launch 1 writes `buf[:8]`, launch 2 reads a fresh `buf[:8]`: one array, so dz/dx flows
    through it; seeds and lookups may be fresh views too."""
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal(8), rng.standard_normal(8)
    buf, z = np.zeros(16), np.zeros(8)
    with zm.Tape() as tape:
        square_into.on(backend)[1, 32](x, buf[:8])
        scale_into.on(backend)[1, 32](buf[:8], z)
    tape.backward([(z[:], w)])
    np.testing.assert_allclose(tape.gradient(x[:]), 6.0 * x * w, rtol=1e-12)
    assert tape.gradient(x) is tape.gradient(x[...])
    assert len(tape.gradients()) == 3     # x, buf[:8], z


def test_ping_pong_over_fresh_views_matches_separate_arrays(data):
    u0, weight, index, w = data
    pair = np.zeros((2, N))
    pair[0] = u0
    with zm.Tape() as tape:
        for step in range(3):
            diffuse[1, 64](pair[step % 2], pair[(step + 1) % 2], 0.2)
            grow_in_place[1, 64](pair[(step + 1) % 2])
        out = np.zeros(len(index))
        gather_scale[1, 64](pair[1], index, weight, out)
    tape.backward(out, w)

    with zm.Tape() as reference:
        first, ref_out = program("cpu", u0, weight, index, steps=3)
    reference.backward(ref_out, w)
    np.testing.assert_allclose(tape.gradient(pair[0]), reference.gradient(first), rtol=1e-12)
    np.testing.assert_allclose(tape.gradient(weight), reference.gradient(weight), rtol=1e-12)


def test_interleaved_views_share_no_memory_and_work():
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal(8), rng.standard_normal(8)
    buf, z = np.zeros(16), np.zeros(8)
    with zm.Tape() as tape:
        square_into[1, 32](x, buf[0::2])
        scale_into[1, 32](buf[1::2], z)     # reads the other half: no path from x to z
        scale_into[1, 32](buf[0::2], buf[1::2])
    tape.backward(buf[1::2], w)
    np.testing.assert_allclose(tape.gradient(x), 6.0 * x * w, rtol=1e-12)


def test_partially_overlapping_views_are_refused_by_name():
    x, buf, z = np.ones(8), np.zeros(16), np.zeros(8)
    with zm.Tape() as tape:
        square_into[1, 32](x, buf[:8])
        with pytest.raises(zm.LaunchError,
                           match=r"argument `y` of launch 2 \(`scale_into`\) shares memory "
                                 r"with argument `y` of launch 1 \(`square_into`\)"):
            scale_into[1, 32](buf[4:12], z)
        with pytest.raises(zm.LaunchError, match="another view"):
            scale_into[1, 32](buf, np.zeros(16))     # the whole buffer, not the view
        with pytest.raises(zm.LaunchError, match="another view"):
            scale_into[1, 32](buf[:8].view(np.int64).view(np.float64)[::-1], z)
    assert len(tape.launches) == 1                   # refused launches are not recorded
    np.testing.assert_array_equal(z, 0)              # nor run
    with pytest.raises(zm.LaunchError, match="shares memory with argument `y` of launch 1"):
        tape.gradient(buf[:4])
    with pytest.raises(zm.LaunchError, match="seeded twice"):
        tape.backward([(buf[:8], np.ones(8)), (buf[0:8], np.ones(8))])


def test_a_launch_whose_values_depend_on_thread_order_is_refused():
    """backward() runs each recorded launch again for its derivative: an atomic slot counter
    would hand out other slots than the recorded launch did."""
    from race_kernels import slots
    cnt = np.zeros(1, np.int32)
    x = np.random.default_rng(0).random(64)
    y = np.zeros(64)
    with pytest.raises(zm.LaunchError, match=r"race_kernels.py:\d+.*cannot record launch 1 "
                                             r"\(slots\).*interleave"):
        with zm.Tape():
            slots[2, 32](cnt, x, y)
    assert cnt[0] == 0   # refused before it ran


def test_the_tapes_derivatives_take_its_register_cap():
    """max_registers as zm.grad takes it: a cap, or "auto", whose choices a later tape (or a
    zm.grad of the kernel with "auto") shares; anything else is refused at once."""
    with zm.Tape(max_registers=128) as capped:
        pass
    assert capped.derivative(diffuse).kernel.max_registers == 128
    first, second = zm.Tape(max_registers="auto"), zm.Tape(max_registers="auto")
    tuner = first.derivative(diffuse).autotune
    assert tuner is not None and second.derivative(diffuse).autotune is tuner
    assert zm.grad(diffuse, max_registers="auto").autotune is tuner
    assert zm.Tape().derivative(diffuse).autotune is None
    for wrong in (300, "fast", 12.5):
        with pytest.raises(TypeError, match="max_registers"):
            zm.Tape(max_registers=wrong)


@pytest.mark.parametrize("max_registers", [None, 96, "auto"])
def test_a_register_cap_leaves_the_cpu_gradient_as_it_is(max_registers):
    rng = np.random.default_rng(5)
    u0, weight = 0.5 * rng.standard_normal(N), rng.standard_normal(N // 2)
    index = rng.integers(0, N, N // 2).astype(np.int32)
    w = rng.standard_normal(N // 2)
    grads = []
    for cap in (None, max_registers):
        with zm.Tape(max_registers=cap) as tape:
            first, out = program("cpu", u0, weight, index)
        tape.backward(out, w)
        grads.append(tape.gradient(first))
    np.testing.assert_array_equal(grads[0], grads[1])
