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
def show_array(x):
    print(x)


@zm.kernel
def show_structures(x, t):
    print(x[0] == 0, x[0] != 0)
    print(t, (x[0],))
    print(zm.threadIdx)
    print()


@zm.kernel
def show_many(r):
    print(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12],
          r[13], r[14], r[15], r[16], r[17], r[18], r[19], r[20], r[21], r[22], r[23], r[24],
          r[25], r[26], r[27], r[28], r[29], r[30], r[31], r[32])
