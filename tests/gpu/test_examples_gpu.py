"""The examples on the GPU: the same scripts with their kernels launched by CUDA."""
from __future__ import annotations

import pytest

from examples.test_cfd_newton import check_convergence, run_example

pytestmark = pytest.mark.gpu


def test_cfd_newton_converges_quadratically_on_the_gpu():
    check_convergence(run_example(ZYMO_BACKEND="cuda"))
