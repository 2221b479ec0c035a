"""Evaluation over a dask cluster (issue 30, item 1): each dask worker evaluates in its own
isolated pool, so a variant that crashes or hangs costs one evaluation, never a worker or the
run; `gpu_cluster` pins one dask worker per GPU."""
import os

import numpy as np
import pytest

import zymo as zm
from zymo.runtime.evolution import DaskExecutor, EvaluationTimeout, WorkerCrashed

distributed = pytest.importorskip("distributed", reason="dask is in the test extra: "
                                  "pip install -e '.[test]'")
dask = pytest.importorskip("dask")
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _add_tests_to_path(path=TESTS):
    import sys
    if path not in sys.path:
        sys.path.insert(0, path)


@pytest.fixture(scope="module")
def client():
    with dask.config.set({"distributed.worker.daemon": False}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=None,
                                     env={"ZYMO_CPU_THREADS": "1"}) as cluster, \
            distributed.Client(cluster) as client:
        client.run(_add_tests_to_path)
        yield client


def test_a_crash_or_a_hang_costs_one_task_not_the_worker(client):
    from evolve import cluster_tasks
    executor = DaskExecutor(client, "cpu", workers=1, timeout=2.0)
    dask_workers = set(client.scheduler_info()["workers"])
    crashed = executor.submit(cluster_tasks.crash)
    with pytest.raises(WorkerCrashed):
        crashed.result(timeout=120)
    hung = executor.submit(cluster_tasks.hang)
    with pytest.raises(EvaluationTimeout):
        hung.result(timeout=120)
    # the dask workers are the same ones, and take tasks again
    results = [executor.submit(cluster_tasks.pid_and_device).result(timeout=120)
               for _ in range(4)]
    assert set(client.scheduler_info()["workers"]) == dask_workers
    dask_pids = set(client.run(os.getpid).values())
    assert all(pid not in dask_pids for pid, _ in results)   # ran in the isolated processes
    # the pools' accounts, added up over the dask workers (CPU pools hold no GPU lock)
    account = executor.account()
    assert account["crashes"] >= 1 and account["timeouts"] >= 1
    assert account["replacements"] >= 2 and account["lock_held_s"] == []
    executor.shutdown()
    assert sum(client.run(_pool_count).values()) == 0


def test_calls_submitted_together_share_a_dask_task_and_fail_alone(client):
    from evolve import cluster_tasks
    executor = DaskExecutor(client, "cpu", workers=2, timeout=2.0, linger=1.0)
    futures = [executor.submit(cluster_tasks.pid_and_device),
               executor.submit(cluster_tasks.crash),
               executor.submit(cluster_tasks.pid_and_device)]
    with pytest.raises(WorkerCrashed):
        futures[1].result(timeout=120)
    pids = {futures[i].result(timeout=120)[0] for i in (0, 2)}
    assert executor.tasks == 1             # one dask task carried the three calls
    assert not pids & set(client.run(os.getpid).values())
    # cancelled before it was sent: never runs
    late = DaskExecutor(client, "cpu", workers=1, linger=60.0)
    waiting = late.submit(cluster_tasks.pid_and_device)
    late.shutdown(cancel_futures=True)
    assert waiting.cancelled() and late.tasks == 0
    executor.shutdown()


def _pool_count():
    from zymo.runtime.evolution import cluster
    return len(cluster._pools)


def test_evolve_takes_a_client_directly(client):
    from evolve.evolve_kernels import scale_holdout, scale_inputs, scale_launch, wasteful_scale
    result = zm.evolve(wasteful_scale, scale_launch, scale_inputs, population=8, generations=2,
                       seed=1, executor=client, holdout=scale_holdout, progress=False,
                       backend="cpu")
    big = scale_holdout(np.random.default_rng(3))
    expected = [a.copy() for a in big]
    wasteful_scale[scale_launch(big)](*expected)
    result.best[scale_launch(big)](*big)
    np.testing.assert_array_equal(big[1], expected[1])
    # the search shut down the pools it made on the workers, and left the client open
    assert sum(client.run(_pool_count).values()) == 0
    assert client.status == "running"


def test_a_daemonic_worker_is_a_clear_error():
    with dask.config.set({"distributed.worker.daemon": True}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                     dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        client.run(_add_tests_to_path)
        from evolve import cluster_tasks
        future = DaskExecutor(client, "cpu", workers=1).submit(cluster_tasks.pid_and_device)
        with pytest.raises(RuntimeError, match="daemon"):
            future.result(timeout=120)


def test_gpu_cluster_pins_one_worker_per_device():
    from evolve import cluster_tasks
    with zm.gpu_cluster(devices=[0, 1], threads_per_gpu=1) as cluster, \
            distributed.Client(cluster) as client:
        client.run(_add_tests_to_path)
        seen = client.run(cluster_tasks.pid_and_device)
        assert sorted(device for _, device in seen.values()) == ["0", "1"]
        assert len(seen) == 2


def test_gpu_cluster_without_a_gpu_says_so():
    from zymo.runtime.cuda import driver
    if driver.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match="no GPU"):
        zm.gpu_cluster()
