"""The Enzyme suite's XSBench and RSBench ports on the GPU: each gate (float64 FD and the
dot-product test, on the GPU), each primal against our CUDA C version (NVRTC through CuPy),
and the runner's closures."""
import pytest

from bench.enzyme import rsbench, run, xsbench
from bench.enzyme.case import QUICK

pytestmark = pytest.mark.gpu
CASES = [xsbench.CASE, rsbench.CASE]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gate_on_the_gpu(case):
    gate = case.gate("cuda")
    assert gate.ok, gate.detail


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_closures_and_cuda_c_on_the_gpu(case):
    cp = pytest.importorskip("cupy")
    state = case.setup(QUICK, "cuda")
    case.primal(state)
    case.primal_as_derivative(state)
    case.gradient(state)
    assert case.tape_bytes(state) >= 0
    assert set(case.specializations(state)) == {"primal", "primal as derivative", "gradient"}
    module = cp.RawModule(code=case.cuda_c, options=("-std=c++17",))
    case.primal(state)
    case.cuda_c_launch(state, module)
    cp.cuda.Device().synchronize()
    assert case.cuda_c_check(state) < 1e-10   # float64, the same operations up to contraction


def test_runner_row_on_the_gpu(tmp_path):
    pytest.importorskip("cupy")
    output = tmp_path / "enzyme.md"
    assert run.main(["--apps", "xsbench,rsbench", "--device", "cuda", "--scale", QUICK,
                     "--output", str(output)]) == 0
    text = output.read_text()
    assert text.count("| ok |") == 2
