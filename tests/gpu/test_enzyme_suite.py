"""The Enzyme suite's LULESH, DG and LBM ports on the GPU: each gate (float64 FD and the
dot-product test), and each primal against our CUDA C version (NVRTC through CuPy)."""
import pytest

from bench.enzyme import dg, lbm, lulesh
from bench.enzyme.case import GATE, QUICK

pytestmark = pytest.mark.gpu
CASES = [lulesh.CASE, dg.CASE, lbm.CASE]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gate_on_the_gpu(case):
    gate = case.gate("cuda")
    assert gate.ok, gate.detail


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_primal_agrees_with_cuda_c(case):
    pytest.importorskip("cupy")
    for scale in (GATE, QUICK):
        state = case.setup(scale, "cuda")
        # float64 LULESH to rounding; float32 DG and LBM to float32 rounding of sums
        assert case.cuda_c_check(state) < (1e-12 if case is lulesh.CASE else 2e-5), scale


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_closures_run_on_the_gpu(case):
    pytest.importorskip("cupy")
    state = case.setup(QUICK, "cuda")
    case.primal(state)
    case.primal_as_derivative(state)
    case.gradient(state)
    assert case.tape_bytes(state) >= 0
    assert "primal" in case.specializations(state)
