"""An executor whose tasks each run in a worker process under a time limit.

A task that hangs past its limit, or kills its process (a segfault, a poisoned CUDA context that
aborts), costs that one task: its future fails with `EvaluationTimeout` or `WorkerCrashed`, the
worker is replaced, and the other tasks go on. Workers are spawned, never forked, so a CUDA
context or LLVM state in the parent is never shared.

Starting a worker (a Python process, its imports, a CUDA context) takes seconds, and evolution
replaces workers (a GPU fault poisons a context, a hang leaves a kernel running), so spares are
started ahead, running `warmup` in the background, shared by the workers of one environment
(one GPU); a replacement is a swap. A worker takes tasks only after it reports ready, so its
start-up never counts against a task's time limit.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from collections import deque
from concurrent.futures import Executor, Future
from multiprocessing.connection import wait


class EvaluationTimeout(Exception):
    pass


class WorkerCrashed(Exception):
    pass


# the exit code of a worker that, importing the main script again, met a pool being started
# (zm.evolve at the script's top level): it leaves at once, quietly (see `leave_if_importing_main`)
UNGUARDED_MAIN = 86


class WorkersCannotStart(RuntimeError):
    """Every worker the pool starts dies before it is ready: no task can ever run."""

    def __init__(self, failures: int, exitcode):
        if exitcode == UNGUARDED_MAIN:
            super().__init__(
                "the worker processes cannot start: workers are spawned, and a spawned process "
                "imports your main script again, which calls zm.evolve at its top level. Put "
                "the call (and whatever should run once) under `if __name__ == \"__main__\":`.")
            return
        super().__init__(
            f"{failures} worker processes in a row died while starting (last exit code "
            f"{exitcode}), so no evaluation can run. Workers are spawned, and a spawned process "
            f"imports your main script again: if that script calls zm.evolve at top level, put "
            f"the call under `if __name__ == \"__main__\":`. Otherwise the script (or a module "
            f"it imports) fails on import in a fresh process; its traceback is printed above.")


def leave_if_importing_main() -> None:
    """In a spawned worker that is still importing the parent's main script (which started a
    pool at its top level, so every worker would start one in turn and fail with a long
    traceback): exit quietly with UNGUARDED_MAIN, which the parent's pool reports as one
    clear error."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        sys.stderr.flush()
        os._exit(UNGUARDED_MAIN)


def _serve(conn, env: dict, warmup) -> None:
    os.environ.update(env)
    start = time.perf_counter()
    if warmup is not None:
        try:
            warmup()
        except BaseException:   # noqa: BLE001 - a task will meet the same failure and say so
            pass
    conn.send(("ready", time.perf_counter() - start))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        fn, args, kwargs = message
        try:
            conn.send(("ok", fn(*args, **kwargs)))
        except BaseException as error:   # reported to the caller's future
            try:
                conn.send(("error", error))
            except Exception:
                conn.send(("error", RuntimeError(f"{type(error).__name__}: {error}")))


class _Worker:
    def __init__(self, context, env, warmup):
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, env, warmup), daemon=True)
        self.process.start()
        child.close()
        self.future: Future | None = None
        self.deadline = 0.0
        self.ready = False

    def kill(self) -> None:
        self.process.kill()
        self.process.join(5)
        self.conn.close()


