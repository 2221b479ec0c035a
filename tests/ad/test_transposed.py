"""Transposed adjoints of shared-tile reads (`zymo.ad.transpose`): each reader leaves its
cotangent in a slot of its own and the thread that stored the element sums the slots. Checked
against float64 finite differences and the dot-product test on the interpreter (whose race
detector catches two threads writing one slot between barriers) and the CPU, with the
transform on and off, and the launch conditions it adds."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm
from ad.planned import read_modes
from zymo.runtime.grad import activity_of

BACKENDS = ("interp", "cpu")
T = 4


def dup(a):
    return zm.Duplicated(a, np.zeros_like(a))


def check(kernel, grid, block, *args, backend):
    report = zm.check_grad(kernel, grid, block, *args, backend=backend, directions=2)
    assert report.ok, str(report)


def shared_read_modes(kernel, *args) -> dict:
    """line -> the read modes the plan gave the reads of shared arrays on that line."""
    return read_modes(kernel, *args, keep=lambda op: op.array.type.space == "shared")[0]


@zm.kernel
def rows_and_columns(a, out):
    """A tile staged per time step and read along its rows (shared by the threads of a row:
    x free), its columns (y free), at a rotating column (a component that varies per thread
    but is not threadIdx: x free) and at a uniform element (every thread: x and y free)."""
    i, j, b = zm.threadIdx.x, zm.threadIdx.y, zm.blockIdx.x
    tile = zm.shared.array((T, T), zm.f64)
    total = 0.0
    for k in range(2):
        zm.syncthreads()
        tile[j, i] = math.sin(a[b, k, j, i]) + a[b, k, j, i] ** 2
        zm.syncthreads()
        for n in range(T):
            total += tile[j, n] * tile[n, i] + math.cos(tile[j, (i + n) % T]) * n
        total += tile[k, 1] * tile[j, i]
    out[b, j, i] = total


@pytest.mark.parametrize("transpose", ["1", "0"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_tile_reads_on_and_off(backend, transpose, monkeypatch):
    monkeypatch.setenv("ZYMO_AD_TRANSPOSE", transpose)
    a = np.random.default_rng(1).standard_normal((3, 2, T, T))
    check(rows_and_columns, 3, (T, T), dup(a), dup(np.zeros((3, T, T))), backend=backend)


def test_every_unowned_tile_read_is_transposed(monkeypatch):
    """(The read of the thread's own element too: the tile's reads differ, so none is owned.)"""
    a = np.zeros((3, 2, T, T))
    args = (dup(a), dup(np.zeros((3, T, T))))
    modes = shared_read_modes(rows_and_columns, *args)
    assert set().union(*modes.values()) == {"transposed"}, modes
    spec = zm.grad(rows_and_columns).specialize(*args)
    assert spec.assumptions.most == {("x", T), ("y", T), ("z", 1)}
    monkeypatch.setenv("ZYMO_AD_TRANSPOSE", "0")
    off = set().union(*shared_read_modes(rows_and_columns, *args).values())
    assert off and "transposed" not in off, off


@zm.kernel
def guarded_tile(a, out):
    """Threads beyond the tile take no part: a block wider than the tile is a valid launch,
    which the scratch slots (one per x up to the tile's width) do not cover."""
    i, j, b = zm.threadIdx.x, zm.threadIdx.y, zm.blockIdx.x
    tile = zm.shared.array((T, T), zm.f64)
    if i < T:
        tile[j, i] = a[b, j, i] * a[b, j, i]
    zm.syncthreads()
    if i < T:
        total = 0.0
        for n in range(T):
            total += tile[j, n] * a[b, j, i]
        out[b, j, i] = total


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_block_beyond_the_slots_takes_the_atomic_variant(backend):
    a = np.random.default_rng(2).standard_normal((2, T, T))
    out = np.zeros((2, T, T))
    for block in ((T, T), (2 * T, T)):
        check(guarded_tile, 2, block, dup(a), dup(out), backend=backend)
    kinds = [activity_of(dup(a)), activity_of(dup(out))]
    fits = zm.grad(guarded_tile)[2, (T, T)].prepare(kinds)
    wide = zm.grad(guarded_tile)[2, (2 * T, T)].prepare(kinds)
    assert fits.spec.plain_updates and not wide.spec.plain_updates


@zm.kernel
def tile_reset(a, out):
    """The tile is read, then overwritten with a constant and read again: the second reads'
    cotangents must not reach the first store (the constant store's adjoint drops them)."""
    i, j, b = zm.threadIdx.x, zm.threadIdx.y, zm.blockIdx.x
    tile = zm.shared.array((T, T), zm.f64)
    tile[j, i] = a[b, j, i] ** 3
    zm.syncthreads()
    total = 0.0
    for n in range(T):
        total += tile[j, n] * tile[n, i]
    zm.syncthreads()
    tile[j, i] = 2.0
    zm.syncthreads()
    for n in range(T):
        total += tile[n, j] * a[b, j, i]
    out[b, j, i] = total


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_constant_store_drops_the_later_reads_cotangents(backend):
    a = np.random.default_rng(3).standard_normal((2, T, T))
    check(tile_reset, 2, (T, T), dup(a), dup(np.zeros((2, T, T))), backend=backend)


@zm.kernel
def two_tiles_one_slot_set(a, out):
    """Two arrays whose reads share their free axes, and one array read with two different
    free-axis sets (two scratch arrays drained by one store)."""
    i, j, b = zm.threadIdx.x, zm.threadIdx.y, zm.blockIdx.x
    p = zm.shared.array((T, T), zm.f64)
    q = zm.shared.array((T, T), zm.f64)
    p[j, i] = a[b, j, i]
    q[j, i] = math.exp(a[b, i, j])
    zm.syncthreads()
    total = 0.0
    for n in range(T):
        total += p[j, n] * q[j, n] + p[n, i] * p[n, n]
    out[b, j, i] = total


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_tiles_and_slot_sets(backend):
    a = np.random.default_rng(4).standard_normal((2, T, T)) * 0.5
    check(two_tiles_one_slot_set, 2, (T, T), dup(a), dup(np.zeros((2, T, T))), backend=backend)
