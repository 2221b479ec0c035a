"""The `cmath` functions in kernels against Python's cmath at the values where formulas go
wrong: signed zeros, infinities, NaNs, branch cuts, parts near overflow and subnormal ones.
Results must agree part by part, zeros with their sign, NaN with NaN; where cmath raises
(C's domain error) the kernel gives NumPy's value. Derivatives through the guarded arms stay
finite where the function is smooth; the CUDA lowering assembles with ptxas."""
import cmath
import itertools
import math

import numpy as np
import pytest

import zymo as zm
from zymo.backend import nvptx
from zymo.backend.nvptx import ptxas

BACKENDS = ("interp", "cpu")
needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")

NAMES = ["exp", "log", "log10", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin",
         "acos", "atan", "asinh", "acosh", "atanh"]
_NUMPY = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh,
          "acosh": np.arccosh, "atanh": np.arctanh}
# where the sign of an infinite part is unspecified (a domain error), NumPy's sin(z) is not
# -i sinh(iz) of its own sinh
_ROTATED = {"sin": ("sinh", True), "tan": ("tanh", True), "asin": ("asinh", True),
            "atan": ("atanh", True), "cos": ("cosh", False)}


def special_reals(dtype):
    f = np.finfo(np.dtype(dtype).char.lower() if np.dtype(dtype).kind == "c" else dtype)
    return [-math.inf, -3.5, -1.0, -0.0, 0.0, 0.5, 1.0, math.pi, math.inf, math.nan,
            float(f.max) / 2, -float(f.max) / 2, float(f.tiny) / 8, 2.5e-3]


def special_values(dtype):
    reals = special_reals(dtype)
    return np.array([complex(x, y) for x, y in itertools.product(reals, reals)], dtype)


def kernel_for(name):
    fn = getattr(cmath, name)

    @zm.kernel
    def k(a, out):
        i = zm.grid(1)
        if i < a.size:
            out[i] = fn(a[i])

    return k


KERNELS = {name: kernel_for(name) for name in NAMES}


def expected_at(name, z: complex) -> complex:
    try:
        return getattr(cmath, name)(z)
    except ValueError:   # C returns a value and flags a domain error: NumPy gives it
        if name in _ROTATED:   # f(z) = -i g(iz), as the kernel and CPython compute it
            g, back = _ROTATED[name]
            w = expected_at(g, complex(-z.imag, z.real))
            return complex(w.imag, -w.real) if back else w
        with np.errstate(all="ignore"):
            return complex(_NUMPY.get(name, getattr(np, name))(np.complex128(z)))
    except OverflowError:
        return None


def part_differs(got: float, want: float, rtol: float, scale: float) -> bool:
    if math.isnan(want):
        return not math.isnan(got)
    if want == 0 or math.isinf(want):
        return got != want or math.copysign(1, got) != math.copysign(1, want)
    return not abs(got - want) <= rtol * scale


def check(got, expected, rtol):
    """`expected` holds Python complex numbers, or None where there is nothing to compare;
    they are rounded to got's precision first (overflowing or underflowing as it would)."""
    wrong = []
    for k, (g, want) in enumerate(zip(got, expected)):
        if want is None:
            continue
        with np.errstate(all="ignore"):
            want = complex(np.asarray(want).astype(got.dtype))
        scale = abs(want) if math.isfinite(abs(want)) else 1.0
        if part_differs(g.real, want.real, rtol, scale) or \
                part_differs(g.imag, want.imag, rtol, scale):
            wrong.append((k, complex(g), want))
    assert not wrong, f"{len(wrong)} differ, e.g. (index, got, expected) {wrong[:4]}"