class IsolatedPool(Executor):
    """`workers` processes; each task may run `timeout` seconds. `env` is set in every worker
    (e.g. ZYMO_CPU_THREADS=1 so that workers sharing a CPU do not oversubscribe it), or is a
    list with one dict per worker (e.g. ZYMO_DEVICE=k for the workers of GPU k). `warmup` (a
    picklable function) runs in each worker before it takes tasks; `spares` keeps that many
    started workers for replacements per distinct environment. `on_replace(pid)` runs in this
    process after a worker has been killed (e.g. to release a lock it held)."""

    def __init__(self, workers: int = 1, timeout: float = 30.0,
                 env: dict | list[dict] | None = None, warmup=None, spares: int = 0,
                 on_replace=None):
        leave_if_importing_main()
        self._context = multiprocessing.get_context("spawn")
        workers = max(1, len(env) if isinstance(env, list) else workers)
        self._envs = env if isinstance(env, list) else [dict(env or {})] * workers
        # workers of one environment share spares: the first index with that environment
        self._group = [self._envs.index(e) for e in self._envs]
        self.timeout = timeout
        self.warmup, self.spare_count = warmup, spares
        self.on_replace = on_replace
        self._workers = [self._start(index) for index in range(workers)]
        self._spares: dict[int, deque] = {
            group: deque(self._start(group) for _ in range(spares))
            for group in sorted(set(self._group))}
        self.replacements = 0
        self.locks: list = []     # the device locks its workers take, where the maker keeps them
        self.startup_seconds: list[float] = []   # each worker's start-up, as it reported
        self._pending: deque = deque()
        self._lock = threading.Condition()
        self._closed = False
        self.crashes = 0
        self.timeouts = 0
        # a process that dies before it is ready, again and again, will never run a task (a
        # script without a __main__ guard): after this many in a row the pool gives up
        self._start_failures, self._start_limit = 0, 2 * workers + 1
        self.broken: WorkersCannotStart | None = None
        self._reapers: list[threading.Thread] = []   # killing replaced workers (`_reap`)
        self._thread = threading.Thread(target=self._dispatch, daemon=True)
        self._thread.start()

    @property
    def workers(self) -> int:
        return len(self._workers)

    def account(self) -> dict:
        """What the pool replaced (timeouts, crashes, all replacements) and, per device lock,
        the seconds it was held (a killed worker's time included, up to its release)."""
        return {"timeouts": self.timeouts, "crashes": self.crashes,
                "replacements": self.replacements,
                "lock_held_s": [lock.account()[0] for lock in self.locks]}

    def _start(self, index: int) -> _Worker:
        return _Worker(self._context, self._envs[index], self.warmup)

    def restart_spares(self, warmup=None) -> None:
        """Start the spares again, with `warmup` from now on when given (e.g. one that has
        learned what the tasks will need), else with the current one."""
        with self._lock:
            self.warmup = warmup or self.warmup
            for index, spares in self._spares.items():
                for worker in spares:
                    worker.kill()
                spares.clear()
                spares.extend(self._start(index) for _ in range(self.spare_count))

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        with self._lock:
            if self.broken is not None:
                raise self.broken
            if self._closed:
                raise RuntimeError("the pool is shut down")
            self._pending.append((future, (fn, args, kwargs)))
            self._lock.notify()
        return future

    def _dispatch(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not self._pending and \
                        not any(w.future for w in self._workers):
                    self._lock.wait()
                if self._closed and not self._pending and not any(w.future for w in self._workers):
                    return
                for worker in self._workers:
                    if worker.ready and worker.future is None and self._pending:
                        future, message = self._pending.popleft()
                        if not future.set_running_or_notify_cancel():
                            continue
                        worker.future, worker.deadline = future, time.monotonic() + self.timeout
                        try:
                            worker.conn.send(message)
                        except Exception as error:  # an unpicklable task
                            worker.future = None
                            future.set_exception(error)
            busy = [w for w in self._workers if w.future is not None]
            starting = [w for w in self._workers if not w.ready]
            if not busy and not starting:
                continue
            left = max(0.0, min(w.deadline for w in busy) - time.monotonic()) if busy else 0.5
            ready = wait([w.conn for w in busy + starting], timeout=min(left, 0.5))
            now = time.monotonic()
            for worker in starting:
                if worker.conn in ready:
                    self._started(worker)
                if self.broken is not None:
                    return
            for worker in busy:
                if worker.conn in ready:
                    self._receive(worker)
                elif now > worker.deadline:
                    self.timeouts += 1
                    self._replace(worker, EvaluationTimeout(
                        f"the task ran past its {self.timeout:g} s limit; worker replaced"))

    def _started(self, worker: _Worker) -> None:
        try:
            status, seconds = worker.conn.recv()
        except (EOFError, OSError):   # died while starting: start another
            self.crashes += 1
            self._start_failures += 1
            worker.process.join(2)      # its pipe closes before its exit code is known
            code = worker.process.exitcode
            # a script without a __main__ guard fails every worker the same way: at once
            if self._start_failures >= self._start_limit or code == UNGUARDED_MAIN:
                self._give_up(WorkersCannotStart(self._start_failures, code))
            else:
                self._replace(worker, None)
            return
        self._start_failures = 0
        worker.ready = True
        self.startup_seconds.append(seconds)

    def _receive(self, worker: _Worker) -> None:
        future = worker.future
        try:
            status, value = worker.conn.recv()
        except (EOFError, OSError):
            self.crashes += 1
            code = worker.process.exitcode
            self._replace(worker, WorkerCrashed(f"the worker died (exit code {code})"))
            return
        worker.future = None
        if getattr(value, "poisons_worker", False):
            self._replace(worker, None)
        if status == "ok":
            future.set_result(value)
        else:
            future.set_exception(value)

    def _replace(self, worker: _Worker, error: Exception | None) -> None:
        future = worker.future
        self._reap(worker)
        index = self._workers.index(worker)
        group = self._group[index]
        spares = self._spares[group]
        self._workers[index] = spares.popleft() if spares else self._start(index)
        if len(spares) < self.spare_count and not self._closed:
            spares.append(self._start(group))   # the next replacement starts now
        self.replacements += 1
        if future is not None:
            future.set_exception(error)

    def _reap(self, worker: _Worker) -> None:
        """Kill `worker` and, once its process is gone, run `on_replace` (which releases the
        GPU lock it may hold: a hung kernel runs until its context dies with the process). In
        a thread of its own: on a GPU the exit of a process whose kernel still runs took about
        a quarter of a second, and the dispatcher, which every worker's results and tasks go
        through, must not wait for it."""
        def reap():
            worker.kill()
            if self.on_replace is not None:
                self.on_replace(worker.process.pid)

        self._reapers = [t for t in self._reapers if t.is_alive()]
        thread = threading.Thread(target=reap, daemon=True)
        self._reapers.append(thread)
        thread.start()

    def _give_up(self, error: WorkersCannotStart) -> None:
        """Fail every task, queued or running, with `error`; later submits raise it."""
        with self._lock:
            self.broken, self._closed = error, True
            failed = [future for future, _ in self._pending]
            self._pending.clear()
        failed += [w.future for w in self._workers if w.future is not None]
        for worker in self._workers + [w for spares in self._spares.values() for w in spares]:
            worker.future = None
            worker.kill()
        for spares in self._spares.values():
            spares.clear()
        for future in failed:
            future.set_exception(error)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if cancel_futures:
                while self._pending:
                    self._pending.popleft()[0].cancel()
            self._lock.notify()
        if wait:
            self._thread.join()
        for thread in list(self._reapers):   # replaced workers gone, their locks released
            thread.join()
        for worker in self._workers + [w for spares in self._spares.values() for w in spares]:
            try:
                worker.conn.send(None)
            except Exception:
                pass
            worker.process.join(2)
            if worker.process.is_alive():
                worker.kill()
