"""Kernels that raise (tests/frontend/test_raise.py): the line numbers of the `raise`
statements are part of what the tests check, so the file changes only at its end."""
from __future__ import annotations

import zymo as zm


class NegativeInput(Exception):
    pass


BAD_INPUT = ValueError("bad input")   # an instance defined outside the kernel


@zm.kernel
def check_positive(x, out):
    i = zm.threadIdx.x
    out[i] = 1.0
    if x[i] < 0:
        raise NegativeInput("negative input")   # line 20
    out[i] = 2.0


@zm.kernel
def bare_class(x, out):
    i = zm.blockIdx.x * zm.blockDim.x + zm.threadIdx.x
    if x[i] > 100:
        raise NegativeInput
    out[i] = x[i]


@zm.kernel
def raise_instance(x, out):
    i = zm.threadIdx.x
    if x[i] == 0:
        raise BAD_INPUT
    out[i] = 1.0 / x[i]


@zm.kernel
def in_loop(x, out, n):
    i = zm.threadIdx.x
    total = 0.0
    for j in range(n):
        if x[i, j] == 0:
            raise ZeroDivisionError("zero entry")
        total += 1.0 / x[i, j]
    out[i] = total


@zm.func
def checked_sqrt(v):
    if v < 0:
        raise ValueError("sqrt of a negative number")
    return v ** 0.5


@zm.kernel
def through_device(x, out):
    i = zm.threadIdx.x
    out[i] = checked_sqrt(x[i])


@zm.kernel
def divide(x, y, out):
    i = zm.threadIdx.x
    out[i] = x[i] / y[i]


@zm.kernel
def floor_divide(x, y, out):
    i = zm.threadIdx.x
    out[i] = x[i] // y[i]


@zm.kernel
def modulo(x, y, out):
    i = zm.threadIdx.x
    out[i] = x[i] % y[i]


@zm.kernel
def shape_from_end(a, out):
    k = zm.threadIdx.x
    out[k] = a.shape[-k - 1]


@zm.kernel
def squared_unless_negative(x, out):
    i = zm.threadIdx.x
    if x[i] < -1e6:
        raise ValueError("out of range")
    out[i] = x[i] * x[i]
