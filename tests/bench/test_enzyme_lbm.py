"""The multi-step LBM (bench/enzyme/lbm.py): steps against NumPy, conservation, the taped gate,
the runner's closures on the CPU and the CUDA C version through nvcc."""
import shutil
import subprocess

import numpy as np
import pytest

import zymo as zm
from bench.enzyme import lbm as M
from bench.enzyme.case import GATE


def numpy_step(f, flags=None, omega=M.OMEGA):
    """Pull streaming and BGK, written with whole-array NumPy operations."""
    c = np.array(M._C)
    pulled = np.stack([np.roll(f[q], shift=(c[q, 2], c[q, 1], c[q, 0]), axis=(0, 1, 2))
                       for q in range(19)])
    rho = pulled.sum(0)
    u = [np.tensordot(c[:, k].astype(float), pulled, 1) / rho for k in range(3)]
    if flags is not None:
        for k in range(3):
            u[k] = np.where(flags == M.ACCEL, M.LID[k], u[k])
    usq = 1.5 * (u[0] ** 2 + u[1] ** 2 + u[2] ** 2)
    out = np.empty_like(f)
    for q in range(19):
        cu = 3.0 * (c[q, 0] * u[0] + c[q, 1] * u[1] + c[q, 2] * u[2])
        feq = M.WQ[q].astype(float) * rho * (1 + cu + 0.5 * cu * cu - usq)
        out[q] = pulled[q] - omega * (pulled[q] - feq)
    if flags is not None:
        wall = flags == M.OBSTACLE
        out[:, wall] = pulled[M.OPPOSITE][:, wall]
    return out


def test_periodic_step_matches_numpy():
    shape = (4, 5, 6)
    f = M.initial(shape, np.float64, seed=1)
    g = np.zeros_like(f)
    M.periodic_step(zm.f64)[M._config(shape)](f, g, M.OMEGA)
    np.testing.assert_allclose(g, numpy_step(f), rtol=1e-12, atol=1e-15)


def test_cavity_steps_match_numpy_and_keep_the_mass():
    shape = (5, 6, 7)
    flags = M.cavity_flags(shape)
    assert (flags == M.ACCEL).sum() == 2 * 4 * 5 and (flags == M.FLUID).sum() == 2 * 4 * 5
    f = M.initial(shape, np.float64, seed=2)
    out = M.run_steps(M.cavity_step(zm.f64), f.copy(), np.zeros_like(f), flags, 3,
                      M._config(shape))
    expected = f
    for _ in range(3):
        expected = numpy_step(expected, flags)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-15)
    # bounce-back and BGK move mass but never create it: the closed box keeps its total (to
    # the rounding of the float32 lattice weights, which sum to 1 within 4e-8)
    np.testing.assert_allclose(out.sum(), f.sum(), rtol=1e-7)


def test_single_precision_step_is_the_grad_overhead_model():
    shape = (3, 4, 8)
    f = M.initial(shape, np.float32, seed=3)
    g = np.zeros_like(f)
    M.lbm_step[M._config(shape)](f, g, np.float32(M.OMEGA))
    np.testing.assert_allclose(g, numpy_step(f.astype(np.float64)), rtol=2e-5, atol=1e-7)


def test_gate_passes_on_the_cpu():
    gate = M.CASE.gate("cpu")
    assert gate.ok, gate.detail
    assert gate.fd_error < 1e-8 and gate.dot_error < 1e-12


def test_the_runner_closures_on_the_cpu():
    state = M.CASE.setup(GATE, "cpu")
    start = state.f.copy()
    M.CASE.primal(state)
    after = state.f.copy()                  # an even number of steps ends in f
    assert state.steps % 2 == 0 and not np.array_equal(after, start)
    state.f[...] = start
    M.CASE.primal_as_derivative(state)
    np.testing.assert_array_equal(state.f, after)
    state.f[...] = start
    M.CASE.gradient(state)
    np.testing.assert_array_equal(state.f, after)   # the tape leaves the final state
    assert M.CASE.tape_bytes(state) == state.steps * start.nbytes
    assert np.all(np.isfinite(state.gradient_of_f)) and np.any(state.gradient_of_f != 0)
    assert {"primal", "primal as derivative"} <= set(M.CASE.specializations(state))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_c_compiles_for_sm90(tmp_path):
    source = tmp_path / "lbm.cu"
    source.write_text(M.CUDA_C)
    subprocess.run(["nvcc", "-ptx", "-arch=sm_90", str(source), "-o", str(tmp_path / "l.ptx")],
                   check=True, capture_output=True)
    assert ".entry cavity" in (tmp_path / "l.ptx").read_text()
