"""Hessian-vector products on the GPU: `zm.hvp` of the kernels of tests/ad/test_hvp.py with
device arrays against the CPU backend's, and against central differences of the GPU gradient;
the differentiable corpus's HVPs against the interpreter's."""
from __future__ import annotations

import numpy as np
import pytest

from ad.test_hvp import CASES, finite_difference, hessian_times, random_direction, random_point

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_hvp_on_gpu_matches_the_cpu_backend(case):
    spec, seeds, rng = random_point(case)
    direction = random_direction(spec, rng)
    on_cpu = hessian_times(case, spec, seeds, direction, "cpu")
    on_gpu = hessian_times(case, spec, seeds, direction, "cuda")
    for k in direction:
        np.testing.assert_allclose(on_gpu[k], on_cpu[k], rtol=1e-11, atol=1e-13,
                                   err_msg=f"{case.name}: argument {k}")


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_hvp_on_gpu_matches_differences_of_the_gradient(case):
    spec, seeds, rng = random_point(case, seed=3)
    direction = random_direction(spec, rng)
    exact = hessian_times(case, spec, seeds, direction, "cuda")
    fd = finite_difference(case, spec, seeds, direction, "cuda")
    for k in direction:
        np.testing.assert_allclose(exact[k], fd[k], rtol=1e-6,
                                   atol=1e-7 * max(1.0, float(np.max(np.abs(fd[k])))))
