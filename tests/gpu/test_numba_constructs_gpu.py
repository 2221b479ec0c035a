"""On a GPU: captured device arrays are passed by reference (numba's global semantics: writes
made after the kernel compiled are seen), tuple and namedtuple arguments with device arrays,
zymo.cuda's random streams, vectorize, guvectorize and reduce."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import zymo as zm
from zymo.cuda import guvectorize, random as zr, reduce, vectorize

pytestmark = pytest.mark.gpu
Pair = namedtuple("Pair", "a b")


def test_captured_device_array_by_reference():
    table = zm.to_device(np.arange(5, dtype=np.float32))

    @zm.kernel
    def read_table(out):
        i = zm.grid(1)
        if i < out.shape[0]:
            out[i] = table[i]

    out = zm.device_array(5, np.float32)
    read_table[1, 32](out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(5))
    table.copy_from_host(np.full(5, 7.0, np.float32))   # seen by the compiled kernel
    read_table[1, 32](out)
    np.testing.assert_array_equal(out.copy_to_host(), np.full(5, 7.0))


def test_namedtuple_of_device_arrays():
    @zm.kernel
    def add(p, out):
        i = zm.grid(1)
        if i < out.shape[0]:
            out[i] = p.a[i] + p[1][i]

    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    out = zm.device_array(8, np.float32)
    add[1, 32](Pair(zm.to_device(a), zm.to_device(b)), out)
    np.testing.assert_array_equal(out.copy_to_host(), a + b)


@vectorize(["float64(float64, float64)"], target="cuda")
def hypot(a, b):
    return (a * a + b * b) ** 0.5


@guvectorize(["void(float64[:], float64, float64[:])"], "(n),()->(n)", target="cuda")
def scaled(v, s, out):
    for i in range(v.shape[0]):
        out[i] = v[i] * s


@reduce
def add(a, b):
    return a + b


def test_vectorize_and_reduce():
    x = np.linspace(0, 1, 1000).reshape(10, 100)
    got = hypot(zm.to_device(x), 2.0)
    np.testing.assert_allclose(got.copy_to_host(), np.hypot(x, 2), rtol=1e-15)
    np.testing.assert_allclose(scaled(zm.to_device(x), 3.0).copy_to_host(), x * 3)
    flat = x.ravel()
    assert np.isclose(add(zm.to_device(flat)), flat.sum(), rtol=1e-12)
    res = zm.to_device(np.zeros(1))
    add(zm.to_device(flat), res=res, init=1.0)
    assert np.isclose(res.copy_to_host()[0], flat.sum() + 1, rtol=1e-12)


@zm.kernel
def draw(states, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = zr.xoroshiro128p_uniform_float64(states, i)


def test_random_streams_match_the_cpu():
    states = zr.create_xoroshiro128p_states(64, 9)
    assert states.shape == (64, 2)                  # device states: (n, 2) uint64
    host = np.zeros(64, zr.xoroshiro128p_dtype)
    zr.init_xoroshiro128p_states(host, 9)
    out, want = zm.device_array(64, np.float64), np.zeros(64)
    draw[1, 64](states, out)
    draw[1, 64](host, want)
    np.testing.assert_array_equal(out.copy_to_host(), want)
