"""The isolated worker pool: start-up outside the time limit, spares that replace a lost worker
at once, and the search's accounting of where evaluations go."""
from __future__ import annotations

import functools
import time

import pytest

from zymo.runtime.cuda.driver import CudaError
from zymo.runtime.evolution.evaluate import Fitness, _sticky, outcome
from zymo.runtime.evolution.workers import EvaluationTimeout, IsolatedPool


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


def test_outcomes_name_what_went_wrong():
    assert outcome(Fitness(True, 1e-3, 0.0)) == "valid"
    assert outcome(Fitness(False, reason="EvaluationTimeout: the task ran past")) == \
        "hang (time limit)"
    assert outcome(Fitness(False, reason="WorkerCrashed: the worker died")) == "worker crashed"
    assert outcome(Fitness(False, reason="CudaError: CUDA_ERROR_ILLEGAL_ADDRESS")) == "GPU fault"
    assert outcome(Fitness(False, reason="outputs differ")) == "wrong output"
    assert outcome(Fitness(False, reason="VerificationError: x")) == "did not compile or launch"


def test_only_sticky_cuda_errors_cost_a_worker():
    assert _sticky(CudaError("illegal address", 700))
    assert _sticky(CudaError("no code known"))
    assert not _sticky(CudaError("too many resources requested for launch", 701))
    assert not _sticky(ValueError("not a CUDA error"))


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
