"""Kernels the PyTorch and JAX tests share (on the CPU in tests/interop, on the GPU in
tests/gpu): at module level, so each compiles once per process."""
import zymo as zm
from bench.layer_kernels import dense_tanh  # noqa: F401 (the dense layer the bench times)


@zm.kernel
def scaled_sine(x, a, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = a * zm.math.sin(x[i]) * x[i]


@zm.kernel
def sum_of_squares(x, w, total):
    i = zm.grid(1)
    if i < x.shape[0]:
        zm.atomic.add(total, 0, w[i] * x[i] * x[i])


@zm.kernel
def polar(x, y, r2, q):
    i = zm.grid(1)
    if i < x.shape[0]:
        r2[i] = x[i] * x[i] + y[i] * y[i]
        q[i] = x[i] * y[i] - y[i]


@zm.kernel
def smooth(x, w, y):
    i = zm.grid(1)
    n = x.shape[0]
    if 0 < i < n - 1:
        y[i] = w[0] * x[i - 1] + w[1] * x[i] + w[2] * x[i + 1]
    elif i < n:
        y[i] = x[i]


