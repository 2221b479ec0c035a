"""LULESH's material update (bench/enzyme/lulesh.py): the gate, the runner's closures on the CPU,
properties of the port, and the CUDA C version through nvcc."""
import shutil
import subprocess

import numpy as np
import pytest

from bench.enzyme import lulesh as L
from bench.enzyme.case import GATE


def _run(kernel, host, backend="cpu"):
    arrays = {k: a.copy() for k, a in host.items()}
    grid, block = L._config(host["e"].size)
    kernel.on(backend)[grid, block](*[arrays[k] for k in L.ORDER], *L.CONSTANTS)
    return arrays


def test_gate_passes_on_the_cpu():
    gate = L.CASE.gate("cpu")
    assert gate.ok, gate.detail
    assert gate.fd_error < 1e-7 and gate.dot_error < 1e-12


def test_regions_follow_lulesh_cost_one_balance_one():
    order, ends = L.regions(5000, np.random.default_rng(0))
    assert sorted(order.tolist()) == list(range(5000))
    assert ends[-1] == 5000 and np.all(np.diff(ends) > 0)
    sizes = np.diff(np.concatenate([[0], ends]))
    assert sizes.min() > 5000 / L.REGIONS / 2     # balance 1: every region about as large


def test_repetitions_restart_from_the_loaded_state():
    """Every repetition starts from the same loads: the result is that of one."""
    host = L.inputs(6, seed=5)
    once = dict(host, reps=np.ones_like(host["reps"]))
    a, b = _run(L.eos, host), _run(L.eos, once)
    for k in ("e", "p", "q", "ss", "v"):
        np.testing.assert_array_equal(a[k], b[k])


def test_cpu_build_matches_the_interpreter():
    host = L.inputs(5, seed=2)
    a, b = _run(L.eos, host, "cpu"), _run(L.eos, host, "interp")
    for k in ("e", "p", "q", "ss", "v"):
        np.testing.assert_allclose(a[k], b[k], rtol=1e-13, atol=1e-15)
    # both viscosity branches and the in-place update happened
    assert np.any(host["delv"] > 0) and np.any(host["delv"] <= 0)
    assert not np.allclose(a["e"], host["e"])


def test_energy_matches_a_hand_evaluation():
    """One compressing element through the predictor-corrector, written out in NumPy."""
    host = L.inputs(3, seed=4)
    out = _run(L.eos, host)
    z = int(np.flatnonzero(host["delv"] <= 0)[0])
    e0, p0, q0, qq, ql, dv, vn = (host[k][z] for k in ("e", "p", "q", "qq", "ql", "delv", "vnew"))
    comp, half = 1 / vn - 1, 1 / (vn - dv / 2) - 1

    def press(e, c):
        return 2 / 3 * (c + 1), 2 / 3, 2 / 3 * (c + 1) * e

    def speed(pb, e, vv, b, p):
        return np.sqrt((pb * e + vv * b * p) / L.RHO0)

    e = e0 - 0.5 * dv * (p0 + q0)
    b, pb, ph = press(e, half)
    qn = speed(pb, e, 1 / (1 + half) ** 2, b, ph) * ql + qq
    e = e + 0.5 * dv * (3 * (p0 + q0) - 4 * (ph + qn))
    b, pb, pn = press(e, comp)
    qt = speed(pb, e, vn * vn, b, pn) * ql + qq
    e = e - (7 * (p0 + q0) - 8 * (ph + qn) + (pn + qt)) * dv / 6
    b, pb, pn = press(e, comp)
    qn = speed(pb, e, vn * vn, b, pn) * ql + qq
    np.testing.assert_allclose([out["e"][z], out["p"][z], out["q"][z], out["ss"][z]],
                               [e, pn, qn, speed(pb, e, vn * vn, b, pn)], rtol=1e-13)


def test_the_runner_closures_on_the_cpu():
    state = L.CASE.setup(GATE, "cpu")
    start = {k: a.copy() for k, a in state.arrays.items()}

    def restart():
        for k, a in start.items():
            state.arrays[k][...] = a

    L.CASE.primal(state)
    after = {k: a.copy() for k, a in state.arrays.items()}
    assert not np.array_equal(after["e"], start["e"])
    for run in (L.CASE.primal_as_derivative, L.CASE.gradient):
        restart()
        run(state)
        for k in ("e", "p", "q", "ss", "v"):
            np.testing.assert_allclose(state.arrays[k], after[k], rtol=1e-15, err_msg=k)
    assert np.all(np.isfinite(state.shadows["e"])) and np.any(state.shadows["delv"] != 0)
    assert L.CASE.tape_bytes(state) >= 0
    assert {"primal", "primal as derivative", "gradient"} <= set(L.CASE.specializations(state))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_c_compiles_for_sm90(tmp_path):
    source = tmp_path / "lulesh.cu"
    source.write_text(L.CUDA_C)
    subprocess.run(["nvcc", "-ptx", "-arch=sm_90", str(source), "-o", str(tmp_path / "l.ptx")],
                   check=True, capture_output=True)
    assert ".entry eos" in (tmp_path / "l.ptx").read_text()



def test_the_paper_s_activity():
    """The second row (the paper's build: d e_out seeded; qq, ql, delv, ss constant) passes
    its gate; zymo refuses p and q as constants (their stored values depend on e and are read
    back through an index it cannot prove injective), so they are duplicated, unseeded; the
    runner lists both rows for the module."""
    import zymo as zm
    from bench.enzyme import run
    gate = L.PAPER_CASE.gate("cpu")
    assert gate.ok, gate.detail
    state = L.PAPER_CASE.setup(GATE, "cpu")
    assert set(state.shadows) == {"e", "p", "q"} and not state.shadows["p"].any()
    seed = state.shadows["e"].copy()
    L.PAPER_CASE.gradient(state)
    assert not np.array_equal(state.shadows["e"], seed) and state.shadows["p"].any()
    with pytest.raises(zm.CompileError, match="array `p` is Const but stores values"):
        L.gate("cpu", ("e",))
    assert [case for _, case, _ in run.load(["lulesh"])] == [L.CASE, L.PAPER_CASE]


def test_reseed_puts_back_what_a_gradient_consumed():
    """A gradient zeroes the seed of ss (a store's adjoint reads and clears it): reseed puts
    the seeds back, so that each timed gradient does one gradient's work."""
    state = L.CASE.setup(GATE, "cpu")
    seeds = {k: state.shadows[k].copy() for k in L.SEEDED}
    L.CASE.gradient(state)
    assert not state.shadows["ss"].any()
    L.CASE.reseed(state)
    for k in L.SEEDED:
        np.testing.assert_array_equal(state.shadows[k], seeds[k])
