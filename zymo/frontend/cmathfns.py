"""The `cmath` functions as real arithmetic on the parts, value for value as CPython's cmath.

Each follows the algorithm of CPython's Modules/cmathmodule.c (Kahan's for the inverse
functions, rescaling where a part is tiny or huge), in the float type of the parts, so that
the result agrees with Python's to the last bit or two, signs of zero included; where a part
is infinite or NaN, the C99 Annex G value (special_values.py). Every branch is a `select`,
so each backend (interpreter, CPU, CUDA) runs the same IR.

Derivatives follow the pairs of reals, and a select sends its cotangent only to the arm
taken: the arm not taken gets zero, and zero times an infinite or NaN partial would still
poison the derivative. So where an arm is singular at points where the function is not
(the large-argument arm of acos at 0, tanh's general arm where cosh overflows), its
operands are swapped for harmless ones where it is not taken (`guard`).
"""
from __future__ import annotations

import math

from .realparts import Parts
from .special_values import INFINITE_BY_FINITE, TABLES, lookup

LN2 = math.log(2.0)
LN10 = math.log(10.0)


class Limits:
    """CPython's thresholds, for the float type of `p`'s parts."""

    def __init__(self, p: Parts):
        f = p.limits
        self.large = float(f.max) / 4          # beyond it, x + hypot(x, y) may overflow
        self.sqrt_large = math.sqrt(self.large)
        self.log_large = math.log(self.large)  # beyond it, exp and cosh overflow
        self.tiny = float(f.tiny)              # the smallest normal number
        self.sqrt_tiny = math.sqrt(self.tiny)
        self.digits = int(f.nmant) + 1
        self.scale_up = 2 * (self.digits // 2) + 1   # odd, and turns subnormals normal
        self.scale_down = -(self.scale_up + 1) // 2


def guard(p: Parts, taken, value, harmless: float):
    return p.select(taken, value, p.c(harmless))


def finite_or_special(p: Parts, z, general, name: str, computed=None):
    """`general` where both parts of z are finite, else the table's value; `computed` (a
    pair) in the cells of an infinite part and a finite nonzero one."""
    x, y = z
    special = lookup(p, TABLES[name], x, y, INFINITE_BY_FINITE if computed else frozenset())
    if computed is not None:
        at = p.both(p.is_inf(x), p.both(p.is_finite(y), p.not_(p.eq(y, 0.0))))
        special = p.either(at, computed, special)
    finite = p.both(p.is_finite(x), p.is_finite(y))
    return p.either(finite, general, special)


# ---- square root and logarithms ------------------------------------------------------------
def sqrt_(p: Parts, z):
    return finite_or_special(p, z, _sqrt_finite(p, z), "sqrt")


def _sqrt_finite(p: Parts, z):
    """sqrt of a z with finite parts: s = sqrt((|x| + |z|) / 2) (from x/8 and y/8, or from
    x and y scaled up when both are subnormal) and d = |y| / 2s; (s, d) or (d, s), signs
    from y."""
    lim = Limits(p)
    x, y = z
    zero = p.both(p.eq(x, 0.0), p.eq(y, 0.0))
    ax, ay = p.fabs(x), p.fabs(y)
    ax = guard(p, p.not_(zero), ax, 1.0)          # sqrt has an infinite slope at 0
    tiny = p.both(p.lt(ax, lim.tiny), p.lt(ay, lim.tiny))
    sx = p.ldexp(guard(p, tiny, ax, lim.tiny), lim.scale_up)
    sy = p.ldexp(guard(p, tiny, ay, 0.0), lim.scale_up)
    s_tiny = p.ldexp(p.sqrt(p.add(sx, p.hypot(sx, sy))), lim.scale_down)
    eighth = p.c(0.125)
    gx = p.mul(ax, eighth)
    s_usual = p.mul(p.c(2.0), p.sqrt(p.add(gx, p.hypot(gx, p.mul(ay, eighth)))))
    s = p.select(tiny, s_tiny, s_usual)
    d = p.div(ay, p.mul(p.c(2.0), s))
    result = p.either(p.ge(x, 0.0), (s, p.copysign(d, y)), (d, p.copysign(s, y)))
    return p.either(zero, (p.c(0.0), y), result)


def _log_modulus(p: Parts, x, y):
    """log |z| without overflow for huge parts, with full precision for subnormal ones and
    through log1p where |z| is near 1."""
    lim = Limits(p)
    ax, ay = p.fabs(x), p.fabs(y)
    large = p.any(p.gt(ax, lim.large), p.gt(ay, lim.large))
    tiny = p.both(p.lt(ax, lim.tiny), p.lt(ay, lim.tiny))
    half = p.c(0.5)
    at_large = p.add(p.log(p.hypot(p.mul(ax, half), p.mul(ay, half))), p.c(LN2))
    sx = p.ldexp(guard(p, tiny, ax, lim.tiny), lim.digits)
    sy = p.ldexp(guard(p, tiny, ay, 0.0), lim.digits)
    at_tiny = p.sub(p.log(p.hypot(sx, sy)), p.c(lim.digits * LN2))
    h = p.hypot(ax, ay)
    bigger = p.gt(ax, ay)
    am, an = p.select(bigger, ax, ay), p.select(bigger, ay, ax)
    one = p.c(1.0)
    near_one = p.mul(p.log1p(p.add(p.mul(p.sub(am, one), p.add(am, one)), p.mul(an, an))), half)
    usual = p.select(p.both(p.ge(h, 0.71), p.le(h, 1.73)), near_one, p.log(h))
    return p.select(large, at_large, p.select(tiny, at_tiny, usual))


def log_(p: Parts, z):
    x, y = z
    general = (_log_modulus(p, x, y), p.atan2(y, x))
    return finite_or_special(p, z, general, "log")


def log10_(p: Parts, z):
    u, v = log_(p, z)
    return p.div(u, p.c(LN10)), p.div(v, p.c(LN10))


# ---- exponential, hyperbolic and circular functions ---------------------------------------
def _signed_infinities(p: Parts, y, real_sign: float, imag_sign: float):
    """(+-inf, +-inf) with the signs of cos y and sin y, times the given signs."""
    inf = p.c(math.inf)
    return (p.mul(p.copysign(inf, p.cos(y)), p.c(real_sign)),
            p.mul(p.copysign(inf, p.sin(y)), p.c(imag_sign)))


def _beyond_log_large(p: Parts, x, shift_by_sign: bool):
    """x, or x moved 1 toward 0 where exp(|x|) would overflow, and the factor (e or 1) that
    makes up for it: no arm is left to overflow."""
    lim = Limits(p)
    big = p.gt(p.fabs(x) if shift_by_sign else x, lim.log_large)
    step = p.copysign(p.c(1.0), x) if shift_by_sign else p.c(1.0)
    return p.select(big, p.sub(x, step), x), p.select(big, p.c(math.e), p.c(1.0))


def exp_(p: Parts, z):
    x, y = z
    shifted, factor = _beyond_log_large(p, x, False)
    e = p.exp(shifted)
    general = p.mul(p.mul(e, p.cos(y)), factor), p.mul(p.mul(e, p.sin(y)), factor)
    positive = p.gt(x, 0.0)
    zero = p.c(0.0)
    computed = p.either(positive, _signed_infinities(p, y, 1.0, 1.0),
                        (p.copysign(zero, p.cos(y)), p.copysign(zero, p.sin(y))))
    return finite_or_special(p, z, general, "exp", computed)


def cosh_(p: Parts, z):
    x, y = z
    shifted, factor = _beyond_log_large(p, x, True)
    general = (p.mul(p.mul(p.cos(y), p.cosh(shifted)), factor),
               p.mul(p.mul(p.sin(y), p.sinh(shifted)), factor))
    computed = p.either(p.gt(x, 0.0), _signed_infinities(p, y, 1.0, 1.0),
                        _signed_infinities(p, y, 1.0, -1.0))
    return finite_or_special(p, z, general, "cosh", computed)


def sinh_(p: Parts, z):
    x, y = z
    shifted, factor = _beyond_log_large(p, x, True)
    general = (p.mul(p.mul(p.cos(y), p.sinh(shifted)), factor),
               p.mul(p.mul(p.sin(y), p.cosh(shifted)), factor))
    computed = p.either(p.gt(x, 0.0), _signed_infinities(p, y, 1.0, 1.0),
                        _signed_infinities(p, y, -1.0, 1.0))
    return finite_or_special(p, z, general, "sinh", computed)


def tanh_(p: Parts, z):
    """tanh x (1 + tan^2 y) / (1 + tanh^2 x tan^2 y) + i tan y sech^2 x / (...), and
    (+-1, 4 sin y cos y e^-2|x|) where cosh x would overflow."""
    lim = Limits(p)
    x, y = z
    big = p.gt(p.fabs(x), lim.log_large)
    one = p.c(1.0)
    twice_sin_cos = p.mul(p.mul(p.c(2.0), p.sin(y)), p.cos(y))
    at_big = (p.copysign(one, x), p.mul(p.mul(p.mul(p.c(4.0), p.sin(y)), p.cos(y)),
                                        p.exp(p.mul(p.c(-2.0), p.fabs(x)))))
    gx = guard(p, p.not_(big), x, 0.0)
    tx, ty = p.tanh(gx), p.tan(y)
    cx = p.div(one, p.cosh(gx))
    txty = p.mul(tx, ty)
    denom = p.add(one, p.mul(txty, txty))
    usual = (p.div(p.mul(tx, p.add(one, p.mul(ty, ty))), denom),
             p.mul(p.mul(p.div(ty, denom), cx), cx))
    general = p.either(big, at_big, usual)
    computed = (p.copysign(one, x), p.copysign(p.c(0.0), twice_sin_cos))
    return finite_or_special(p, z, general, "tanh", computed)


# ---- inverse functions ----------------------------------------------------------------------
def _log_of_large(p: Parts, x, y):
    """log |z| for |z| beyond the overflow threshold: log hypot(x/2, y/2) + 2 log 2."""
    half = p.c(0.5)
    return p.add(p.log(p.hypot(p.mul(x, half), p.mul(y, half))), p.c(2 * LN2))


def _large(p: Parts, x, y):
    lim = Limits(p)
    return p.any(p.gt(p.fabs(x), lim.large), p.gt(p.fabs(y), lim.large))


def acos_(p: Parts, z):
    x, y = z
    large = _large(p, x, y)
    lx, ly = guard(p, large, x, 1.0), guard(p, large, y, 1.0)
    at_large = (p.atan2(p.fabs(ly), lx), p.neg(p.copysign(_log_of_large(p, lx, ly), ly)))
    one = p.c(1.0)
    s1 = _sqrt_finite(p, (p.sub(one, x), p.neg(y)))
    s2 = _sqrt_finite(p, (p.add(one, x), y))
    usual = (p.mul(p.c(2.0), p.atan2(s1[0], s2[0])),
             p.asinh(p.sub(p.mul(s2[0], s1[1]), p.mul(s2[1], s1[0]))))
    return finite_or_special(p, z, p.either(large, at_large, usual), "acos")


def acosh_(p: Parts, z):
    x, y = z
    large = _large(p, x, y)
    lx, ly = guard(p, large, x, 1.0), guard(p, large, y, 1.0)
    at_large = (_log_of_large(p, lx, ly), p.atan2(ly, lx))
    one = p.c(1.0)
    s1 = _sqrt_finite(p, (p.sub(x, one), y))
    s2 = _sqrt_finite(p, (p.add(x, one), y))
    usual = (p.asinh(p.add(p.mul(s1[0], s2[0]), p.mul(s1[1], s2[1]))),
             p.mul(p.c(2.0), p.atan2(s1[1], s2[0])))
    return finite_or_special(p, z, p.either(large, at_large, usual), "acosh")


def asinh_(p: Parts, z):
    x, y = z
    large = _large(p, x, y)
    lx, ly = guard(p, large, x, 1.0), guard(p, large, y, 1.0)
    modulus = _log_of_large(p, lx, ly)
    at_large = (p.select(p.ge(ly, 0.0), p.copysign(modulus, lx),
                         p.neg(p.copysign(modulus, p.neg(lx)))),
                p.atan2(ly, p.fabs(lx)))
    one = p.c(1.0)
    s1 = _sqrt_finite(p, (p.add(one, y), p.neg(x)))
    s2 = _sqrt_finite(p, (p.sub(one, y), x))
    usual = (p.asinh(p.sub(p.mul(s1[0], s2[1]), p.mul(s2[0], s1[1]))),
             p.atan2(y, p.sub(p.mul(s1[0], s2[0]), p.mul(s1[1], s2[1]))))
    return finite_or_special(p, z, p.either(large, at_large, usual), "asinh")


def atanh_(p: Parts, z):
    """For Re z >= 0 (atanh(-z) = -atanh(z) gives the rest): 1/z + i pi/2 for huge z,
    the limits at z = 1 +- tiny i, else log1p(4x / |1 - z|^2) / 4 + i arg(...) / 2."""
    lim = Limits(p)
    x0, y0 = z
    flip = p.lt(x0, 0.0)
    x, y = p.select(flip, p.neg(x0), x0), p.select(flip, p.neg(y0), y0)
    ay = p.fabs(y)
    one, two = p.c(1.0), p.c(2.0)
    large = p.any(p.gt(x, lim.sqrt_large), p.gt(ay, lim.sqrt_large))
    lx, ly = guard(p, large, x, 1.0), guard(p, large, y, 1.0)
    h = p.hypot(p.mul(lx, p.c(0.5)), p.mul(ly, p.c(0.5)))
    at_large = (p.div(p.div(p.div(lx, p.c(4.0)), h), h),
                p.copysign(p.c(math.pi / 2), y))
    at_one = p.both(p.eq(x, 1.0), p.lt(ay, lim.sqrt_tiny))
    pole = p.both(at_one, p.eq(ay, 0.0))
    sy = guard(p, p.both(at_one, p.not_(pole)), ay, 1.0)
    near_one = (p.neg(p.log(p.div(p.sqrt(sy), p.sqrt(p.hypot(sy, two))))),
                p.copysign(p.div(p.atan2(two, p.neg(sy)), two), y))
    near_one = p.either(pole, (p.c(math.inf), y), near_one)
    one_minus = p.sub(one, x)
    usual = (p.div(p.log1p(p.div(p.mul(p.c(4.0), x),
                                 p.add(p.mul(one_minus, one_minus), p.mul(ay, ay)))), p.c(4.0)),
             p.neg(p.div(p.atan2(p.mul(p.c(-2.0), y),
                                 p.sub(p.mul(one_minus, p.add(one, x)), p.mul(ay, ay))), two)))
    u, v = p.either(large, at_large, p.either(at_one, near_one, usual))
    general = p.either(flip, (p.neg(u), p.neg(v)), (u, v))
    return finite_or_special(p, z, general, "atanh")


# ---- f(z) = -i g(iz) -----------------------------------------------------------------------
def _rotated(g, back: bool = True):
    """f(z) = -i g(iz) (asin, atan, sin, tan), or g(iz) (cos = cosh(iz))."""

    def f(p: Parts, z):
        x, y = z
        u, v = g(p, (p.neg(y), x))
        return (v, p.neg(u)) if back else (u, v)

    return f


FUNCTIONS = {
    "exp": exp_, "log": log_, "log10": log10_, "sqrt": sqrt_,
    "sin": _rotated(sinh_), "cos": _rotated(cosh_, back=False), "tan": _rotated(tanh_),
    "sinh": sinh_, "cosh": cosh_, "tanh": tanh_,
    "asin": _rotated(asinh_), "acos": acos_, "atan": _rotated(atanh_),
    "asinh": asinh_, "acosh": acosh_, "atanh": atanh_,
}


def rect(p: Parts, r, phi):
    """r (cos phi + i sin phi); for an infinite r and a finite nonzero phi, infinities with
    the signs of r cos phi and r sin phi."""
    general = p.mul(r, p.cos(phi)), p.mul(r, p.sin(phi))
    sign = p.select(p.gt(r, 0.0), p.c(1.0), p.c(-1.0))
    inf = p.c(math.inf)
    computed = (p.mul(p.copysign(inf, p.cos(phi)), sign),
                p.mul(p.copysign(inf, p.sin(phi)), sign))
    return finite_or_special(p, (r, phi), general, "rect", computed)
