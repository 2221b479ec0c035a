"""The counted-while codegen pass: which loops it versions, and that both copies compute
what the loop as written computes, near the wrap-around boundary too."""
from __future__ import annotations

import importlib.util
import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import zymo as zm
from zymo.backend import interp
from zymo.ops.control import While
from zymo.passes.counted import most_trips

I32_MAX, I32_MIN = 2**31 - 1, -2**31


@zm.kernel
def count_lt(lo, hi, st_, out):
    i = lo[0]
    n = hi[0]
    s = st_[0]
    trips = 0
    total = 0
    while i < n:
        total += i
        trips += 1
        i += s
    out[0] = trips
    out[1] = total
    out[2] = i


@zm.kernel
def count_le_mirrored(lo, hi, st_, out):
    i = lo[0]
    n = hi[0]
    s = st_[0]
    trips = 0
    total = 0
    while n >= i:
        total += i
        trips += 1
        i = s + i
    out[0] = trips
    out[1] = total
    out[2] = i


@zm.kernel
def grid_stride_sum(x, out):
    i = zm.grid(1)
    v = zm.f32(0.0)
    while i < x.shape[0]:
        v += x[i]
        i += zm.gridsize(1)
    zm.atomic.add(out, 0, v)


@zm.kernel
def with_barrier(x, out):
    i = zm.threadIdx.x
    while i < x.shape[0]:
        zm.syncthreads()
        out[i] = x[i]
        i += zm.blockDim.x


@zm.kernel
def doubling(x, out):
    i = 1
    while i < x.shape[0]:
        out[i] = x[i]
        i *= 2


@zm.kernel
def conditional_step(x, out):
    i = 0
    while i < x.shape[0]:
        out[i] = x[i]
        if x[i] > 0:
            i += 1
        else:
            i += 2


def _arrays(kernel_args):
    lo, hi, s = kernel_args
    return [np.array([lo], np.int32), np.array([hi], np.int64), np.array([s], np.int32),
            np.zeros(3, np.int64)]


def _wrap(value: int) -> int:
    return (value - I32_MIN) % 2**32 + I32_MIN


def model(lo: int, hi: int, s: int, inclusive: bool, cap: int = 200):
    """(trips, total, final i) with i32 wrap-around, or None past `cap` trips."""
    i, trips, total = lo, 0, 0
    while (i <= hi) if inclusive else (i < hi):
        total, trips, i = _wrap(total + i), trips + 1, _wrap(i + s)
        if trips > cap:
            return None
    return trips, total, i


def test_grid_stride_loop_becomes_a_guarded_range_loop():
    spec = grid_stride_sum.specialize(np.zeros(8, np.float32), np.zeros(1, np.float32))
    assert "control.while" in spec.ir() and "control.for" not in spec.ir()  # AD sees the loop
    codegen = spec.ir("codegen")
    assert codegen.count("control.for") == 1 and codegen.count("control.while") == 1
    assert codegen.index("control.if") < codegen.index("control.for") < codegen.index(
        "control.while")
    assert "predicate = \"gt\"" in codegen  # s > 0 guards the counted copy


def test_loops_that_do_not_count_are_left_alone():
    for kernel in (with_barrier, doubling, conditional_step):
        spec = kernel.specialize(np.zeros(8, np.float32), np.zeros(8, np.float32))
        codegen = spec.ir("codegen")     # the codegen stage may still hoist invariants (LICM)
        assert "control.for" not in codegen, kernel.__name__
        assert codegen.count("control.while") == spec.ir().count("control.while")


def test_grid_stride_sum_on_cpu_matches_numpy():
    x = np.random.default_rng(0).random(100_003).astype(np.float32)
    out = np.zeros(1, np.float32)
    grid_stride_sum[7, 96](x, out)
    np.testing.assert_allclose(out[0], x.sum(dtype=np.float64), rtol=1e-5)


bounds = st.one_of(st.integers(-40, 400), st.integers(I32_MAX - 300, I32_MAX + 300),
                   st.integers(I32_MIN - 20, I32_MIN + 300))
starts = st.one_of(st.integers(-40, 40), st.integers(I32_MAX - 300, I32_MAX),
                   st.integers(I32_MIN, I32_MIN + 40))
