"""The isolated worker pool: start-up outside the time limit, spares that replace a lost worker
at once, and the search's accounting of where evaluations go."""
from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path

import hypothesis
import pytest
from hypothesis import strategies as st

from zymo.runtime.cuda.driver import CudaError
from zymo.runtime.evolution.validation import Fitness, outcome
from zymo.runtime.evolution.worker import sticky
import zymo as zm
from zymo.runtime.evolution.workers import EvaluationTimeout, IsolatedPool, WorkersCannotStart


def slow_start(seconds: float) -> None:
    time.sleep(seconds)


def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_start_up_does_not_count_against_the_time_limit():
    pool = IsolatedPool(1, timeout=1.0, warmup=functools.partial(slow_start, 1.5))
    try:
        assert pool.submit(nap, 0.1).result(timeout=30) == 0.1
        assert pool.timeouts == 0
        assert pool.startup_seconds and pool.startup_seconds[0] >= 1.5
    finally:
        pool.shutdown()


def test_a_spare_started_ahead_replaces_a_hung_worker():
    pool = IsolatedPool(1, timeout=1.0, warmup=functools.partial(slow_start, 2.0), spares=1)
    try:
        assert pool.submit(nap, 0.0).result(timeout=30) == 0.0   # both processes are warm
        time.sleep(2.5)                                          # the spare finishes its warm-up
        hung = pool.submit(nap, 30.0)
        after = pool.submit(nap, 0.0)
        with pytest.raises(EvaluationTimeout):
            hung.result(timeout=30)
        replaced_at = time.monotonic()
        assert after.result(timeout=30) == 0.0
        # a worker started now would need its 2 s warm-up first; the spare had done it
        assert time.monotonic() - replaced_at < 1.5
        assert pool.replacements == 1 and pool.timeouts == 1
    finally:
        pool.shutdown()


def test_the_dispatcher_does_not_wait_for_a_replaced_worker_to_exit(monkeypatch):
    """On a GPU a process whose kernel still runs takes a while to exit (its context is torn
    down); the other workers' results and tasks must not wait for it."""
    from zymo.runtime.evolution import workers
    kill = workers._Worker.kill
    exits = []

    def slow_kill(worker):
        time.sleep(2.0)          # as a hung GPU kernel's process does
        kill(worker)
        exits.append(time.monotonic())

    monkeypatch.setattr(workers._Worker, "kill", slow_kill)
    released = []
    pool = IsolatedPool(2, timeout=1.0, spares=1,
                        on_replace=lambda pid: released.append(time.monotonic()))
    try:
        assert [f.result(timeout=60) for f in [pool.submit(nap, 0.0) for _ in range(2)]]
        hung = pool.submit(nap, 30.0)
        with pytest.raises(EvaluationTimeout):
            hung.result(timeout=30)
        start = time.monotonic()
        assert [pool.submit(nap, 0.0).result(timeout=30) for _ in range(3)] == [0.0] * 3
        assert time.monotonic() - start < 1.5 and not exits   # before the old one is gone
    finally:
        pool.shutdown()
    # shut down only once the replaced worker was gone and its release had run after that
    assert exits and len(released) == 1 and released[0] >= exits[0]


def test_outcomes_name_what_went_wrong():
    assert outcome(Fitness(True, 1e-3, 0.0)) == "valid"
    assert outcome(Fitness(False, reason="EvaluationTimeout: the task ran past")) == \
        "hang (time limit)"
    assert outcome(Fitness(False, reason="WorkerCrashed: the worker died")) == "worker crashed"
    assert outcome(Fitness(False, reason="CudaError: CUDA_ERROR_ILLEGAL_ADDRESS")) == "GPU fault"
    assert outcome(Fitness(False, reason="outputs differ")) == "wrong output"
    assert outcome(Fitness(False, reason="VerificationError: x")) == "did not compile or launch"


def test_only_sticky_cuda_errors_cost_a_worker():
    assert sticky(CudaError("illegal address", 700))
    assert sticky(CudaError("no code known"))
    assert not sticky(CudaError("too many resources requested for launch", 701))
    assert not sticky(ValueError("not a CUDA error"))


