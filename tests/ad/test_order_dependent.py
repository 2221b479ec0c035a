"""Derivatives of kernels whose values depend on how threads interleave (atomics' old values,
reads of atomically updated memory, activemask): the derivative keeps what its own forward
sweep saw and never runs such an op again; where it cannot keep it, a compile error names the
line. Checked exactly against the order each launch produced, which differs from launch to
launch on the CPU's thread pool."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from ad import race_kernels as R

BACKENDS = ("interp", "cpu")


def exact_inputs(n, seed):
    """Distinct x in [1, 2) and seeds dy with few mantissa bits: every product the derivative
    forms is exact, so the gradient can be compared with ==."""
    rng = np.random.default_rng(seed)
    x = 1.0 + rng.permutation(n) / n
    dy = rng.integers(-1000, 1000, n) / 64.0
    return x, dy


@pytest.mark.parametrize("backend", BACKENDS)
def test_slot_counter_gradient_follows_the_derivatives_own_order(backend):
    n = 64 * 32   # many blocks: the CPU's thread pool interleaves them differently per launch
    for seed in range(3):
        x, dy_seed = exact_inputs(n, seed)
        y, dx, dy = np.zeros(n), np.zeros(n), dy_seed.copy()
        cnt = np.zeros(1, np.int32)
        zm.grad(R.slots).on(backend)[64, 32](cnt, zm.Duplicated(x, dx), zm.Duplicated(y, dy))
        assert cnt[0] == n, "the derivative's forward sweep runs each atomic once per thread"
        assert not dy.any(), "the output cotangents are consumed"
        R.check_slots_gradient(dx, dy_seed, x, y)


def test_slot_counter_gradient_through_a_kernel_bound_to_the_interpreter():
    n = 256
    x, dy_seed = exact_inputs(n, 7)
    y, dx, dy = np.zeros(n), np.zeros(n), dy_seed.copy()
    cnt = np.zeros(1, np.int32)
    zm.grad(R.slots.on("interp"))[8, 32](cnt, zm.Duplicated(x, dx), zm.Duplicated(y, dy))
    assert cnt[0] == n
    R.check_slots_gradient(dx, dy_seed, x, y)


@pytest.mark.parametrize("backend", BACKENDS)
def test_slot_counter_in_a_loop_with_a_scalar_trip_count_is_taped(backend):
    n, m = 32 * 16, 3
    x, _ = exact_inputs(n, 3)
    dy_seed = np.random.default_rng(4).integers(-1000, 1000, n * m) / 64.0
    y, dx, dy = np.zeros(n * m), np.zeros(n), dy_seed.copy()
    cnt = np.zeros(1, np.int32)
    zm.grad(R.slots_loop).on(backend)[16, 32](cnt, zm.Duplicated(x, dx), zm.Duplicated(y, dy),
                                             m)
    assert cnt[0] == n * m
    R.check_slots_loop_gradient(dx, dy_seed, x, y, m)


def test_slot_counter_in_a_loop_with_a_trip_count_from_memory_is_a_compile_error():
    n = 64
    counts = np.full(n, 2, np.int32)
    with pytest.raises(zm.CompileError) as info:
        zm.grad(R.slots_loop_from_memory).on("cpu")[2, 32](
            np.zeros(1, np.int32), zm.Duplicated(np.ones(n), np.zeros(n)),
            zm.Duplicated(np.zeros(2 * n), np.ones(2 * n)), counts)
    text = str(info.value)
    assert "race_kernels.py" in text and "slot = zm.atomic.add(cnt, 0, 1)" in text
    assert "interleave" in text and "trip counts the launch can compute" in text


def test_a_counter_read_inside_a_loop_is_kept_not_read_again():
    """c = cnt[0] in the loop: read again in the reverse sweep it would be the final count.
    (A plain read racing with atomics: the interpreter reports it, the CPU runs it.)"""
    backend = "cpu"
    n = 32 * 8
    x = 1.0 + np.arange(n) / n
    y, dx, dy = np.zeros(n), np.zeros(n), np.ones(n)
    cnt = np.zeros(1, np.int32)
    zm.grad(R.counter_read_in_loop).on(backend)[8, 32](cnt, zm.Duplicated(x, dx),
                                                      zm.Duplicated(y, dy), 1)
    c = np.rint(y / x - x)     # y = x * (x + c): what each thread read
    assert c.min() >= 1 and c.max() <= n
    np.testing.assert_allclose(dx, 2 * x + c, rtol=1e-12)


@zm.kernel
def mask_in_loop(x, y):
    i = zm.grid(1)
    acc = x[i]
    for k in range(3):
        if zm.threadIdx.x % 2 == 0:
            acc = acc * (x[i] + (zm.activemask() & 3))
    y[i] = acc


def test_activemask_in_a_loop_is_taped_not_recomputed():
    spec = zm.grad(mask_in_loop).specialize(zm.Duplicated(zm.Array(zm.f64, 1),
                                                          zm.Array(zm.f64, 1)),
                                            zm.Duplicated(zm.Array(zm.f64, 1),
                                                          zm.Array(zm.f64, 1)))
    assert spec.ir("ad").count("warp.activemask") == 1
    for backend in BACKENDS:
        x = np.random.default_rng(5).uniform(1, 2, 64)
        report = zm.check_grad(mask_in_loop, 2, 32, zm.Duplicated(x, np.zeros(64)),
                               zm.Duplicated(np.zeros(64), np.zeros(64)), backend=backend)
        assert report.ok, str(report)


@zm.func
def masked_square(v):
    return v * v * (zm.activemask() & 3)


@zm.kernel
def pullback_of_masked(x, y):
    i = zm.grid(1)
    out, pull = zm.vjp(masked_square, x[i])
    y[i] = pull(1.0)[0] + out


def test_pullback_of_a_device_function_with_activemask_is_a_compile_error():
    with pytest.raises(zm.CompileError) as info:
        pullback_of_masked.on("cpu")[1, 32](np.ones(32), np.zeros(32))
    text = str(info.value)
    assert "test_order_dependent.py" in text and "warp.activemask" in text
    assert "pass its value in" in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_mode_runs_each_atomic_once(backend):
    n = 32 * 16
    x, _ = exact_inputs(n, 6)
    y, tx, ty = np.zeros(n), np.random.default_rng(6).integers(-50, 50, n) / 8.0, np.zeros(n)
    cnt = np.zeros(1, np.int32)
    zm.jvp(R.slots).on(backend)[16, 32](cnt, zm.Duplicated(x, tx), zm.Duplicated(y, ty))
    assert cnt[0] == n
    owners = R.slot_owners(x, y)
    assert np.array_equal(ty, 2 * x[owners] * tx[owners])
