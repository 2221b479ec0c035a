"""Kernels whose values depend on how threads interleave (atomics' old values, activemask) and
the checks that tell whether a derivative kept what its own forward sweep saw; shared by the
CPU tests (`test_order_dependent.py`) and the GPU ones (`tests/gpu/test_grad_races.py`)."""
from __future__ import annotations

import numpy as np

import zymo as zm


@zm.kernel
def slots(cnt, x, y):
    """Each thread takes the next free slot of `y`: which slot is the launch's order."""
    i = zm.grid(1)
    if i < x.shape[0]:
        slot = zm.atomic.add(cnt, 0, 1)
        y[slot] = x[i] * x[i]


@zm.kernel
def slots_loop(cnt, x, y, m):
    """m slots per thread, taken inside a loop whose trip count the launch knows (a scalar
    argument): the old values are kept on a global tape."""
    i = zm.grid(1)
    if i < x.shape[0]:
        for k in range(m):
            slot = zm.atomic.add(cnt, 0, 1)
            y[slot] = x[i] * x[i] + 10.0 * k


@zm.kernel
def slots_loop_from_memory(cnt, x, y, counts):
    """As `slots_loop`, but the trip count is read from memory: no tape can be sized."""
    i = zm.grid(1)
    if i < x.shape[0]:
        for k in range(counts[i]):
            slot = zm.atomic.add(cnt, 0, 1)
            y[slot] = x[i] * x[i] + 10.0 * k


@zm.kernel
def counter_read_in_loop(cnt, x, y, m):
    """Reads a counter other threads keep incrementing: the value read is the launch's order
    too, and the reverse sweep needs it (d acc / d x = acc / (x + c) * ...)."""
    i = zm.grid(1)
    if i < x.shape[0]:
        zm.atomic.add(cnt, 0, 1)
        acc = x[i]
        for k in range(m):
            c = cnt[0]
            acc = acc * (x[i] + c)
        y[i] = acc


def slot_owners(x, y):
    """For each slot s of `y` filled by `slots` (y[s] = x[i]**2), the thread i that took it;
    x must hold distinct values in [1, 2)."""
    order = np.argsort(x)
    found = np.searchsorted(x[order] ** 2, y)
    owners = order[np.clip(found, 0, len(x) - 1)]
    assert np.array_equal(x[owners] ** 2, y), "every slot holds one thread's x**2"
    assert len(set(owners.tolist())) == len(x), "every thread took exactly one slot"
    return owners


def check_slots_gradient(dx, dy_seed, x, y):
    """dx[i] == dy_seed[slot of i] * 2 * x[i], exactly, for the slot order the derivative's
    own forward sweep produced (read back from y)."""
    owners = slot_owners(x, y)
    expected = np.zeros_like(dx)
    expected[owners] = dy_seed * 2 * x[owners]
    wrong = np.flatnonzero(dx != expected)
    assert wrong.size == 0, (f"{wrong.size} of {dx.size} gradients do not follow the slot "
                             f"order of the derivative's forward sweep (first: {wrong[:5]})")


def check_slots_loop_gradient(dx, dy_seed, x, y, m):
    """`slots_loop`: y[s] = x[i]**2 + 10 k; dx[i] = sum over its m slots of dy[s] * 2 x[i]."""
    k = np.floor(y / 10.0 + 0.05).astype(np.int64)   # x**2 < 4: the tens give k
    squares = y - 10.0 * k
    owners = np.argmin(np.abs(squares[:, None] - (x ** 2)[None, :]), axis=1)
    counts = np.bincount(owners, minlength=len(x))
    assert (counts == m).all(), "every thread took m slots"
    expected = np.zeros_like(dx)
    np.add.at(expected, owners, dy_seed * 2 * x[owners])
    np.testing.assert_allclose(dx, expected, rtol=1e-12, atol=0)
