"""libdevice's float32 functions built on a square root (hypotf, normf, ...) ask
`__nvvm_reflect("__CUDA_PREC_SQRT")`; NVVM answers 1 (a correctly rounded root), and so must
zymo's LLVM pipeline, else they use sqrt.approx and lose two ulps (numba's test_math_hypot
fails at rtol 1e-7)."""
import math

import pytest

import zymo as zm
from zymo.backend import nvptx
from zymo.backend.nvptx import ptxas


@zm.kernel
def hypot32(a, b, out):
    i = zm.grid(1)
    if i < a.size:
        out[i] = math.hypot(a[i], b[i])


@pytest.mark.parametrize("fastmath", [False, True])
def test_hypotf_takes_a_correctly_rounded_square_root(fastmath):
    arr = zm.Array(zm.f32, 1)
    compiled = nvptx.compile(hypot32.specialize(arr, arr, arr).optimized, arch="sm_80",
                             fastmath=fastmath)
    roots = [line.split()[0] for line in compiled.ptx.splitlines() if "sqrt" in line]
    assert roots and all(op.startswith("sqrt.rn") for op in roots), roots
    if ptxas.find() is not None:
        ptxas.assemble(compiled.ptx, "sm_80")
