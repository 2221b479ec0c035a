"""zm.Tape on the GPU: the program of tests/ad/test_tape.py on zm.DeviceArrays (the tape's
copies and shadows stay in GPU memory) gives the CPU backend's gradients; GPU arrays are
identified by their memory, as NumPy arrays are."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from ad.test_tape import N, diffuse, gather_scale, grow_in_place, scale_into, square_into

pytestmark = pytest.mark.gpu


def gpu_program(u0, weight, index, steps=4):
    a, b = zm.to_device(u0), zm.device_array(u0.shape, u0.dtype)
    first = a
    for _ in range(steps):
        diffuse[1, 64](a, b, 0.2)
        a, b = b, a
        grow_in_place[1, 64](a)
    out = zm.device_array(len(index), np.float64)
    gather_scale[1, 64](a, zm.to_device(index), weight, out)
    return first, out


def test_tape_on_device_arrays_matches_the_cpu():
    rng = np.random.default_rng(3)
    u0, weight = 0.5 * rng.standard_normal(N), rng.standard_normal(N // 2)
    index = rng.integers(0, N, N // 2).astype(np.int32)
    w = rng.standard_normal(N // 2)
    d_weight = zm.to_device(weight)
    with zm.Tape() as tape:
        first, out = gpu_program(u0, d_weight, index)
    tape.backward({out: zm.to_device(w)})          # DeviceArrays are hashable: a dict works
    got = tape.gradient(first).copy_to_host(), tape.gradient(d_weight).copy_to_host()

    from ad.test_tape import program
    with zm.Tape() as cpu_tape:
        cpu_first, cpu_out = program("cpu", u0, weight, index)
    cpu_tape.backward(cpu_out, w)
    np.testing.assert_allclose(got[0], cpu_tape.gradient(cpu_first), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[1], cpu_tape.gradient(weight), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out.copy_to_host(), cpu_out, rtol=1e-12)


# ---- GPU arrays by memory -----------------------------------------------------------------------
class HandMadeView:
    """Part of a DeviceArray's memory, shown through __cuda_array_interface__ alone, as a
    library the tape does not know might hand it over."""

    def __init__(self, base, count: int):
        self.base, self.count = base, count

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": (self.count,), "typestr": self.base.dtype.str,
                "data": (self.base.data, False), "strides": None, "version": 3, "stream": 1}


def test_device_arrays_are_identified_by_memory():
    """DeviceArray cannot be sliced, so its views come from other libraries (below); here the
    keys are the arrays' memory: seeds and lookups by the recorded arrays, and a copy with
    equal contents is not the same array."""
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal(8), rng.standard_normal(8)
    d_x, d_y, d_z = zm.to_device(x), zm.device_array(8, np.float64), \
        zm.device_array(8, np.float64)
    with zm.Tape() as tape:
        square_into[1, 32](d_x, d_y)
        scale_into[1, 32](d_y, d_z)
    tape.backward({d_z: zm.to_device(w)})
    np.testing.assert_allclose(tape.gradient(d_x).copy_to_host(), 6.0 * x * w, rtol=1e-12)
    assert [id(a) for a, _ in tape.gradients()] == [id(d_x), id(d_y), id(d_z)]
    with pytest.raises(zm.LaunchError, match="never passed"):
        tape.gradient(zm.to_device(x))


def test_a_gpu_array_the_tape_cannot_copy_is_refused():
    d_buf = zm.device_array(16, np.float64)
    with zm.Tape() as tape:
        with pytest.raises(zm.LaunchError, match="HandMadeView; the tape records"):
            square_into[1, 32](zm.to_device(np.ones(8)), HandMadeView(d_buf, 8))
    assert not tape.launches


@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_fresh_views_of_gpu_memory_chain_the_launches(library):
    """Launch 1 writes `buf[:8]`, launch 2 reads a fresh `buf[:8]` (CuPy or PyTorch views of
    GPU memory); another view of part of it is refused."""
    lib = pytest.importorskip(library)
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal(8), rng.standard_normal(8)

    def on_gpu(values):
        return lib.asarray(values) if library == "cupy" else lib.tensor(values, device="cuda")

    def to_host(array):
        return lib.asnumpy(array) if library == "cupy" else array.cpu().numpy()

    d_x, buf, d_z = on_gpu(x), on_gpu(np.zeros(16)), on_gpu(np.zeros(8))
    with zm.Tape() as tape:
        square_into[1, 32](d_x, buf[:8])
        scale_into[1, 32](buf[:8], d_z)
        with pytest.raises(zm.LaunchError, match="shares memory with argument `y` of launch 1"):
            scale_into[1, 32](buf[4:12], on_gpu(np.zeros(8)))
    assert len(tape.launches) == 2
    tape.backward([(d_z[:], on_gpu(w))])
    np.testing.assert_allclose(to_host(tape.gradient(d_x[:])), 6.0 * x * w, rtol=1e-12)
    np.testing.assert_allclose(to_host(buf[:8]), x * x, rtol=1e-12)


# ---- checkpointed tapes keep and restore states in GPU memory ----------------------------------
@pytest.mark.parametrize("checkpoints", [1, 3])
def test_checkpointed_tape_on_device_arrays_matches_the_cpu(checkpoints):
    from ad.test_tape_checkpoints import heat, source
    from zymo.runtime.revolve import optimal_cost
    rng = np.random.default_rng(11)
    u0, b0, w, g = (rng.standard_normal(N) for _ in range(4))
    steps = 7

    def loop(a, b, wt):
        for _ in range(steps):
            heat[1, 64](a, b, 0.2)
            a, b = b, a
            source[1, 64](a, wt)
        return a

    d_a, d_b, d_w = zm.to_device(u0), zm.to_device(b0), zm.to_device(w)
    with zm.Tape(checkpoints=checkpoints) as tape:
        d_out = loop(d_a, d_b, d_w)
    final = d_out.copy_to_host()
    tape.backward(d_out, zm.to_device(g))
    assert tape.replayed == optimal_cost(2 * steps, checkpoints)
    a, b = u0.copy(), b0.copy()
    with zm.Tape() as cpu_tape:
        out = loop(a, b, w)
    cpu_tape.backward(out, g)
    for gpu, cpu in ((d_a, a), (d_b, b), (d_w, w)):
        np.testing.assert_allclose(tape.gradient(gpu).copy_to_host(), cpu_tape.gradient(cpu),
                                   rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(d_out.copy_to_host(), final)


def test_a_tuned_tape_gives_the_same_gradients_and_keeps_its_choice():
    """zm.Tape(max_registers="auto"): each derivative's cap timed at its first launch (on
    scratch copies), the gradients those of the default tape, and a second tape reuses the
    choice without timing again."""
    rng = np.random.default_rng(4)
    u0, weight = 0.5 * rng.standard_normal(N), rng.standard_normal(N // 2)
    index = rng.integers(0, N, N // 2).astype(np.int32)
    w = rng.standard_normal(N // 2)
    found = []
    for cap in (None, "auto", "auto"):
        d_weight = zm.to_device(weight)
        with zm.Tape(max_registers=cap) as tape:
            first, out = gpu_program(u0, d_weight, index)
        tape.backward({out: zm.to_device(w)})
        found.append((tape.gradient(first).copy_to_host(), tape.gradient(d_weight).copy_to_host(),
                      tape))
    for got in found[1:]:
        np.testing.assert_allclose(got[0], found[0][0], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(got[1], found[0][1], rtol=1e-12, atol=1e-14)
    tuning = found[1][2].derivative(diffuse).tuning
    assert tuning and all(record.chosen in (255, 168, 128) for record in tuning.values())
    assert found[2][2].derivative(diffuse).tuning == tuning   # kept, not timed again


def test_the_reverse_sweep_prepares_each_derivative_once():
    """The tape hands each derivative launch fresh copies (new pointers at every step): one
    preparation serves them all, since the arrays are apart in every launch."""
    rng = np.random.default_rng(6)
    u0, weight = 0.5 * rng.standard_normal(N), rng.standard_normal(N // 2)
    index = rng.integers(0, N, N // 2).astype(np.int32)
    d_weight = zm.to_device(weight)
    with zm.Tape() as tape:
        first, out = gpu_program(u0, d_weight, index, steps=6)
    derivative = tape.derivative(diffuse)
    derivative.ready.clear()
    tape.backward({out: zm.to_device(rng.standard_normal(N // 2))})
    assert len(derivative.ready) == 1
