"""Array variables that hold different arrays on different paths: each statement using one is
lowered once per candidate array under a test of the run-time index, so every memory op still
names one array (the alias analysis, the race detector and the derivatives stay precise)."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from zymo.backend.nvptx import ptxas
from zymo.diagnostics import CompileError

from . import choice_kernels as K

BACKENDS = ("interp", "cpu")


def _ping_pong_reference(start, steps):
    x = start.copy()
    for _ in range(steps):
        y = x.copy()
        y[1:-1] = 0.5 * x[1:-1] + 0.25 * (x[:-2] + x[2:])
        x = y
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("steps", [1, 4, 7])
def test_buffers_swapped_in_a_loop(backend, steps):
    start = np.random.default_rng(steps).random(50)
    a, b = start.copy(), start.copy()
    K.ping_pong.on(backend)[1, 64](a, b, steps)
    last = b if steps % 2 else a
    np.testing.assert_allclose(last, _ping_pong_reference(start, steps), rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("which", [0, 1, 2])
def test_one_of_three_arrays_loaded_stored_and_updated_atomically(backend, which):
    arrays = [np.full(20, float(k + 1)) for k in range(3)]
    out = np.zeros(20)
    K.three_way.on(backend)[1, 32](*arrays, out, which)
    np.testing.assert_array_equal(out, np.full(20, 2.0 * (which + 1)))
    for k, array in enumerate(arrays):
        np.testing.assert_array_equal(array, np.full(20, k + 1.0 + (k == which)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_through_a_chosen_array(backend):
    rng = np.random.default_rng(3)
    for first in (True, False):
        report = zm.check_grad(K.scaled_pick, 1, 32,
                               zm.Duplicated(rng.random(32), np.zeros(32)),
                               zm.Duplicated(rng.random(32), np.zeros(32)),
                               zm.Duplicated(np.zeros(32), rng.random(32)), zm.Active(1.5),
                               first, backend=backend)
        assert report.ok, str(report)


def test_arrays_of_different_types_are_an_error_naming_the_variable():
    with pytest.raises(CompileError, match="'src' holds arrays of different types") as caught:
        K.mixed_types.specialize(np.zeros(4), np.zeros(4, np.float32), np.zeros(4), True)
    assert "choice_kernels.py:" in str(caught.value)


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
def test_ptx_of_a_swapped_buffer_loop_assembles():
    a = np.zeros(16)
    ptxas.assemble(K.ping_pong.specialize(a, a.copy(), 3).ptx("sm_90"), "sm_90")