MARK = ""


def mark(text: str) -> None:
    global MARK
    MARK = text


def read_mark() -> str:
    return MARK


def test_spares_restarted_with_a_new_warm_up_use_it():
    pool = IsolatedPool(1, timeout=1.0, warmup=functools.partial(mark, "generic"), spares=1)
    try:
        assert pool.submit(read_mark).result(timeout=30) == "generic"
        pool.warmup = functools.partial(mark, "knows the task")
        pool.restart_spares()
        with pytest.raises(EvaluationTimeout):
            pool.submit(nap, 30.0).result(timeout=30)
        assert pool.submit(read_mark).result(timeout=30) == "knows the task"
    finally:
        pool.shutdown()


# ---- the device lock: one worker at a time on a GPU ------------------------------------------
def hold_for(lock, seconds: float) -> tuple[float, float]:
    """Hold `lock` for `seconds`; the (start, end) of holding, on the shared monotonic clock."""
    lock.acquire()
    began = time.monotonic()
    time.sleep(seconds)
    ended = time.monotonic()
    lock.release()
    return began, ended


def hold_forever(lock) -> None:
    lock.acquire()
    time.sleep(3600)


def test_the_device_lock_keeps_workers_apart():
    from zymo.runtime.evolution.device_lock import DeviceLock
    lock = DeviceLock()
    pool = IsolatedPool(3, timeout=30.0, warmup=functools.partial(install_lock, lock))
    try:
        spans = sorted(f.result(timeout=60) for f in
                       [pool.submit(hold_held, 0.3) for _ in range(6)])
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end - 1e-3, spans
        held, taken = lock.account()     # the lock's own account of the time it was held
        assert taken == 6 and 6 * 0.3 <= held < sum(end - start for start, end in spans) + 1
    finally:
        pool.shutdown()


LOCK = None


def install_lock(lock) -> None:
    global LOCK
    LOCK = lock


def hold_held(seconds: float):
    return hold_for(LOCK, seconds)


def test_a_worker_killed_holding_the_lock_releases_it_through_the_pool():
    from zymo.runtime.evolution.device_lock import DeviceLock
    lock = DeviceLock()
    killed = []

    def release(pid):
        killed.append(pid)
        lock.release_for(pid)

    pool = IsolatedPool(2, timeout=3.0, warmup=functools.partial(install_lock, lock),
                        on_replace=release)
    try:
        # both workers started, so that the waiting task's limit starts well after the
        # stuck one's
        assert [f.result(timeout=60) for f in [pool.submit(nap, 0.2) for _ in range(2)]]
        stuck = pool.submit(hold_held, 3600.0)
        time.sleep(1.5)    # it holds the lock now
        waiting = pool.submit(hold_held, 0.0)
        with pytest.raises(EvaluationTimeout):
            stuck.result(timeout=30)
        assert waiting.result(timeout=30)   # it got the lock once the holder was gone
        assert len(killed) == 1 and pool.timeouts == 1
        held, taken = lock.account()    # the killed holder's time counts, up to its release
        assert taken >= 2 and held >= 1.5
        pool.locks.append(lock)
        account = pool.account()
        assert account["timeouts"] == 1 and account["replacements"] == 1
        assert account["lock_held_s"][0] >= 1.5
    finally:
        pool.shutdown()


def test_a_waiter_takes_over_the_lock_of_a_dead_holder():
    import multiprocessing

    from zymo.runtime.evolution.device_lock import DeviceLock
    context = multiprocessing.get_context("spawn")
    lock = DeviceLock(context)
    holder = context.Process(target=hold_forever, args=(lock,), daemon=True)
    holder.start()
    deadline = time.monotonic() + 30
    while lock._holder.value != holder.pid and time.monotonic() < deadline:
        time.sleep(0.05)
    holder.kill()
    holder.join()
    began = time.monotonic()
    lock.acquire(poll=0.2)     # nobody released it: the waiter sees the holder gone
    assert time.monotonic() - began < 5
    lock.release()
    assert not lock.release_for(holder.pid)


