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


@zm.kernel
def sum1(a0):
    i = zm.grid(1)
    if i < a0.shape[0]:
        a0[i] = 1.0


@zm.kernel
def sum4(a0, a1, a2, a3):
    """a0 written, the rest read, all at the thread's own element: every array is private
    (noalias), so each launch checks the 3 pairs with a0 for overlap."""
    i = zm.grid(1)
    if i < a0.shape[0]:
        a0[i] = a1[i] + a2[i] + a3[i]


@zm.kernel
def sum16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15):
    """As sum4: 15 pairs checked."""
    i = zm.grid(1)
    if i < a0.shape[0]:
        a0[i] = (a1[i] + a2[i] + a3[i] + a4[i] + a5[i] + a6[i] + a7[i] + a8[i] + a9[i]
                 + a10[i] + a11[i] + a12[i] + a13[i] + a14[i] + a15[i])


KERNELS = {0: args0, 1: args1, 4: args4, 16: args16}
WRITING = {0: args0, 1: sum1, 4: sum4, 16: sum16}   # noalias arrays whose overlap is checked
