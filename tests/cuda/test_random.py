"""zymo.cuda.random: numba's xoroshiro128+ streams bit for bit (checked against the
algorithm's published definition, written out here with Python integers), on the CPU
backend, the interpreter and through ptxas; and a statistical sanity check."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm
from zymo.backend.nvptx import ptxas
from zymo.cuda import random as zr

MASK = (1 << 64) - 1


# ---- the published definitions (xoroshiro128plus.c, splitmix64.c) ----------------------------
def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & MASK


def step(s):
    s0, s1 = s
    result = (s0 + s1) & MASK
    s1 ^= s0
    return result, (rotl(s0, 55) ^ s1 ^ ((s1 << 14) & MASK), rotl(s1, 36))


def jump(s):
    t = (0, 0)
    for word in (0xBEAC0467EBA5FACB, 0xD86B048B86AA9922):
        for b in range(64):
            if word >> b & 1:
                t = (t[0] ^ s[0], t[1] ^ s[1])
            _, s = step(s)
    return t


def reference_states(n, seed, start=0):
    z = splitmix64(seed)
    s = (z, z)              # numba seeds both words with the one SplitMix64 output
    for _ in range(start):
        s = jump(s)
    states = [s]
    for _ in range(1, n):
        states.append(jump(states[-1]))
    return states


def test_published_values():
    # SplitMix64 from state 0: its first output, as published with the algorithm
    assert splitmix64(0) == 0xE220A8397B1DCDAF
    words = zr.create_xoroshiro128p_states(1, 0)
    assert int(words[0]["s0"]) == int(words[0]["s1"]) == 0xE220A8397B1DCDAF


@pytest.mark.parametrize("seed,start", [(0, 0), (12345, 0), (2**64 - 1, 3), (7, 130)])
def test_states_match_the_definition(seed, start):
    states = zr.create_xoroshiro128p_states(6, seed, subsequence_start=start)
    assert states.dtype == zr.xoroshiro128p_dtype
    want = reference_states(6, seed, start)
    assert [(int(a), int(b)) for a, b in states] == want


@zm.kernel
def draw(states, out32, out64, normal32, normal64, raw):
    i = zm.grid(1)
    if i < out32.shape[0]:
        raw[i] = zr.xoroshiro128p_next(states, i)
        out32[i] = zr.xoroshiro128p_uniform_float32(states, i)
        out64[i] = zr.xoroshiro128p_uniform_float64(states, i)
        normal32[i] = zr.xoroshiro128p_normal_float32(states, i)
        normal64[i] = zr.xoroshiro128p_normal_float64(states, i)


def expected_draws(states):
    raw, u32, u64, n32, n64 = [], [], [], [], []
    for s in states:
        r, s = step(s)
        raw.append(r)
        r, s = step(s)
        u32.append(np.float32((r >> 11) * 2.0 ** -53))
        r, s = step(s)
        u64.append((r >> 11) * 2.0 ** -53)
        pair = []
        for _ in range(4):
            r, s = step(s)
            pair.append(np.float32((r >> 11) * 2.0 ** -53))
        n32.append(np.sqrt(np.float32(-2) * np.log(pair[0])) *
                   np.cos(np.float32(2 * math.pi) * pair[1]))
        n64.append(math.sqrt(-2.0 * float(np.log(pair[2]))) *
                   math.cos(np.float64(2 * math.pi) * np.float64(pair[3])))
    return (np.array(raw, np.uint64), np.array(u32, np.float32), np.array(u64),
            np.array(n32, np.float32), np.array(n64))


@pytest.mark.parametrize("backend", ["cpu", "interp"])
@pytest.mark.parametrize("layout", ["record", "words"])
def test_draws_match_the_definition(backend, layout):
    n = 40
    states = zr.create_xoroshiro128p_states(n, 42)
    if layout == "words":       # the layout of device states: (n, 2) uint64
        states = states.view(np.uint64).reshape(n, 2).copy()
    out = [np.zeros(n, np.float32), np.zeros(n), np.zeros(n, np.float32), np.zeros(n),
           np.zeros(n, np.uint64)]
    draw.on(backend)[2, 32](states, *out)
    raw, u32, u64, n32, n64 = expected_draws(reference_states(n, 42))
    np.testing.assert_array_equal(out[4], raw)
    np.testing.assert_array_equal(out[0], u32)
    np.testing.assert_array_equal(out[1], u64)
    # the normals go through float32 log (and cos): one float32 rounding apart at most
    np.testing.assert_allclose(out[2], n32, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(out[3], n64, rtol=2e-7, atol=1e-7)
    # the states advanced by the seven draws each thread made
    advanced = []
    for s in reference_states(n, 42):
        for _ in range(7):
            _, s = step(s)
        advanced.append(s)
    words = states.view(np.uint64).reshape(n, 2)
    assert [(int(a), int(b)) for a, b in words] == advanced


@zm.kernel
def many(states, per_thread, uniform, normal):
    i = zm.grid(1)
    if i < states.shape[0]:
        for k in range(per_thread):
            uniform[i * per_thread + k] = zr.xoroshiro128p_uniform_float32(states, i)
            normal[i * per_thread + k] = zr.xoroshiro128p_normal_float64(states, i)


def test_statistics():
    threads, per = 256, 200
    states = zr.create_xoroshiro128p_states(threads, 1)
    uniform, normal = np.zeros(threads * per, np.float32), np.zeros(threads * per)
    many[1, threads](states, per, uniform, normal)
    assert 0.0 <= uniform.min() and uniform.max() <= 1.0
    assert abs(uniform.mean() - 0.5) < 0.005 and abs(uniform.var() - 1 / 12) < 0.002
    hist, _ = np.histogram(uniform, bins=10, range=(0, 1))
    assert hist.min() > 0.95 * len(uniform) / 10
    assert abs(normal.mean()) < 0.01 and abs(normal.std() - 1) < 0.01
    assert abs(np.mean(np.abs(normal) < 1) - 0.6827) < 0.005
    # generators are independent: neighbouring threads' streams are uncorrelated
    grid = uniform.reshape(threads, per)
    assert abs(np.corrcoef(grid[:-1].ravel(), grid[1:].ravel())[0, 1]) < 0.01


def test_large_state_arrays_initialize_quickly():
    states = zr.create_xoroshiro128p_states(100_000, 3, subsequence_start=5)
    tail = reference_states(1, 3, 5)[0]
    assert (int(states[0]["s0"]), int(states[0]["s1"])) == tail
    # generator k is generator k-1 jumped once
    assert (int(states[-1]["s0"]), int(states[-1]["s1"])) == \
        jump((int(states[-2]["s0"]), int(states[-2]["s1"])))


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
def test_draws_assemble():
    n = 8
    words = np.zeros((n, 2), np.uint64)
    spec = draw.specialize(words, np.zeros(n, np.float32), np.zeros(n), np.zeros(n, np.float32),
                           np.zeros(n), np.zeros(n, np.uint64))
    for arch in ("sm_80", "sm_90"):
        ptxas.assemble(spec.ptx(arch), arch)
