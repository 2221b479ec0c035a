"""Every Rodinia workload is registered, makes fresh inputs per generator, and its kernel
becomes PTX that ptxas accepts (the GPU runs are checked by reading: no GPU here)."""
import numpy as np
import pytest

import rodinia_helpers  # noqa: F401  (bench on the path)
from bench.evolve.workloads import load
from zymo.backend.nvptx import ptxas

NAMES = ["rodinia_hotspot3d", "rodinia_srad", "rodinia_srad2", "rodinia_lud",
         "rodinia_gaussian", "rodinia_backprop", "rodinia_bfs", "rodinia_btree",
         "rodinia_streamcluster", "rodinia_hotspot", "rodinia_particlefilter"]


def test_all_registered():
    assert set(NAMES) <= set(load())


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("name", NAMES)
def test_kernel_assembles_and_inputs_vary(name):
    w = load([name])[name]
    first, second = (w.race_check(np.random.default_rng(s)) for s in (1, 2))
    assert any(isinstance(a, np.ndarray) and not np.array_equal(a, b)
               for a, b in zip(first, second))
    report = ptxas.assemble(w.kernel.specialize(*first).ptx(arch="sm_90"), "sm_90")
    assert report.registers > 0
