"""Evaluations spread over a dask.distributed cluster: many GPUs, many hosts.

Dask places tasks on workers; it does not isolate them: a variant that segfaults kills the
dask worker (and every task it runs), one that hangs holds it for ever. So each dask worker
evaluates inside zymo's own isolated pool (`default_executor`: processes pinned to the worker's
GPU, a time limit per task, a replacement for a crashed one), made on the worker at its first
task and kept for the run: a crash or a hang costs one evaluation, as on one machine.

Per evaluation, dask moves the task (the kernel by reference to its module, the edit list, the
inputs function and a seed: a few kilobytes, never arrays: each worker makes its inputs from the
seed) and its fitness back. Evaluations submitted within `LINGER` of each other travel as one
dask task of up to `BATCH` (each still isolated on the worker, its failure its own): dask's
client and scheduler, which run in the search's process, cost it about 2.5 ms of CPU per task,
as much as breeding a child.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from concurrent.futures import Executor, Future

BATCH = 8          # evaluations per dask task at most
LINGER = 0.02      # seconds a submission waits for others to share its dask task

# this process's pools, when it is a dask worker: (backend, workers) -> IsolatedPool
_pools: dict = {}
_pools_lock = threading.Lock()


def _local_pool(backend: str, workers: int | None, timeout: float):
    from .evaluator import default_executor
    with _pools_lock:
        pool = _pools.get((backend, workers))
        if pool is None or pool.broken is not None:
            pool = _pools[(backend, workers)] = default_executor(backend, timeout, workers)
    pool.timeout = timeout
    return pool


def _isolated(calls, backend: str, workers: int | None, timeout: float) -> list:
    """Run on a dask worker: each `fn(*args)` of `calls` in that worker's isolated pool, all at
    once; per call ("ok", value) or ("error", exception), so that one that crashes or hangs
    fails alone."""
    import multiprocessing
    if multiprocessing.current_process().daemon:
        raise RuntimeError(
            "this dask worker is a daemonic process, which cannot start the isolated processes "
            "zymo evaluates variants in (a crashing or hanging variant would take the worker "
            "down). Start the workers with the dask setting distributed.worker.daemon = false "
            "(dask.config.set({'distributed.worker.daemon': False}) before making a "
            "LocalCluster, or DASK_DISTRIBUTED__WORKER__DAEMON=False for `dask worker`), or "
            "use zm.evolution.gpu_cluster()")
    pool = _local_pool(backend, workers, timeout)
    futures = [pool.submit(fn, *args) for fn, args in calls]
    outcomes = []
    for future in futures:
        try:
            outcomes.append(("ok", future.result()))
        except Exception as error:   # noqa: BLE001 - the caller's future raises it
            outcomes.append(("error", error))
    return outcomes


def _pool_accounts() -> list:
    """Run on a dask worker: the account of each isolated pool it keeps (IsolatedPool.account)."""
    with _pools_lock:
        return [pool.account() for pool in _pools.values()]


def _close_pools() -> int:
    with _pools_lock:
        closed = len(_pools)
        for pool in _pools.values():
            pool.shutdown(cancel_futures=True)
        _pools.clear()
    return closed


class DaskExecutor(Executor):
    """An executor over a `distributed.Client` whose tasks run isolated on the dask workers
    (see the module's docstring). `workers`: evaluation processes per dask worker (default:
    per GPU as on one machine, or one per core the worker's host has divided among its dask
    workers); `timeout` is the search's limit per evaluation (it sets it after the baseline)."""

    def __init__(self, client, backend: str, workers: int | None = None, timeout: float = 60.0,
                 batch: int = BATCH, linger: float = LINGER):
        self.client, self.backend, self.per_worker = client, backend, workers
        self.timeout = timeout
        self.batch, self.linger = max(1, batch), linger
        self._executor = client.get_executor(pure=False)
        self.spare_count = 0
        self.tasks = 0                     # dask tasks sent (each of up to `batch` calls)
        self._waiting: list = []           # (future, fn, args) not sent yet
        self._ready = threading.Condition()
        self._closed = False
        self._sender = threading.Thread(target=self._send, daemon=True)
        self._sender.start()

    @property
    def workers(self) -> int:
        """Evaluations that can run at once (the baseline takes this many samples)."""
        return max(1, sum(w.get("nthreads", 1)
                          for w in self.client.scheduler_info()["workers"].values()))

    def submit(self, fn, /, *args, **kwargs) -> Future:
        if kwargs:
            raise TypeError("DaskExecutor.submit takes positional arguments only")
        future: Future = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("the executor is shut down")
            self._waiting.append((future, fn, args))
            self._ready.notify()
        return future

    def _send(self) -> None:
        """Send what was submitted as dask tasks of up to `batch` calls: a call waits at most
        `linger` for others to join it."""
        while True:
            with self._ready:
                while not self._waiting and not self._closed:
                    self._ready.wait()
                if not self._waiting:
                    return
                deadline = time.monotonic() + self.linger
                while len(self._waiting) < self.batch and not self._closed and \
                        time.monotonic() < deadline:
                    self._ready.wait(max(0.0, deadline - time.monotonic()))
                taken, self._waiting = self._waiting[:self.batch], self._waiting[self.batch:]
            taken = [t for t in taken if t[0].set_running_or_notify_cancel()]
            if not taken:
                continue
            try:
                task = self._executor.submit(_isolated, [(fn, args) for _, fn, args in taken],
                                             self.backend, self.per_worker, self.timeout)
            except Exception as error:   # noqa: BLE001 - an unpicklable call, a closed client
                for future, _, _ in taken:
                    future.set_exception(error)
                continue
            self.tasks += 1
            task.add_done_callback(functools.partial(_settle, [f for f, _, _ in taken]))

    def account(self) -> dict:
        """The isolated pools' accounts from every dask worker, added up as one pool's: the
        workers they replaced (timeouts, crashes, all replacements) and each GPU lock's held
        seconds, one entry per lock (a killed worker's time included). Empty when the
        workers cannot be asked (a cluster already gone)."""
        try:
            found = self.client.run(_pool_accounts)
        except Exception:   # noqa: BLE001 - a lost cluster keeps no accounts
            return {}
        total: dict = {"timeouts": 0, "crashes": 0, "replacements": 0, "lock_held_s": []}
        for accounts in found.values():
            for account in accounts:
                for key in ("timeouts", "crashes", "replacements"):
                    total[key] += account.get(key, 0)
                total["lock_held_s"] += list(account.get("lock_held_s", ()))
        return total

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop the pools on the workers (the client and its cluster stay the caller's)."""
        with self._ready:
            if cancel_futures:
                for future, _, _ in self._waiting:
                    future.cancel()
                self._waiting.clear()
            self._closed = True
            self._ready.notify()
        self._sender.join()
        self._executor.shutdown(wait=wait)
        try:
            self.client.run(_close_pools)
        except Exception:   # noqa: BLE001 - a cluster already gone has no pools left
            pass


def _settle(futures: list, task) -> None:
    """Each call's future from its dask task's outcomes; a task that failed as a whole (a
    daemonic dask worker, a lost one) fails every call it carried."""
    try:
        outcomes = task.result()
    except BaseException as error:   # noqa: BLE001 - reported to every call's future
        outcomes = [("error", error)] * len(futures)
    for future, (status, value) in zip(futures, outcomes):
        if status == "ok":
            future.set_result(value)
        else:
            future.set_exception(value)


def as_executor(executor, backend: str, timeout: float):
    """`executor` as the search uses it: a `distributed.Client` becomes a DaskExecutor (its
    tasks isolated on the workers); any other Executor is used as it is."""
    if type(executor).__name__ == "Client" and hasattr(executor, "get_executor"):
        return DaskExecutor(executor, backend, timeout=timeout)
    return executor


def gpu_cluster(devices=None, threads_per_gpu: int | None = None, **cluster_options):
    """A local dask cluster with one worker process per GPU, each seeing only its own
    (`CUDA_VISIBLE_DEVICES`), as dask-cuda's `LocalCUDACluster` does, and allowed to start
    processes of its own (zymo's isolated pools). `devices`: GPU ordinals (default: every
    visible GPU). For several hosts, start `dask worker` on each with one worker per GPU
    (`CUDA_VISIBLE_DEVICES=k dask worker SCHEDULER --nworkers 1 --nthreads T` and the dask
    setting `distributed.worker.daemon: false`) and pass the `Client` to `zm.evolve`.

    The scheduler runs in a process of its own, as `dask scheduler` does on a cluster of
    hosts: in the search's process it took 1.2 ms of CPU per task from the parent (and the
    parent's lock on the interpreter from its dispatching)."""
    import dask
    from distributed import Nanny, SpecCluster
    from distributed.deploy.subprocess import SubprocessScheduler
    if devices is None:
        from ..cuda import driver
        if not driver.is_available():
            raise RuntimeError("gpu_cluster: this machine has no GPU; pass devices=[...] only "
                               "where they exist, or use distributed.LocalCluster for the CPU")
        devices = range(driver.device_count())
    devices = [int(d) for d in devices]
    if not devices:
        raise ValueError("gpu_cluster: no devices given")
    threads = threads_per_gpu or max(1, ((os.cpu_count() or 3) - 2) // len(devices))
    # ordinals count the GPUs this process sees: name them as the driver does to a child
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    names = visible.split(",") if visible else None
    workers = {f"gpu{d}": {"cls": Nanny, "options": {
        "nthreads": threads,
        "env": {"CUDA_VISIBLE_DEVICES": names[d] if names and d < len(names) else str(d)}}}
        for d in devices}
    scheduler = {"cls": SubprocessScheduler,
                 "options": {"scheduler_kwargs": {"dashboard_address": None}}}
    # a daemonic worker cannot start the processes an isolated pool needs; set for good in
    # this process, since its nannies read it again whenever they restart a worker
    dask.config.set({"distributed.worker.daemon": False})
    return SpecCluster(workers=workers, scheduler=scheduler, **cluster_options)
