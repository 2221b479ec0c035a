"""Derivatives of device functions, used inside kernels (the compiler expands them):

    out, tangent = zm.jvp(f, (x, y), (tx, ty))           # one direction, like jax.jvp
    J = zm.jacfwd(f, argnums=0, width=5)(q, n)          # forward-mode Jacobian, like jax.jacfwd

`jacfwd` seeds the identity basis in chunks of `width` directions (multivariate dual numbers: one
derivative evaluation carries `width` tangents in registers). `J` is nested tuples, outputs by
inputs: for a function returning a 5-tuple and `argnums=0` naming a 5-tuple argument, `J[i][j]` is
d out_i / d arg_j; with a tuple of argnums each row is a tuple over them, as in JAX.
"""
from __future__ import annotations

import math

# ForwardDiff.jl's threshold: past it, wider duals cost registers faster than they save passes.
CHUNK_THRESHOLD = 12


def default_width(inputs: int) -> int:
    """ForwardDiff's chunk heuristic: all inputs at once up to 12, else the most even split
    into chunks of at most 12."""
    if inputs <= CHUNK_THRESHOLD:
        return max(inputs, 1)
    return math.ceil(inputs / math.ceil(inputs / CHUNK_THRESHOLD))


class Jacobian:
    """`zm.jacfwd(f, argnums, width)`: callable inside kernels."""

    zymo_transform = "jacobian"

    def __init__(self, f, argnums=0, width: int | None = None):
        if not callable(f):
            raise TypeError(f"zm.jacfwd takes a @zm.func device function, not {f!r}")
        numbers = argnums if isinstance(argnums, tuple) else (argnums,)
        if not numbers or not all(isinstance(a, int) and a >= 0 for a in numbers):
            raise TypeError(f"zm.jacfwd: argnums must be an int or a tuple of ints, not "
                            f"{argnums!r}")
        if width is not None and (not isinstance(width, int) or width < 1):
            raise TypeError(f"zm.jacfwd: width must be a positive int or None, not {width!r}")
        self.f, self.argnums, self.width = f, argnums, width

    def __call__(self, *args):
        raise TypeError("zm.jacfwd(f)(...) is evaluated inside kernels; call it from a "
                        "@zm.kernel or @zm.func")

    def __repr__(self) -> str:
        return f"zm.jacfwd({getattr(self.f, '__name__', self.f)}, argnums={self.argnums})"


def jacfwd(f, argnums=0, width: int | None = None) -> Jacobian:
    """The forward-mode Jacobian of device function `f` with respect to `argnums`."""
    return Jacobian(f, argnums, width)


jacfwd.zymo_transform = "jacfwd"
