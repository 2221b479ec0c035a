"""complex64 / complex128 in kernels: arrays and scalars, arithmetic with NumPy's promotion,
`.real`/`.imag`/`.conjugate()`, `abs`, `cmath`, derivatives through complex values, and PTX
that ptxas accepts. Every result is checked against NumPy (or Python's cmath)."""
import cmath

import numpy as np
import pytest

import zymo as zm
from zymo.backend import nvptx
from zymo.backend.nvptx import ptxas
from zymo.diagnostics import CompileError

BACKENDS = ("interp", "cpu")
needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
N = 64


def values(dtype, seed=0, scale=1.5):
    rng = np.random.default_rng(seed)
    return (scale * rng.standard_normal(N) + 1j * scale * rng.standard_normal(N)).astype(dtype)


def tolerance(dtype):
    return {"rtol": 2e-5, "atol": 2e-5} if np.dtype(dtype) == np.complex64 \
        else {"rtol": 1e-12, "atol": 1e-12}


@zm.kernel
def arithmetic(a, b, out):
    i = zm.grid(1)
    if i < a.size:
        z = a[i]
        w = b[i]
        out[i, 0] = z + w
        out[i, 1] = z - w
        out[i, 2] = z * w
        out[i, 3] = z / w
        out[i, 4] = -z
        out[i, 5] = z ** 3
        out[i, 6] = z ** -2
        out[i, 7] = z ** w
        out[i, 8] = z.conjugate()
        out[i, 9] = complex(z.imag, z.real)
        out[i, 10] = 2 * z + 1j
        out[i, 11] = z * 0.5 - w / 4


def arithmetic_expected(a, b):
    return np.stack([a + b, a - b, a * b, a / b, -a, a ** 3, a ** -2.0, a ** b, a.conj(),
                     a.imag + 1j * a.real, 2 * a + 1j, a * 0.5 - b / 4], axis=1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_arithmetic_matches_numpy(backend, dtype):
    a, b = values(dtype, 1), values(dtype, 2)
    out = np.zeros((N, 12), dtype)
    arithmetic.on(backend)[2, 32](a, b, out)
    expected = arithmetic_expected(a.astype(np.complex128), b.astype(np.complex128))
    np.testing.assert_allclose(out, expected, **tolerance(dtype) if dtype != np.complex64
                               else {"rtol": 1e-4, "atol": 1e-5})


@zm.kernel
def reals(a, out, flags):
    i = zm.grid(1)
    if i < a.size:
        z = a[i]
        out[i, 0] = abs(z)
        out[i, 1] = z.real
        out[i, 2] = z.imag
        out[i, 3] = cmath.phase(z)
        r, phi = cmath.polar(z)
        out[i, 4] = r * phi
        flags[i, 0] = z == a[0]
        flags[i, 1] = z != a[0]
        flags[i, 2] = cmath.isnan(z)
        flags[i, 3] = cmath.isinf(z)
        flags[i, 4] = cmath.isfinite(z)


@pytest.mark.parametrize("backend", BACKENDS)
def test_real_valued_functions_and_comparisons(backend):
    a = values(np.complex128, 3)
    a[5] = complex(np.nan, 1)
    a[6] = complex(1, np.inf)
    a[7] = a[0]
    out = np.zeros((N, 5))
    flags = np.zeros((N, 5), bool)
    reals.on(backend)[2, 32](a, out, flags)
    ok = np.isfinite(a)
    np.testing.assert_allclose(out[ok], np.stack([np.abs(a), a.real, a.imag, np.angle(a),
                                                  np.abs(a) * np.angle(a)], 1)[ok], rtol=1e-12)
    np.testing.assert_array_equal(flags, np.stack([a == a[0], a != a[0], np.isnan(a),
                                                   np.isinf(a), np.isfinite(a)], 1))


CMATH = ["exp", "log", "log10", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin",
         "acos", "atan", "asinh", "acosh", "atanh"]
SOURCE = '''
import cmath
import numpy as np
import zymo as zm


@zm.kernel
def k(a, out, out_np):
    i = zm.grid(1)
    if i < a.size:
        out[i] = cmath.{name}(a[i])
        out_np[i] = np.{numpy}(a[i])
'''
_NUMPY = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
          "acosh": "arccosh", "atanh": "arctanh"}