SCRIPT_WITHOUT_GUARD = """
import zymo as zm
from evolve_kernels import scale_inputs, scale_launch, wasteful_scale

zm.evolve(wasteful_scale, scale_launch, scale_inputs, population=4, generations=1,
          backend="cpu", workers=1, profile=False)
print("finished")
"""


def test_a_script_without_a_main_guard_gets_an_error_naming_the_fix(tmp_path):
    """Spawned workers import the main script again: unguarded, each one dies starting its own
    pool. The pool gives up after a few such deaths, and the error says what to write."""
    script = tmp_path / "unguarded.py"
    script.write_text(SCRIPT_WITHOUT_GUARD)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).parent), str(Path(zm.__file__).parents[1]),
         os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=240)
    assert done.returncode != 0
    assert "finished" not in done.stdout
    assert "WorkersCannotStart" in done.stderr
    assert 'if __name__ == "__main__":' in done.stderr
    # the workers leave quietly: one traceback (the parent's), not one per worker started
    assert done.stderr.count("Traceback") == 1, done.stderr
    assert len(done.stderr.splitlines()) < 40, done.stderr


def test_a_pool_whose_workers_cannot_start_fails_its_tasks():
    pool = IsolatedPool(1, timeout=5.0, warmup=functools.partial(os._exit, 3))
    try:
        future = pool.submit(nap, 0.0)
        with pytest.raises(WorkersCannotStart, match="exit code 3"):
            future.result(timeout=60)
        with pytest.raises(WorkersCannotStart):
            pool.submit(nap, 0.0)
        assert pool.crashes == 3
    finally:
        pool.shutdown()


def test_the_held_out_checks_get_a_longer_time_limit():
    from zymo.runtime.evolution.result import patient
    pool = IsolatedPool(1, timeout=1.0)
    try:
        assert pool.submit(nap, 0.0).result(timeout=30) == 0.0      # started
        with patient(pool, 5.0):
            assert pool.submit(nap, 1.5).result(timeout=30) == 1.5
        assert pool.timeout == 1.0
        with pytest.raises(EvaluationTimeout):
            pool.submit(nap, 1.5).result(timeout=30)
    finally:
        pool.shutdown()


def nap_pair(kernel, edits, inputs, launch, seed, backend, rounds, repeats):
    time.sleep(1.5)
    return 1.0, 0.5


def test_the_final_side_by_side_timing_gets_the_longer_time_limit(monkeypatch):
    """The side-by-side timing runs both kernels for several rounds: more than one evaluation,
    so it ran past a search's limit on a slow host and failed the whole search."""
    from types import SimpleNamespace

    from zymo.runtime.evolution import result as result_module
    monkeypatch.setattr(result_module, "time_side_by_side", nap_pair)
    pool = IsolatedPool(1, timeout=1.0)
    try:
        result = result_module.EvolveResult(
            kernel=None, launch=None, inputs=None, check=None, tolerance=0.0, backend="cpu",
            evaluator=SimpleNamespace(executor=pool, repeats=1), state=None, holdout=None, seed=0)
        assert result.side_by_side(()) == (1.0, 0.5)
        assert pool.timeout == 1.0
    finally:
        pool.shutdown()


@hypothesis.given(st.floats(0.0, 30.0), st.floats(0.0, 1.0),
                  st.sampled_from([(10, 2.0), (20, 10.0)]))
def test_the_search_time_limit_covers_a_variant_that_compiles_like_the_original(
        compiled, share, factor_floor):
    """Every variant compiles; when a worker ran the original twice, the second run (cached)
    tells the compile apart. A limit of 10 times the cached run rejected SIMCoV's sound
    variants on the CPU as hangs (their compile alone took longer)."""
    from zymo.runtime.evolution.search import time_limit
    factor, floor = factor_floor
    cached = compiled * share
    limit = time_limit(compiled, cached, factor, floor)
    assert limit >= floor and limit >= 2.0 * compiled - cached
    assert limit >= factor * cached
