"""Tasks for tests/evolve/test_cluster.py, at module level so dask workers and the processes
they start import them by name."""
import os
import time


def pid_and_device():
    return os.getpid(), os.environ.get("CUDA_VISIBLE_DEVICES")


def crash():
    os._exit(3)


def hang():
    time.sleep(600)
