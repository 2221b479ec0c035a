"""examples/cfd_newton.py: run as a user would, its Newton iterations converge quadratically;
its kernels assemble the residual and Jacobian that NumPy's Roe flux and complex steps give
(bench/cfd/reference.py), and lower to PTX that ptxas accepts."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from zymo.backend.nvptx import ptxas

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cfd_newton.py"
sys.path.insert(0, str(ROOT))   # bench/, as the example finds it
from bench.cfd import reference  # noqa: E402


def run_example(**env_extra) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env_extra)
    done = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True,
                          env=env, timeout=600, cwd=Path(__file__).parent)
    assert done.returncode == 0, done.stderr
    return done.stdout


def check_convergence(stdout: str) -> None:
    steps = [[float(x) for x in line.split("|R|")[1].split()]
             for line in stdout.splitlines() if line.startswith("step")]
    assert len(steps) >= 3
    for norms in steps:
        assert norms[-1] < 1e-10 and len(norms) <= 7, norms
        # quadratic: each residual about the square of the one before, until round-off
        for before, after in zip(norms, norms[1:]):
            assert after < 1e-13 or after <= 10 * before ** 2, norms
    error = float(re.search(r"max relative error (\S+)", stdout).group(1))
    assert error < 1e-7


def test_example_converges_quadratically_as_a_user_runs_it():
    check_convergence(run_example())


# ---- the kernels against bench/cfd/reference.py ------------------------------------------------
@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("cfd_newton", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def moving_states(n: int, seed: int = 4) -> np.ndarray:
    """Conservative states with every velocity component away from 0 (|x| has a kink there)."""
    rng = np.random.default_rng(seed)
    W = np.empty((n, 5))
    W[:, 0] = rng.uniform(0.5, 1.5, n)
    W[:, 1:4] = rng.uniform(0.1, 0.6, (n, 3)) * rng.choice([-1.0, 1.0], (n, 3))
    W[:, 4] = rng.uniform(0.5, 1.5, n)
    return reference.prim_to_cons(W)


def faces(Q):
    """The states left and right of the n + 1 faces; past the ends, the boundary cell."""
    padded = np.concatenate([Q[:1], Q, Q[-1:]])
    return padded[:-1], padded[1:]


def test_residual_is_the_numpy_roe_flux_balance(example):
    Q, Q_old = moving_states(7), moving_states(7, seed=5)
    QL, QR = faces(Q)
    F = reference.roe_flux_cons(QL, QR, np.tile([1.0, 0.0, 0.0], (len(QL), 1)))
    expected = 3.0 * (Q - Q_old) + F[1:] - F[:-1]
    np.testing.assert_allclose(example.assemble_residual(Q, Q_old, 3.0), expected,
                               rtol=1e-13, atol=1e-13)


def test_jacobian_is_the_complex_step_jacobian(example):
    n = 7
    Q = moving_states(n)
    QL, QR = faces(Q)
    _, JL, JR = reference.complex_step_jacobians(QL, QR, np.tile([1.0, 0.0, 0.0], (n + 1, 1)))
    # R_i = dx/dt Q_i + F(face i + 1) - F(face i); cell c is left of face c + 1, right of face c
    expected = np.zeros((n, 5, n, 5))
    for i in range(n):
        expected[i, :, i, :] += 3.0 * np.eye(5)
        for face, sign in ((i + 1, 1.0), (i, -1.0)):
            left, right = max(face - 1, 0), min(face, n - 1)
            expected[i, :, left, :] += sign * JL[face]
            expected[i, :, right, :] += sign * JR[face]
    np.testing.assert_allclose(example.assemble_jacobian(Q, 3.0),
                               expected.reshape(5 * n, 5 * n), rtol=1e-11, atol=1e-11)


needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")


@needs_ptxas
def test_kernels_assemble_for_the_gpu(example):
    Q = np.zeros((4, 5))
    for spec in (example.residual.specialize(Q, Q, 1.0, Q),
                 example.jacobian.specialize(Q, 1.0, np.zeros((4, 3, 5, 5)))):
        assert ptxas.assemble(spec.ptx("sm_90"), "sm_90").registers > 0
