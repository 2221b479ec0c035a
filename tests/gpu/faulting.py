"""A kernel for the faulting-launch test's subprocess (kernels need a source file)."""
import zymo as zm


@zm.kernel
def fill(x, value):
    i = zm.grid(1)
    if i < x.shape[0]:
        x[i] = value
