"""After a loop, its variable holds its last value and names first assigned in its body keep
theirs, as in Python (numba relies on it); a loop that may not run leaves them as they were."""
from __future__ import annotations

import numpy as np
import pytest

from . import loop_exit_kernels as K


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_loop_variables_and_body_names_after_the_loop(backend):
    a = np.zeros((2, 3))
    K.after_loops.on(backend)[1, (2, 3)](a, 5)
    expected = np.full((2, 3), 3.0)
    expected[0, 0] = 4 + 10 * 100
    np.testing.assert_array_equal(a, expected)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_a_loop_variable_reused_by_nested_loops(backend):
    out = np.zeros(4, np.int64)
    K.reused_loop_variable.on(backend)[1, 4](out)
    total = 0
    for j in range(3):
        total += j
    for i in range(2):
        for j in range(1, 4):
            total += j * i
        for j in range(2):
            total += j
    np.testing.assert_array_equal(out, total + j)
