"""Kernels for bench/launch_overhead.py (zymo reads kernel source, so they live in a file)."""
import zymo as zm


@zm.kernel
def args0():
    pass


@zm.kernel
def args1(a0):
    pass


@zm.kernel
def args4(a0, a1, a2, a3):
    pass


@zm.kernel
def args16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15):
    pass


@zm.kernel
def saxpy(a, x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]


KERNELS = {0: args0, 1: args1, 4: args4, 16: args16}