def cmath_kernel(name, tmp_path):
    path = tmp_path / f"cmath_{name}.py"
    path.write_text(SOURCE.format(name=name, numpy=_NUMPY.get(name, name)))
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace["k"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("name", CMATH)
def test_cmath_matches_python(name, dtype, backend, tmp_path):
    kernel = cmath_kernel(name, tmp_path)
    a = values(dtype, 4)
    # away from the branch cuts on the axes, where a rounding of the sign of zero decides
    a = np.where(np.abs(a.real) < 0.05, a + 0.1, a).astype(dtype)
    out, out_np = np.zeros(N, dtype), np.zeros(N, dtype)
    kernel.on(backend)[2, 32](a, out, out_np)
    fn = getattr(cmath, name)
    expected = np.array([fn(complex(z)) for z in a])
    scale = np.maximum(np.abs(expected), 1.0)
    rtol = 1e-4 if dtype == np.complex64 else 1e-11
    assert np.all(np.abs(out - expected) <= rtol * scale), (name, np.abs(out - expected).max())
    assert np.all(np.abs(out_np - expected) <= rtol * scale)


@zm.kernel
def promote(a32, x64, n, out):
    i = zm.grid(1)
    if i < a32.size:
        out[i, 0] = a32[i] * x64[i]        # complex64 * float64 -> complex128
        out[i, 1] = a32[i] + n              # complex64 + int32 -> complex128
        out[i, 2] = zm.c128(a32[i]) / 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_promotion(backend):
    a32 = values(np.complex64, 5)
    x64 = np.linspace(-1, 1, N)
    out = np.zeros((N, 3), np.complex128)
    spec = promote.specialize(a32, x64, np.int32(3), out)
    assert "c128" in spec.ir()
    promote.on(backend)[2, 32](a32, x64, np.int32(3), out)
    np.testing.assert_allclose(out[:, 0], a32 * x64, rtol=1e-6)
    np.testing.assert_allclose(out[:, 1], a32 + np.int32(3), rtol=1e-6)
    np.testing.assert_allclose(out[:, 2], a32.astype(np.complex128) / 3, rtol=1e-12)
    assert (a32 * x64).dtype == np.complex128 and (a32 + np.int32(3)).dtype == np.complex128


@zm.kernel
def scaled(a, s, t, out):
    i = zm.grid(1)
    if i < a.size:
        out[i] = a[i] * s + t


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("s", [2 - 3j, np.complex64(0.5 + 1j), np.complex128(-1 + 0.25j)])
def test_complex_scalar_arguments(backend, s):
    a = values(np.complex128, 6)
    out = np.zeros(N, np.complex128)
    scaled.on(backend)[2, 32](a, s, np.complex64(1 - 1j), out)
    np.testing.assert_allclose(out, a * s + (1 - 1j), rtol=1e-6)


@zm.kernel
def carried(a, out):
    i = zm.grid(1)
    if i < a.size:
        z = a[i]
        acc = 0j
        for k in range(5):
            acc = acc * z + (k + 1)
        out[i] = acc if abs(acc) > 1.0 else -acc


@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_values_carried_by_loops_and_ifs(backend):
    a = values(np.complex128, 7)
    out = np.zeros(N, np.complex128)
    carried.on(backend)[2, 32](a, out)
    acc = np.polyval([1, 2, 3, 4, 5], a)
    np.testing.assert_allclose(out, np.where(np.abs(acc) > 1, acc, -acc), rtol=1e-12)


# ---- derivatives ---------------------------------------------------------------------------
@zm.kernel
def modulus(x, y, out):
    i = zm.grid(1)
    if i < x.size:
        z = complex(x[i], y[i])
        w = cmath.exp(z * z) / (z + 2.0)
        out[i] = abs(w) + (w * z.conjugate()).imag


@pytest.mark.parametrize("backend", BACKENDS)
def test_real_kernel_with_complex_inside_differentiates(backend):
    rng = np.random.default_rng(8)
    x, y = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    args = [zm.Duplicated(x, np.zeros(N)), zm.Duplicated(y, np.zeros(N)),
            zm.Duplicated(np.zeros(N), np.zeros(N))]
    assert zm.check_grad(modulus, 2, 32, *args, backend=backend).ok
    assert zm.check_jvp(modulus, 2, 32, *args, width=2, backend=backend).ok


def test_gradient_matches_the_pairs_of_reals_convention():
    """d|z|^2/dx = 2x, d|z|^2/dy = 2y: the adjoint of z is dL/dRe z + i dL/dIm z."""
    @zm.kernel
    def square(x, y, out):
        i = zm.grid(1)
        if i < x.size:
            z = complex(x[i], y[i])
            out[i] = (z * z.conjugate()).real

    x, y = np.array([0.5, -1.0]), np.array([2.0, 0.25])
    dx, dy = np.zeros(2), np.zeros(2)
    zm.grad(square).on("cpu")[1, 2](zm.Duplicated(x, dx), zm.Duplicated(y, dy),
                                     zm.Duplicated(np.zeros(2), np.ones(2)))
    np.testing.assert_allclose(dx, 2 * x)
    np.testing.assert_allclose(dy, 2 * y)


@zm.kernel
def through_complex_array(a, out):
    i = zm.grid(1)
    if i < a.size:
        out[i] = abs(a[i])


def test_derivative_through_a_complex_array_is_a_compile_error_at_the_line():
    a = values(np.complex128, 9)
    with pytest.raises(CompileError, match="c128 values is not supported") as error:
        zm.grad(through_complex_array).on("cpu")[1, N](
            zm.Duplicated(a, np.zeros_like(a)), zm.Duplicated(np.zeros(N), np.ones(N)))
    assert "out[i] = abs(a[i])" in str(error.value)


# ---- user errors ---------------------------------------------------------------------------
@pytest.mark.parametrize("body, message", [
    ("out[i] = a[i] < a[0]", "not ordered"),
    ("out[i] = a[i] // 2", "not defined on complex"),
    ("out[i] = float(a[i])", "float\\(\\) of a complex"),
    ("out[i] = zm.f64(a[i])", "cannot convert a complex"),
    ("out[i] = a[i]", "c128 value where f64 is required"),
])
def test_errors_name_the_line(body, message, tmp_path):
    path = tmp_path / "bad.py"
    path.write_text(f"import zymo as zm\n\n@zm.kernel\ndef k(a, out):\n    i = zm.grid(1)\n"
                    f"    {body}\n")
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    with pytest.raises(CompileError, match=message) as error:
        namespace["k"].on("cpu")[1, 2](values(np.complex128)[:2], np.zeros(2))
    assert "bad.py:6" in str(error.value)


# ---- CUDA: PTX that ptxas accepts --------------------------------------------------------
@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", [zm.c64, zm.c128])
def test_ptx_assembles(dtype, arch, tmp_path):
    arr = zm.Array(dtype, 1)
    for kernel, types in ((arithmetic, (arr, arr, zm.Array(dtype, 2))),
                          (scaled, (arr, dtype, zm.c64, arr)),
                          (cmath_kernel("atanh", tmp_path), (arr, arr, arr)),
                          (cmath_kernel("sqrt", tmp_path), (arr, arr, arr))):
        compiled = nvptx.compile(kernel.specialize(*types).optimized, arch=arch)
        ptxas.assemble(compiled.ptx, arch)
    params = nvptx.compile(scaled.specialize(*(arr, dtype, zm.c64, arr)).optimized).params
    assert [p.dtype for p in params if p.role == "value"] == [dtype.part.dtype] * 2 + \
        [np.dtype(np.float32)] * 2


@zm.kernel
def complex_extrema(out, a, b):
    i = zm.grid(1)
    if i < a.size:
        out[i, 0] = np.maximum(a[i], b[i])
        out[i, 1] = np.minimum(a[i], b[i])
        out[i, 2] = max(a[i], 1.5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_maximum_and_minimum_order_complex_numbers_as_numpy(backend):
    nan = np.nan
    a = np.array([1 + 2j, 1 + 2j, 3 - 1j, nan + 0j, 1 + nan * 1j, 2 + 0j, 0j])
    b = np.array([1 + 3j, 0 + 5j, 3 - 2j, 1 + 1j, 2 + 2j, nan + 1j, -0j])
    out = np.zeros((7, 3), np.complex128)
    complex_extrema.on(backend)[1, 8](out, a, b)
    expected = np.stack([np.maximum(a, b), np.minimum(a, b), np.maximum(a, 1.5)], axis=1)
    np.testing.assert_array_equal(out, expected)
