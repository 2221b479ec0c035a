"""Leaving loops as Python does: `for ... else` and `while ... else` (the else runs when the
loop ends without a break of its own; a break or continue in the else belongs to the enclosing
loop; a loop variable read after a loop that breaks keeps the value it broke with), and break,
continue and return in loops unrolled over tuples. Each kernel is also run as plain Python on
the same inputs and must agree."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import zymo as zm

from reference_check import BACKENDS, run


def search(x, y, out):
    i = -7
    for i in range(x):
        if i == y:
            z = y * 10
            break
    else:
        z = i * 2
    out[0] = z
    out[1] = i


def while_search(x, y, out):
    i = 0
    while i < x:
        if i * i > y:
            break
        i += 1
    else:
        i = -1
    out[0] = i


def nested(x, y, out):
    count = 0
    for i in range(x):
        for j in range(y):
            if i + j == 5:
                break
            count += 1
        else:
            count += 100
            continue          # the outer loop's
        count += 1000
        if count > 3000:
            break             # the outer loop's: skips its else
    else:
        count = -count
    out[0] = count


def no_break(x, y, out):
    total = 0
    for i in range(x):
        if i == y:
            continue
        total += i
    else:
        total += 1000
    k = 0
    while k < y:
        k += 1
    else:
        total += k
    out[0] = total


def returns(x, y, out):
    for i in range(x):
        if i == y:
            out[0] = 1
            return
    else:
        out[0] = 2
    out[1] = 3


def else_breaks_outer(x, y, out):
    n = 0
    while n < 10:
        k = 0
        while k < x:
            if k == y:
                break
            k += 1
        else:
            break             # leaves the outer while
        n += 1
    out[0] = n


def over_array(x, y, out):
    found = -1
    for v in out[2:6]:
        if v == x:
            found = v
            break
    else:
        found = y
    out[0] = found


def search_unset(x, y, out):
    # Python leaves `i` unbound when the loop runs no time: run with x >= 1 only
    for i in range(x):
        if i == y:
            break
    else:
        i += 100
    out[0] = i


def tuple_break(x, y, out):
    r = 0
    for v in (1, 4, 9):
        if v > x:
            r = v
            break
        out[1] += 1
    else:
        r = -1
    out[0] = r


def tuple_continue_return(x, y, out):
    for k, v in enumerate((2, 5, 7, 11)):
        if v == y:
            continue
        out[1] += v
        if v > x:
            out[0] = k
            return
    out[0] = 100


KERNELS = [tuple_break, tuple_continue_return, search, search_unset, while_search, nested, no_break, returns, else_breaks_outer, over_array]
INPUTS = list(itertools.product([0, 1, 3, 6], [-1, 0, 2, 5]))


@pytest.mark.parametrize("fn", KERNELS, ids=lambda f: f.__name__)
def test_loop_else_matches_python(fn):
    kernel = zm.kernel(fn)
    for x, y in INPUTS:
        if fn is search_unset and x == 0:
            continue
        start = np.array([0, 0, 3, 1, 6, 2, 0, 0], np.int64)
        want = start.copy()
        fn(x, y, want)
        for backend in BACKENDS:
            got = run(kernel, 1, 1, [x, y, start], backend)[2]
            np.testing.assert_array_equal(got, want, err_msg=f"{backend}: x={x} y={y}")
