"""The Enzyme suite's XSBench and RSBench ports on the CPU: the primals against NumPy
transcriptions, the correctness gates (float64 finite differences and the dot-product test),
the runner end to end on gate-sized instances, and the CUDA C primals compiled by nvcc."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import zymo as zm
from bench.enzyme import montecarlo as mc
from bench.enzyme import rsbench, run, xsbench
from bench.enzyme.case import GATE, QUICK


def test_lookup_streams_match_the_kernels_generator():
    """The host LCG's draws (skip-ahead included) are in range and spread over the materials;
    that they are the kernels' draws is what the primal tests below check (their NumPy
    references use these streams)."""
    energies, mats = mc.lookup_streams(64)
    assert np.all((0 <= energies) & (energies < 1)) and len(set(energies)) == 64
    assert set(mats) <= set(range(12))
    shares = np.bincount(mats, minlength=12) / 64
    assert shares[0] > 0.02   # fuel takes what the other materials leave


@pytest.mark.parametrize("grid_type", [0, 1])
def test_xsbench_primal_matches_numpy(grid_type):
    s = xsbench.setup(GATE, "cpu", grid_type, build=False)
    xsbench.xs_lookup[s.blocks, s.block](*s.primal_args)
    expected = xsbench.reference(s.host, s.n_lookups, grid_type)
    np.testing.assert_allclose(s.out, expected, rtol=1e-12, atol=1e-12)
    assert np.count_nonzero(expected) > expected.size // 2


def test_rsbench_primal_matches_numpy():
    s = rsbench.setup(GATE, "cpu", build=False)
    rsbench.rs_lookup[s.blocks, s.block](*s.primal_args)
    expected = rsbench.reference(s.host, s.n_lookups)
    np.testing.assert_allclose(s.out, expected, rtol=1e-10, atol=1e-10)


def test_faddeeva_approximation_is_close_to_w():
    """RSBench's W approximation against the Faddeeva function in the upper half plane, where
    the Abrarov-Quine series is meant for (w's Taylor series there, its asymptotic expansion
    beyond |z| = 6), and W(0) = 1. (RSBench evaluates it at E - pole, below the real axis,
    where the series is looser; the benchmark keeps it as the original does.)"""
    import cmath
    import math

    def w_taylor(z):   # w(z) = sum_n (iz)^n / Gamma(n/2 + 1)
        return sum((1j * z) ** n / math.gamma(n / 2 + 1) for n in range(160))

    def w_asymptotic(z):   # i / (sqrt(pi) z) sum_k (2k-1)!! / (2 z^2)^k
        return 1j / (math.sqrt(math.pi) * z) * sum(
            math.prod(range(1, 2 * k, 2)) / (2 * z * z) ** k for k in range(6))

    for z in (0.5 + 0.5j, 2 + 0.1j, 0.3 + 1j, -1.2 + 0.4j):
        assert abs(rsbench.faddeeva_reference(z) - w_taylor(z)) < 2e-4 * abs(w_taylor(z))
    for z in (7 + 1j, 5 + 4j, -6.5 + 0.2j):
        exact = w_asymptotic(z)
        assert abs(rsbench.faddeeva_reference(z) - exact) < 1e-5 * abs(exact)
    assert cmath.isclose(rsbench.faddeeva_reference(1e-9 + 0j), 1.0, rel_tol=1e-6)


def test_gates_pass_on_the_cpu():
    for module in (xsbench, rsbench):
        gate = module.gate("cpu")
        assert gate.ok, gate
        assert gate.fd_error < 1e-5 and gate.dot_error < 1e-8


def test_xsbench_gradient_is_the_interpolation_weights():
    """d(sum of channel 0)/d(a cross section of a grid point) is the sum, over the lookups that
    interpolate at that point, of concentration x interpolation weight: checked against NumPy
    for every point of every nuclide."""
    s = xsbench.setup(GATE, "cpu", build=False)
    h, n_gp = s.host, xsbench.SIZES[GATE][1]
    d_grid = np.zeros_like(h["grid"])
    seed = np.zeros((s.n_lookups, 5))
    seed[:, 0] = 1.0
    zm.grad(xsbench.xs_lookup)[s.blocks, s.block](
        *s.scalars, *s.consts, zm.Duplicated(h["grid"].copy(), d_grid), *s.tail,
        zm.Duplicated(np.zeros((s.n_lookups, 5)), seed))
    expected = np.zeros(h["grid"].shape[0])
    energies, mats = mc.lookup_streams(s.n_lookups)
    n_iso = h["index"].size // h["union"].size
    for e, m in zip(energies, mats):
        u = max(np.searchsorted(h["union"], e, side="right") - 1, 0)
        for j in range(h["num_nucs"][m]):
            nuc = h["mats"][m, j]
            low = min(h["index"][u * n_iso + nuc], n_gp - 2)
            lo = nuc * n_gp + low
            f = (h["grid"][lo + 1, 0] - e) / (h["grid"][lo + 1, 0] - h["grid"][lo, 0])
            expected[lo] += h["concs"][m, j] * f
            expected[lo + 1] += h["concs"][m, j] * (1 - f)
    np.testing.assert_allclose(d_grid[:, 1], expected, rtol=1e-10, atol=1e-12)
    assert np.all(d_grid[:, 2:] == 0)


def test_runner_end_to_end_on_the_cpu(tmp_path, monkeypatch):
    """Gates, CPU timings and the table, on gate-sized instances; a module that is not there
    is a row that says so."""
    monkeypatch.setitem(xsbench.SIZES, QUICK, xsbench.SIZES[GATE])
    monkeypatch.setitem(rsbench.SIZES, QUICK, rsbench.SIZES[GATE])
    monkeypatch.setattr(run, "APPS", run.APPS + ("absent_app",))
    monkeypatch.setattr(run, "CPU_ROUNDS", 1)
    output = tmp_path / "enzyme.md"
    status = run.main(["--apps", "xsbench,rsbench,absent_app", "--device", "cpu",
                       "--scale", "quick", "--output", str(output)])
    text = output.read_text()
    assert status == 0   # a module not present is reported, not an error
    assert "| absent_app |" in text and "module not present" in text
    for name in ("XSBench", "RSBench"):
        line = next(l for l in text.splitlines() if l.startswith(f"| {name} |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[-1] == "ok", line
        assert float(cells[2]) > 0 and float(cells[4]) > 0 and cells[5].endswith("x")


def test_runner_takes_auto_register_caps(tmp_path, monkeypatch):
    """`--grad-registers auto`: zm.grad's "auto" for the gradients (nothing to time on the
    CPU), the primal-as-derivative at the largest candidate, the header saying so; other
    values refused."""
    from bench.enzyme import harness
    monkeypatch.setitem(xsbench.SIZES, QUICK, xsbench.SIZES[GATE])
    monkeypatch.setattr(run, "CPU_ROUNDS", 1)
    monkeypatch.setattr(harness, "GRAD_REGISTERS", harness.GRAD_REGISTERS)
    output = tmp_path / "enzyme.md"
    assert run.main(["--apps", "xsbench", "--device", "cpu", "--scale", "quick",
                     "--grad-registers", "auto", "--output", str(output)]) == 0
    text = output.read_text()
    assert "register caps picked among 255/168/128 by timing" in text
    assert harness.GRADIENTS and all(g.autotune is not None for g in harness.GRADIENTS)
    uncapped = zm.kernel(harness.GRADIENTS[0].kernel.py_func)
    assert harness.as_derivative(uncapped).max_registers == 255
    for bad in ("fast", "8"):
        with pytest.raises(SystemExit):
            run.main(["--grad-registers", bad])
    from zymo.runtime.autotune import Tuning
    record = Tuning("grad(k)(dup array<f64, 1>) [plain]", (4, 1, 1), (32, 1, 1), 168,
                    {255: 200, 168: 168}, {128: "at most 256 threads per block"},
                    {255: 2.5, 168: 1.25})
    text = run.table([{"app": "K", "tuning": [record.summary()]}], QUICK, "cuda", "GPU")
    assert ("- K: register cap chosen: grad(k)(dup array<f64, 1>) [plain] grid (4, 1, 1) "
            "block (32, 1, 1): chose 168; 255: 2.500 ms (200 registers), 168: 1.250 ms "
            "(168 registers); 128 not timed: at most 256 threads per block") in text


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("module", [xsbench, rsbench], ids=["xsbench", "rsbench"])
def test_cuda_c_primals_compile(module, tmp_path):
    source = tmp_path / "primal.cu"
    source.write_text(module.CUDA_C)
    result = subprocess.run(["nvcc", "-ptx", "-arch=sm_90", "-std=c++17", str(source), "-o",
                             str(tmp_path / "primal.ptx")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    ptx = (tmp_path / "primal.ptx").read_text()
    assert ".entry" in ptx and ("xs_lookup" in ptx or "rs_lookup" in ptx)
