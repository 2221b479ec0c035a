"""Kernels that print (module-level: compiled from source)."""
from __future__ import annotations

import zymo as zm

LIMIT = 3


@zm.kernel
def show(x, n):
    i = zm.grid(1)
    if i < LIMIT:
        print("thread", i, "of", n, "has", x[i], 50, "%")


@zm.kernel
def show_sep(x):
    i = zm.grid(1)
    if i == 0:
        print(x[0], zm.u8(200), -5, sep=", ", end="!\n")


@zm.kernel
def show_tuple(x):
    print((x[0], x[1]))
