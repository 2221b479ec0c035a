"""zm.evolve with a dask.distributed cluster as its executor (issue 6, item 5): how a run
spreads over many GPUs or nodes. A LocalCluster of two worker processes stands in for one."""
import os

import numpy as np
import pytest

import zymo as zm

from evolve.evolve_kernels import scale_holdout, scale_inputs, scale_launch, wasteful_scale

distributed = pytest.importorskip("distributed", reason="dask is in the test extra: "
                                  "pip install -e '.[test]'")
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _add_tests_to_path(path=TESTS):
    import sys
    if path not in sys.path:
        sys.path.insert(0, path)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None,
                                  env={"ZYMO_CPU_THREADS": "1"}) as cluster, \
            distributed.Client(cluster) as client:
        client.run(_add_tests_to_path)   # the workers import the test kernels by name
        yield client


def test_evolution_over_a_dask_cluster(client):
    result = zm.evolve(wasteful_scale, scale_launch, scale_inputs, population=16, generations=5,
                       seed=1, executor=client.get_executor(), holdout=scale_holdout,
                       progress=False, backend="cpu")
    assert result.speedup >= 2.0, result.report()
    # both workers took part
    assert len(client.scheduler_info()["workers"]) == 2
    big = scale_holdout(np.random.default_rng(3))
    expected = [a.copy() for a in big]
    wasteful_scale[scale_launch(big)](*expected)
    result.best[scale_launch(big)](*big)
    np.testing.assert_array_equal(big[1], expected[1])
