"""Definite assignment over if/elif chains: a name every branch of a chain assigns is taken as
assigned (numba accepts it; the fall-through path reads zero), a name some branch leaves
unassigned stays an error at its use."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm

BACKENDS = ("cpu", "interp")


@zm.kernel
def by_lane(arr):
    i = zm.threadIdx.x
    if i % 4 == 0:
        b = zm.ballot_sync(0x11111111, True)
    elif i % 4 == 1:
        b = zm.ballot_sync(0x22222222, True)
    elif i % 4 == 2:
        b = 12
    elif i % 4 == 3:
        b = 13
    arr[i] = b


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_branch_of_the_chain_assigns(backend):
    arr = np.zeros(32, np.uint32)
    by_lane.on(backend)[1, 32](arr)
    want = np.tile([0x11111111, 0x22222222, 12, 13], 8)
    np.testing.assert_array_equal(arr, want)


@zm.kernel
def falls_through(arr):
    i = zm.threadIdx.x
    if i == 0:
        b = 5
    elif i == 1:
        b = 6
    arr[i] = b


def test_the_fall_through_path_reads_zero():
    arr = np.full(4, -1, np.int64)
    falls_through.on("interp")[1, 4](arr)
    np.testing.assert_array_equal(arr, [5, 6, 0, 0])


@zm.kernel
def one_branch_misses(arr):
    i = zm.threadIdx.x
    if i == 0:
        b = 5
    elif i == 1:
        pass
    elif i == 2:
        b = 7
    arr[i] = b


@zm.kernel
def lone_if(arr):
    i = zm.threadIdx.x
    if i == 0:
        b = 5
    arr[i] = b


@pytest.mark.parametrize("kernel", [one_branch_misses, lone_if])
def test_a_name_a_branch_leaves_unassigned_is_an_error(kernel):
    with pytest.raises(zm.CompileError, match="'b' may be undefined here"):
        kernel.on("interp")[1, 4](np.zeros(4, np.int64))
