"""The DG volume right-hand side (bench/enzyme/dg.py): against NumPy, the gate (shared-memory
shadows, barriers, a hot D), the runner's closures on the CPU, the CUDA C version through nvcc."""
import shutil
import subprocess

import numpy as np
import pytest

import zymo as zm
from bench.enzyme import dg
from bench.enzyme.case import GATE


def numpy_volume_rhs(rhs, Q, vgeo, D):
    """The same volume term with whole-array operations, nodes as (k, j, i)."""
    nq = dg.NQ
    shape = (Q.shape[0], nq, nq, nq)
    rho, U, V, W, E = (Q[:, s].reshape(shape) for s in range(5))
    g = [vgeo[:, f].reshape(shape) for f in range(dg.FACTORS)]
    P = dg.GDM1 * (E - 0.5 * (U * U + V * V + W * W) / rho - dg.GRAV * rho * g[dg.Z])
    fluxes = [(U, V, W),
              (U * U / rho + P, U * V / rho, U * W / rho),
              (V * U / rho, V * V / rho + P, V * W / rho),
              (W * U / rho, W * V / rho, W * W / rho + P),
              (U * (E + P) / rho, V * (E + P) / rho, W * (E + P) / rho)]
    out = rhs.copy()
    for s, (fx, fy, fz) in enumerate(fluxes):
        F, G, H = (g[dg.MJ] * (g[a] * fx + g[b] * fy + g[c] * fz)
                   for a, b, c in ((dg.XIX, dg.XIY, dg.XIZ), (dg.ETAX, dg.ETAY, dg.ETAZ),
                                   (dg.ZETAX, dg.ZETAY, dg.ZETAZ)))
        # D^T along each direction: sum over n of D[n, a] f(.. n ..)
        term = (np.einsum("ni,ekjn->ekji", D, F) + np.einsum("nj,ekni->ekji", D, G)
                + np.einsum("nk,enji->ekji", D, H))
        if s == dg.MOM_W:
            term = term - g[dg.MJ] * rho * dg.GRAV
        out[:, s] += (g[dg.MJI] * term).reshape(Q.shape[0], -1)
    return out


def test_lgl_derivative_is_exact_on_quartics():
    x, d = dg.lgl_derivative()
    for p in range(dg.N + 1):
        np.testing.assert_allclose(d @ x ** p, p * x ** max(p - 1, 0) if p else 0 * x,
                                   atol=1e-12)


def test_kernel_matches_numpy():
    host = dg.inputs(3, np.float64, seed=1)
    args = {k: a.copy() for k, a in host.items()}
    dg.volumerhs(zm.f64)[(3,), dg.BLOCK](*[args[k] for k in dg.ORDER])
    expected = numpy_volume_rhs(*(host[k] for k in dg.ORDER))
    np.testing.assert_allclose(args["rhs"], expected, rtol=1e-11, atol=1e-9)
    assert np.abs(expected - host["rhs"]).max() > 1.0      # the term is not negligible


def test_interpreter_agrees_and_sees_no_race():
    host = dg.inputs(2, np.float32, seed=2)
    a = {k: v.copy() for k, v in host.items()}
    b = {k: v.copy() for k, v in host.items()}
    dg.volumerhs(zm.f32).on("cpu")[(2,), dg.BLOCK](*[a[k] for k in dg.ORDER])
    dg.volumerhs(zm.f32).on("interp")[(2,), dg.BLOCK](*[b[k] for k in dg.ORDER])
    np.testing.assert_allclose(a["rhs"], b["rhs"], rtol=1e-5, atol=1e-4)


def test_gate_passes_on_the_cpu():
    gate = dg.CASE.gate("cpu")
    assert gate.ok, gate.detail
    assert gate.dot_error < 1e-12


def test_the_runner_closures_on_the_cpu():
    state = dg.CASE.setup(GATE, "cpu")
    start = state.arrays["rhs"].copy()
    dg.CASE.primal(state)
    after = state.arrays["rhs"].copy()
    state.arrays["rhs"][...] = start
    dg.CASE.primal_as_derivative(state)
    np.testing.assert_array_equal(state.arrays["rhs"], after)
    state.arrays["rhs"][...] = start
    dg.CASE.gradient(state)
    np.testing.assert_allclose(state.arrays["rhs"], after, rtol=1e-6, atol=1e-4)
    # rhs += f(Q, vgeo, D): d<1, rhs>/d rhs_in is 1, and every block reached D's 25 entries
    np.testing.assert_array_equal(state.shadows["rhs"], 1)
    assert np.all(state.shadows["D"] != 0) and np.all(np.isfinite(state.shadows["Q"]))
    assert {"primal", "primal as derivative", "gradient"} <= set(dg.CASE.specializations(state))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_c_compiles_for_sm90(tmp_path):
    source = tmp_path / "dg.cu"
    source.write_text(dg.CUDA_C)
    subprocess.run(["nvcc", "-ptx", "-arch=sm_90", str(source), "-o", str(tmp_path / "d.ptx")],
                   check=True, capture_output=True)
    assert ".entry volume_rhs" in (tmp_path / "d.ptx").read_text()


def test_the_derivative_is_the_same_in_every_process():
    """DG's reverse sweep emits the same IR whatever order Python's sets of ops iterate in (it
    varies between processes: the refilled tiles' recomputation once followed it, and the
    gradient's registers changed from run to run)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    script = (
        "import hashlib, zymo as zm\n"
        "from bench.enzyme import dg\n"
        "from bench.enzyme.case import QUICK\n"
        "from zymo.runtime.grad import activity_of\n"
        "s = dg.setup(QUICK, 'cpu')\n"
        "acts = [zm.Duplicated(s.arrays[k], s.shadows[k]) for k in dg.ORDER]\n"
        "grid, block = s.config\n"
        "spec = s.grad_kernel[grid, block].prepare([activity_of(a) for a in acts]).spec\n"
        "print(hashlib.sha256(spec.ir('ad').encode()).hexdigest())\n")
    root = Path(__file__).resolve().parents[2]
    digests = set()
    for seed in ("1", "2", "3"):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              cwd=root, env={**os.environ, "PYTHONHASHSEED": seed,
                                             "PYTHONPATH": str(root)}, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        digests.add(done.stdout.strip().splitlines()[-1])
    assert len(digests) == 1, digests