steps = st.one_of(st.integers(-3, 9), st.sampled_from([100, 2**20, 2**30, I32_MAX]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(lo=starts, hi=bounds, s=steps, inclusive=st.booleans())
def test_both_copies_compute_the_loop_as_written(lo, hi, s, inclusive):
    """Interpreter on the versioned IR, CPU backend (which lowers the versioned IR) and the
    interpreter on the loop as written all agree with a wrap-around model."""
    expected = model(lo, hi, s, inclusive)
    assume(expected is not None)
    kernel = count_le_mirrored if inclusive else count_lt
    args = _arrays((lo, hi, s))
    spec = kernel.specialize(*args)
    assert "control.for" in spec.ir("codegen")
    results = []
    for run in (lambda a: interp.run(spec.codegen, 1, 1, a),
                lambda a: kernel.on("interp")[1, 1](*a),
                lambda a: kernel.on("cpu")[1, 1](*a)):
        fresh = _arrays((lo, hi, s))
        run(fresh)
        results.append(tuple(int(v) for v in fresh[3]))
    assert results == [expected] * 3


# ---- most_trips: the bound the reverse sweep sizes a while loop's tape by ------------------

_SOURCES = tempfile.mkdtemp(prefix="zymo-most-trips-")


def _bounded_loop(start: int, step: int, bound: int, predicate: str, dtype: str, form: str):
    """A kernel counting the trips of one loop with constant start, step and bound into
    out[0]; `form` "while" (`while i < n: ...; i += s`), "break" (also leaves when x[0] > 0)
    or "range" (a `range` with a break: the frontend's `not broken and i < n`, `i > n` for a
    negative step). `predicate`: strict or not, the counter on the left or the right, the
    direction following the step's sign."""
    up = step > 0
    test = {"strict": "i < n" if up else "i > n", "inclusive": "i <= n" if up else "i >= n",
            "strict-mirrored": "n > i" if up else "n < i",
            "inclusive-mirrored": "n >= i" if up else "n <= i"}[predicate]
    if form == "range":
        loop = (f"    for i in range({start}, {bound}, {step}):\n"
                f"        if x[0] > 0:\n            break\n        trips += 1\n")
    else:
        leave = "        if x[0] > 0:\n            break\n" if form == "break" else ""
        loop = (f"    i = zm.{dtype}({start})\n    n = zm.{dtype}({bound})\n"
                f"    while {test}:\n{leave}        trips += 1\n        i += zm.{dtype}({step})\n")
    source = (f"import zymo as zm\n\n\n@zm.kernel\ndef counted(x, out):\n    trips = 0\n{loop}"
              f"    out[0] = trips\n")
    path = os.path.join(_SOURCES, f"loop_{abs(hash(source))}.py")
    with open(path, "w") as f:
        f.write(source)
    spec_ = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module.counted


@settings(max_examples=50, deadline=None)
@given(start=st.integers(-20, 20), step=st.integers(-7, 7).filter(bool),
       bound=st.integers(-30, 60),
       predicate=st.sampled_from(["strict", "inclusive", "strict-mirrored", "inclusive-mirrored"]),
       dtype=st.sampled_from(["i32", "i64"]), form=st.sampled_from(["while", "break", "range"]))
def test_most_trips_is_the_trip_count_of_a_loop_that_runs_to_its_bound(start, step, bound,
                                                                       predicate, dtype, form):
    kernel = _bounded_loop(start, step, bound, predicate, dtype, form)
    x, out = np.zeros(1), np.zeros(1, np.int64)
    module = kernel.specialize(x, out).module
    loops = [op for op in module.walk() if isinstance(op, While)]
    assert len(loops) == 1
    found = most_trips(loops[0])
    assert found is not None
    kernel.on("interp")[1, 1](x, out)
    assert found[3] == out[0]            # no break taken: the bound is the trip count
    x[0] = 1.0
    kernel.on("interp")[1, 1](x, out)
    assert out[0] <= found[3]


@pytest.mark.parametrize("start, bound", [(0, I32_MAX), (I32_MAX - 2, I32_MAX)])
def test_most_trips_refuses_a_counter_that_can_wrap(start, bound):
    """`i <= MAX` holds for every i32: the counter wraps and the loop need not end."""
    kernel = _bounded_loop(start, 3, bound, "inclusive", "i32", "while")
    module = kernel.specialize(np.zeros(1), np.zeros(1, np.int64)).module
    loop = next(op for op in module.walk() if isinstance(op, While))
    assert most_trips(loop) is None


def test_most_trips_needs_a_counter_that_moves_every_trip():
    assert all(most_trips(op) is None for kernel in (doubling, conditional_step)
               for op in kernel.specialize(np.zeros(8, np.float32), np.zeros(8, np.float32))
               .module.walk() if isinstance(op, While))
