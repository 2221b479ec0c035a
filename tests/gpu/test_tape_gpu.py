"""zm.Tape on the GPU: the program of tests/ad/test_tape.py on zm.DeviceArrays (the tape's
copies and shadows stay in GPU memory) gives the CPU backend's gradients."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from ad.test_tape import N, diffuse, gather_scale, grow_in_place

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
