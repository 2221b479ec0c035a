"""round(x, n) with n known only at run time: the same algorithm as a literal n (scale by
10**n in float64, round half to even, scale back), on the CPU backend and the interpreter,
and through ptxas for CUDA."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import zymo as zm
from zymo.backend.nvptx import ptxas

from reference_check import BACKENDS

DIGITS = list(range(-6, 8)) + [23, 30, 320, 400, -320, -400]
VALUES = [0.5425, 2.5, -2.5, 0.125, 123456.789, -0.0, 3.0e-7, np.inf, -np.inf, np.nan, 7.0]


@zm.kernel
def round_to(out, x, n):
    out[0] = round(x, n)


def launch(backend, x, n, dtype):
    k = round_to if backend == "cpu" else round_to.on("interp")
    out = np.zeros(1, dtype)
    k[1, 1](out, dtype(x), np.int32(n))
    return out[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_float64_matches_python(backend):
    for x, n in itertools.product(VALUES, DIGITS):
        got, want = launch(backend, x, n, np.float64), round(x, n)
        if np.isnan(want):
            assert np.isnan(got)
        else:   # Python rounds correctly; the scaled algorithm is within an ulp of it
            assert got == pytest.approx(want, rel=2 ** -52, abs=0.0), (x, n)
            assert np.signbit(got) == np.signbit(want), (x, n)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_and_integers(backend):
    for x, n in itertools.product([0.5425, 2.5, -1234.5678, 1e30], range(-3, 5)):
        got = launch(backend, x, n, np.float32)
        assert got == pytest.approx(np.float32(round(float(np.float32(x)), n)), rel=1e-6)
    for x, n in itertools.product([0, 7, 15, -15, 12345, -12355], range(-5, 3)):
        assert launch(backend, x, n, np.int64) == round(x, n), (x, n)


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
def test_round_digits_assemble():
    for t in (zm.f32, zm.f64):
        spec = round_to.specialize(zm.Array(t, 1), t, zm.i32)
        for arch in ("sm_80", "sm_90"):
            assert ptxas.assemble(spec.ptx(arch), arch).registers > 0
