"""The memory model (README, "Guarantees"): what the compiler may assume about aliasing, and
what other threads observe across barriers, fences and atomics. Every backend must agree with
the interpreter on race-free kernels whatever their arguments share; the PTX keeps the stores
other threads read."""
from __future__ import annotations

import re

import numpy as np
import pytest

from zymo.diagnostics import StepLimitError
from zymo.passes.alias import private_arrays
from memory_kernels import (fences, look_back, partner, ping, publish, rows, shared_partner,
                            square_then_sine, wait_for_later_block)


def _partner_inputs(rng):
    return rng.random(65).astype(np.float32), rng.random(64).astype(np.float32)


def _interp(kernel, grid, block, *args):
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    kernel.on("interp")[grid, block](*copies)
    return copies


# ---- what the codegen stage proves ---------------------------------------------------------
def test_private_arrays_are_read_only_or_owned_by_one_thread():
    a, b = _partner_inputs(np.random.default_rng(0))
    found = private_arrays(partner.specialize(a, b).codegen.kernel)
    assert found.arguments == frozenset()            # both exchanged between threads
    x = np.ones(8, np.float32)
    found = private_arrays(square_then_sine.specialize(x, x.copy()).codegen.kernel)
    assert found.arguments == {0, 1} and found.written == {1} and found.single == {"y", "z"}
    found = private_arrays(publish.specialize(x, np.zeros(1, np.int32), x.copy())
                           .codegen.kernel)
    # data: written by one thread per block and read by all of it; flag: an atomic;
    # seen: owned through blockIdx * blockDim + threadIdx
    assert found.arguments == {2}


# ---- CPU and interpreter agree -------------------------------------------------------------
def test_partner_exchange_across_barriers_is_right_on_the_cpu():
    a, b = _partner_inputs(np.random.default_rng(1))
    want = _interp(partner, 1, 64, a, b)
    partner[1, 64](a, b)
    np.testing.assert_array_equal(a, want[0])
    np.testing.assert_array_equal(b, want[1])


def test_exchanges_in_loops_and_through_shared_memory_on_the_cpu():
    a = np.random.default_rng(6).random(64).astype(np.float32)
    want = _interp(ping, 1, 64, a, np.zeros(64, np.float32), 5)
    got = [a.copy(), np.zeros(64, np.float32), 5]
    ping[1, 64](*got)
    np.testing.assert_array_equal(got[0], want[0])
    x = np.random.default_rng(7).random(256).astype(np.float32)
    out = np.zeros(256, np.float32)
    shared_partner[4, 64](x, out)
    np.testing.assert_array_equal(out, _interp(shared_partner, 4, 64, x, out)[1])


def test_overlapping_arguments_take_the_conservative_build_on_the_cpu():
    x = np.random.default_rng(2).random(1000).astype(np.float32)
    square = x * x                 # y is x: the sine reads the square just stored
    want = square + np.sin(square.astype(np.float64)).astype(np.float32)
    y = x.copy()
    square_then_sine[4, 256](y, y)
    np.testing.assert_allclose(y, want, rtol=2e-6)


def test_overlapping_strided_views_match_the_interpreter():
    """Two view objects of the same strided elements: each thread reads and writes its own."""
    base = np.random.default_rng(5).random(2000).astype(np.float32)
    got = base.copy()
    square_then_sine[4, 256](got[::2], got[::2])
    want = base.copy()
    square_then_sine.on("interp")[4, 256](want[::2], want[::2])
    np.testing.assert_allclose(got, want, rtol=2e-6)
    np.testing.assert_array_equal(got[1::2], base[1::2])


def test_a_launch_shape_that_breaks_ownership_takes_the_conservative_build():
    """rows owns y[i] through the x axis only: a block with two threads along y makes them
    share elements, so the launch must not use the noalias build (the result is the same
    here, both threads add x once each in some order; the point is which build ran)."""
    x = np.ones(64, np.float32)
    y = np.zeros(64, np.float32)
    spec = rows.specialize(x, y)
    compiled = spec.compiled("cpu")
    rows[1, (64, 1)](x, y)
    assert compiled._safe is None
    rows[1, (64, 2)](x, y)
    assert compiled._safe is not None and "noalias" not in compiled._safe.llvm_ir


def test_fences_lower_to_scoped_fences_and_run_everywhere():
    data = np.zeros(4, np.float32)
    flag = np.zeros(1, np.int32)
    seen = np.zeros(4 * 32, np.float32)
    publish[4, 32](data, flag, seen)
    assert flag[0] == 4 and np.array_equal(seen, np.repeat(np.arange(4) * 3.0 + 1.0, 32))
    want = _interp(publish, 4, 32, np.zeros(4, np.float32), np.zeros(1, np.int32),
                   np.zeros(4 * 32, np.float32))
    np.testing.assert_array_equal(want[2], seen)
    ptx = publish.specialize(data, flag, seen).ptx()
    assert "fence.sc.gpu;" in ptx


# ---- the PTX keeps what other threads read ---------------------------------------------------
def _stores(ptx: str) -> int:
    return len(re.findall(r"\bst\.global", ptx))


def test_a_store_before_a_barrier_survives_in_the_ptx():
    a, b = _partner_inputs(np.random.default_rng(3))
    ptx = partner.specialize(a, b).ptx()
    # a[t] before the first barrier, b[t] between them, a[t] at the end
    assert _stores(ptx) == 3
    assert ".noalias" not in ptx and "ld.global.nc" not in ptx


def test_only_private_arrays_are_noalias_in_llvm():
    x = np.ones(8, np.float32)
    text = square_then_sine.specialize(x, x.copy()).llvm("cpu", optimized=False)
    header = next(line for line in text.splitlines() if line.startswith("define")
                  and "zymo.block." in line)
    assert header.count("noalias") == 2
    a, b = _partner_inputs(np.random.default_rng(4))
    text = partner.specialize(a, b).llvm("cpu", optimized=False)
    assert "noalias" not in text


def test_each_fence_scope_is_its_ptx_fence_and_keeps_the_stores_around_it():
    x = np.zeros(64, np.float32)
    fences[2, 32](x)
    assert np.all(x == 4.0)
    ptx = fences.specialize(x).ptx()
    order = re.findall(r"fence\.sc\.(cta|gpu|sys)|st\.global", ptx)
    assert order == ["", "cta", "", "gpu", "", "sys", ""]


# ---- spin-waits: a clear error where the backend cannot run the thread waited for ----------
@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_a_spin_wait_for_a_thread_that_runs_later_is_an_error_not_a_hang(backend):
    args = (np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(1, np.int32))
    with pytest.raises(StepLimitError, match=r"memory_kernels.py:\d+:\d+: this loop waits "
                                                r"for other threads(.|\n)*hint: launch on the GPU"):
        wait_for_later_block.on(backend)[2, 32](*args)


def test_a_spin_wait_for_earlier_blocks_runs_on_the_cpu():
    n = 64
    out = np.zeros(n, np.int32)
    look_back[n, 32](np.zeros(n, np.int32), np.zeros(n, np.int32), out)
    np.testing.assert_array_equal(out, np.cumsum(np.arange(n)))


def test_only_the_cpu_counts_spin_iterations():
    args = (np.zeros(1, np.int32),) * 3
    spec = wait_for_later_block.specialize(*args)
    cpu = spec.llvm("cpu", optimized=False)
    assert "268435456" in cpu                      # CPUTarget.spin_limit
    assert "268435456" not in spec.compiled("ptx-sm_90").llvm_ir