def rtol_of(dtype):
    return 8 * np.finfo(np.float32 if dtype == np.complex64 else np.float64).eps


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("name", NAMES)
def test_special_values_match_cmath(name, dtype, backend):
    a = special_values(dtype)
    out = np.zeros_like(a)
    KERNELS[name].on(backend)[(a.size + 63) // 64, 64](a, out)
    check(out, [expected_at(name, complex(z)) for z in a], rtol_of(dtype))


@zm.kernel
def conversions(r, phi, a, rect_out, polar_out, log_base_out):
    i = zm.grid(1)
    if i < r.size:
        rect_out[i] = cmath.rect(r[i], phi[i])
        polar_out[i] = complex(*cmath.polar(a[i]))   # a tuple spread into arguments
        log_base_out[i] = cmath.log(a[i], a[(i + 7) % a.size])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_rect_polar_and_log_base_match_cmath(dtype, backend):
    a = special_values(dtype)
    r, phi = a.real.copy(), a.imag.copy()
    rect_out, polar_out, log_base_out = (np.zeros_like(a) for _ in range(3))
    conversions.on(backend)[(a.size + 63) // 64, 64](r, phi, a, rect_out, polar_out,
                                                      log_base_out)

    def rect(r, phi):
        try:
            return cmath.rect(r, phi)
        except ValueError:   # a nonzero r and an infinite phi: no direction
            return complex(math.inf if math.isinf(r) else math.nan, math.nan)

    def polar(z):
        try:
            return complex(*cmath.polar(z))
        except OverflowError:   # |z| beyond the largest double
            return complex(math.inf, cmath.phase(z))

    def log_base(z, base):
        try:
            return cmath.log(z, base)
        except ValueError:   # log 0, or a base whose log is 0: Python raises
            return None

    check(rect_out, [rect(float(x), float(t)) for x, t in zip(r, phi)], rtol_of(dtype))
    check(polar_out, [polar(complex(z)) for z in a], rtol_of(dtype))
    # a quotient of two logarithms: its parts carry the error of both
    check(log_base_out, [log_base(complex(z), complex(w)) for z, w in zip(a, np.roll(a, -7))],
          4 * rtol_of(dtype))


@pytest.mark.parametrize("backend", BACKENDS)
def test_quotient_keeps_cpythons_zero_signs(backend):
    @zm.kernel
    def quotient(a, b, out):
        i = zm.grid(1)
        if i < a.size:
            out[i] = a[i] / b[i]

    reals = [-2.0, -0.0, 0.0, 1.5, math.inf, math.nan]
    pairs = [(complex(x, y), complex(u, v)) for x, y, u, v in itertools.product(reals, repeat=4)
             if (u, v) != (0, 0)]
    a, b = (np.array(side, np.complex128) for side in zip(*pairs))
    out = np.zeros_like(a)
    quotient.on(backend)[(a.size + 63) // 64, 64](a, b, out)
    check(out, [z / w for z, w in pairs], 4e-16)


# ---- derivatives stay finite and right through the guarded arms ----------------------------
@zm.kernel
def smooth(x, y, out):
    i = zm.grid(1)
    if i < x.size:
        z = complex(x[i], y[i])
        w = cmath.acos(z) + cmath.atanh(z) * 0.5 + cmath.asinh(z) - cmath.acosh(z + 3.0)
        v = cmath.tanh(z) + cmath.sqrt(z + 2.0) + cmath.log(z + 2.5) + cmath.exp(z)
        out[i] = w.real + w.imag + v.real - v.imag


@pytest.mark.parametrize("backend", BACKENDS)
def test_derivatives_through_the_inverse_functions(backend):
    # 0 included: acos, atanh and asinh are smooth there, their large-argument arms are not
    x = np.array([0.0, 0.3, -0.4, 0.1, -0.2, 0.25, 0.0, 0.45])
    y = np.array([0.0, 0.2, 0.1, -0.5, -0.3, 0.0, 0.35, -0.05])
    args = [zm.Duplicated(x, np.zeros(8)), zm.Duplicated(y, np.zeros(8)),
            zm.Duplicated(np.zeros(8), np.zeros(8))]
    assert zm.check_grad(smooth, 1, 8, *args, backend=backend).ok


def test_gradient_of_sqrt_matches_the_analytic_one():
    @zm.kernel
    def root(x, y, out):
        i = zm.grid(1)
        if i < x.size:
            out[i] = cmath.sqrt(complex(x[i], y[i])).real

    x, y = np.array([0.5, -1.0, 2.0, 1e-3]), np.array([2.0, 0.25, -1.0, 0.0])
    dx, dy = np.zeros(4), np.zeros(4)
    zm.grad(root).on("cpu")[1, 4](zm.Duplicated(x, dx), zm.Duplicated(y, dy),
                                   zm.Duplicated(np.zeros(4), np.ones(4)))
    slope = 0.5 / np.sqrt(x + 1j * y)   # d sqrt / dz; Re f depends on x as Re f', on y as -Im f'
    np.testing.assert_allclose(dx, slope.real, rtol=1e-12)
    np.testing.assert_allclose(dy, -slope.imag, rtol=1e-12)


# ---- CUDA: PTX that ptxas accepts ----------------------------------------------------------
@needs_ptxas
@pytest.mark.parametrize("dtype", [zm.c64, zm.c128])
def test_ptx_assembles(dtype):
    arr = zm.Array(dtype, 1)
    part = zm.Array(dtype.part, 1)
    for kernel, types in ((KERNELS["acos"], (arr, arr)), (KERNELS["exp"], (arr, arr)),
                          (KERNELS["tanh"], (arr, arr)),
                          (conversions, (part, part, arr, arr, arr, arr))):
        compiled = nvptx.compile(kernel.specialize(*types).optimized, arch="sm_80")
        ptxas.assemble(compiled.ptx, "sm_80")


# ---- NumPy's order of complex numbers, np.log2 -----------------------------------------------
@zm.kernel
def ordered(a, b, flags, logs):
    i = zm.grid(1)
    if i < a.size:
        flags[i, 0] = np.less(a[i], b[i])
        flags[i, 1] = np.less_equal(a[i], b[i])
        flags[i, 2] = np.greater(a[i], b[i])
        flags[i, 3] = np.greater_equal(a[i], b[i])
        flags[i, 4] = np.less(a[i], 1.5)
        logs[i] = np.log2(a[i])


@pytest.mark.parametrize("backend", BACKENDS)
def test_ordering_ufuncs_and_log2_follow_numpy(backend):
    reals = [-1.0, 0.0, 1.5, math.inf, math.nan]
    pairs = list(itertools.product(reals, repeat=4))
    a = np.array([complex(x, y) for x, y, _, _ in pairs])
    b = np.array([complex(u, v) for _, _, u, v in pairs])
    flags, logs = np.zeros((a.size, 5), bool), np.zeros_like(a)
    ordered.on(backend)[(a.size + 63) // 64, 64](a, b, flags, logs)
    with np.errstate(all="ignore"):
        expected = np.stack([np.less(a, b), np.less_equal(a, b), np.greater(a, b),
                             np.greater_equal(a, b), np.less(a, 1.5)], axis=1)
        np.testing.assert_array_equal(flags, expected)
        finite = np.isfinite(a) & (a != 0)
        np.testing.assert_allclose(logs[finite], np.log2(a[finite]), rtol=1e-15)


@zm.kernel
def ordered_arrays(a, b, out):
    np.greater_equal(a, b, out)


def test_ordering_ufunc_on_complex_arrays():
    a = np.array([1 + 2j, 1 + 2j, 2 - 1j, complex(1, math.nan)], np.complex64)
    b = np.array([1 + 3j, 1 + 2j, 1 + 9j, 0j], np.complex64)
    out = np.zeros(4, bool)
    ordered_arrays.on("cpu")[1, 1](a, b, out)
    np.testing.assert_array_equal(out, np.greater_equal(a, b))


def test_complex_operands_of_less_than_stay_an_error():
    # Python and numba order no complex numbers with <; only NumPy's ufuncs do
    @zm.kernel
    def bad(a, out):
        i = zm.grid(1)
        out[i] = a[i] < a[0]

    with pytest.raises(zm.CompileError, match="not ordered"):
        bad.on("cpu")[1, 2](np.ones(2, np.complex128), np.zeros(2, bool))


def test_spreading_what_is_not_a_tuple_is_an_error_at_the_line():
    @zm.kernel
    def spread(a, out):
        i = zm.grid(1)
        out[i] = complex(*a)

    with pytest.raises(zm.CompileError, match="cannot spread") as error:
        spread.on("cpu")[1, 2](np.ones(2), np.zeros(2, np.complex128))
    assert "complex(*a)" in str(error.value)
