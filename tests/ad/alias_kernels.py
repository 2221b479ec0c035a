"""Kernels launched with arguments that share memory, and a finite-difference check of a
derivative over the *memory* the arguments are views of (`zm.check_grad` copies each argument,
which would undo the sharing); shared by `test_aliased_arguments.py` and the GPU tests."""
from __future__ import annotations

import numpy as np

import zymo as zm


@zm.kernel
def mul(a, b, y):
    i = zm.grid(1)
    if i < y.shape[0]:
        y[i] = a[i] * b[i]


@zm.kernel
def square_in_place(x, y):
    """y[i] = x[i]**2; launched with y the same array as x."""
    i = zm.grid(1)
    if i < y.shape[0]:
        y[i] = x[i] * x[i]


@zm.kernel
def unused_second(a, b, y):
    """Never touches b."""
    i = zm.grid(1)
    if i < y.shape[0]:
        y[i] = a[i] * a[i]


def views_check(launch, buffers: dict, args, backend: str, directions: int = 3,
                seed: int = 0, to_device=None):
    """Reverse mode on memory shared by arguments. `buffers`: name -> float64 array (the
    memory); `args(memory, shadows)` builds the grad launch's arguments from views of the
    buffers and (when `shadows` is not None) the same views of their shadows; with
    `shadows=None`, the primal launch's plain arguments. The derivative's shadows after the
    launch must be J^T s, J = d(final memory) / d(initial memory), s the seeded shadows:
    compared with central differences of <s, F(memory + h v)> along random v. `to_device`
    moves arrays to the GPU and back (two functions), for the GPU tests."""
    there, back = to_device or ((lambda a: a), (lambda a: a))
    rng = np.random.default_rng(seed)
    seeds = {k: rng.standard_normal(v.shape) for k, v in buffers.items()}
    memory = {k: there(v.copy()) for k, v in buffers.items()}
    shadows = {k: there(v.copy()) for k, v in seeds.items()}
    zm.grad(launch.kernel).on(backend)[launch.grid, launch.block](*args(memory, shadows))
    adjoint = {k: back(v) for k, v in shadows.items()}

    def projected(step: dict) -> float:
        state = {k: there(buffers[k] + step[k]) for k in buffers}
        launch.kernel.on(backend)[launch.grid, launch.block](*args(state, None))
        return sum(float(np.vdot(seeds[k], back(state[k]))) for k in buffers)

    for _ in range(directions):
        v = {k: rng.standard_normal(b.shape) for k, b in buffers.items()}
        h = 1e-6
        fd = (projected({k: h * v[k] for k in v}) - projected({k: -h * v[k] for k in v})) \
            / (2 * h)
        ad = sum(float(np.vdot(adjoint[k], v[k])) for k in v)
        assert abs(fd - ad) <= 1e-6 * max(1.0, abs(fd)), f"<J^T s, v> = {ad}, FD {fd}"


class Launch:
    def __init__(self, kernel, grid, block):
        self.kernel, self.grid, self.block = kernel, grid, block
