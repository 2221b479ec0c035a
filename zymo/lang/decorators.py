"""`@zm.func`: a device function, callable from kernels and other device functions."""
from __future__ import annotations

import functools


class DeviceFunction:
    """A Python function compiled where a kernel calls it (specialized per argument types)."""

    # the IR types its parameters are declared with (numba's `cuda.jit(sig, device=True)`):
    # kernels convert numbers they pass to them; None: specialized on what is passed
    param_types: tuple | None = None
    # the IR type it declares it returns (a scalar), or None: what its returns give
    return_type = None

    def __init__(self, py_func, inline: bool = True):
        self.py_func = py_func
        self.inline = inline
        functools.update_wrapper(self, py_func)

    def __call__(self, *args, **kwargs):
        # Outside kernels a device function is plain Python (handy for testing with NumPy).
        return self.py_func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<zymo device function {self.py_func.__qualname__}>"


def func(py_func=None, *, inline: bool = True):
    """Decorate a device function: `@zm.func` or `@zm.func(inline=True)`."""
    if py_func is None:
        return lambda f: DeviceFunction(f, inline=inline)
    return DeviceFunction(py_func, inline=inline)
