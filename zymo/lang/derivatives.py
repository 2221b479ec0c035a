"""Derivatives of device functions, used inside kernels (the compiler expands them):

    out, tangent = zm.jvp(f, (x, y), (tx, ty))           # one direction, like jax.jvp
    J = zm.jacfwd(f, argnums=0, width=5)(q, n)          # forward-mode Jacobian, like jax.jacfwd
    out, pull = zm.vjp(f, x, y); dx, dy = pull(ct)       # reverse mode, like jax.vjp
    dx = zm.grad(f)(x, y)                                # f returns one float, like jax.grad
    J = zm.jacrev(f, argnums=0)(q, n)                    # one pullback per output row

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


def _argnums(argnums, who: str) -> tuple:
    numbers = argnums if isinstance(argnums, tuple) else (argnums,)
    if not numbers or not all(isinstance(a, int) and a >= 0 for a in numbers):
        raise TypeError(f"{who}: argnums must be an int or a tuple of ints, not {argnums!r}")
    return numbers


class Jacobian:
    """`zm.jacfwd(f, argnums, width)` (mode "fwd") or `zm.jacrev(f, argnums)` (mode "rev"):
    callable inside kernels."""

    zymo_transform = "jacobian"

    def __init__(self, f, argnums=0, width: int | None = None, mode: str = "fwd"):
        who = "zm.jacfwd" if mode == "fwd" else "zm.jacrev"
        if not callable(f):
            raise TypeError(f"{who} takes a @zm.func device function, not {f!r}")
        _argnums(argnums, who)
        if width is not None and (not isinstance(width, int) or width < 1):
            raise TypeError(f"{who}: width must be a positive int or None, not {width!r}")
        self.f, self.argnums, self.width, self.mode = f, argnums, width, mode

    def __call__(self, *args):
        raise TypeError(f"{self!r}(...) is evaluated inside kernels; call it from a "
                        "@zm.kernel or @zm.func")

    def __repr__(self) -> str:
        return (f"zm.jac{self.mode}({getattr(self.f, '__name__', self.f)}, "
                f"argnums={self.argnums})")


def jacfwd(f, argnums=0, width: int | None = None) -> Jacobian:
    """The forward-mode Jacobian of device function `f` with respect to `argnums`."""
    return Jacobian(f, argnums, width)


def jacrev(f, argnums=0) -> Jacobian:
    """The reverse-mode Jacobian of device function `f` with respect to `argnums`: one
    pullback per float result (cheaper than `jacfwd` when results are fewer than inputs)."""
    return Jacobian(f, argnums, mode="rev")


class Gradient:
    """`zm.grad(f, argnums)` of a device function returning one float: callable inside
    kernels, gives d f / d args[argnums] shaped like that argument (a tuple over argnums when
    argnums is a tuple)."""

    zymo_transform = "gradient"

    def __init__(self, f, argnums=0):
        _argnums(argnums, "zm.grad")
        self.f, self.argnums = f, argnums

    def __call__(self, *args):
        raise TypeError(f"{self!r}(...) is evaluated inside kernels; call it from a "
                        "@zm.kernel or @zm.func")

    def __repr__(self) -> str:
        return f"zm.grad({getattr(self.f, '__name__', self.f)}, argnums={self.argnums})"


def vjp(f, *primals):
    """`out, pull = zm.vjp(f, *primals)` inside kernels: `pull(ct)` gives one cotangent per
    primal, shaped like it (reverse mode through the device function, like `jax.vjp`)."""
    raise TypeError("zm.vjp(f, *primals) of a device function is evaluated inside kernels; "
                    "for a kernel's reverse mode use zm.grad(kernel)")


jacfwd.zymo_transform = "jacfwd"
jacrev.zymo_transform = "jacrev"
vjp.zymo_transform = "vjp"
