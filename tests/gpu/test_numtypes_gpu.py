"""complex64/complex128 and float16 on CUDA: kernels with complex arrays and scalars, cmath,
and zm.fp16, compared with NumPy and with the CPU backend."""
from __future__ import annotations

import cmath
import types

import numpy as np
import pytest

import zymo as zm

pytestmark = pytest.mark.gpu
N = 256
cuda = types.SimpleNamespace()   # kernels read `cuda.X` as `zm.X`, as for numba's module


def launch(kernel, *args):
    """Run on CUDA with the arrays copied in and back; returns the host copies."""
    moved = [zm.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kernel.on("cuda")[(N + 127) // 128, 128](*moved)
    return [m.copy_to_host() if isinstance(a, np.ndarray) else a for a, m in zip(args, moved)]


def complex_values(dtype, seed):
    rng = np.random.default_rng(seed)
    z = rng.uniform(-2, 2, N) + 1j * rng.uniform(-2, 2, N)
    return np.where(np.abs(z.real) < 0.05, z + 0.1, z).astype(dtype)


@zm.kernel
def complex_mix(a, b, s, out):
    i = zm.grid(1)
    if i < a.size:
        z = a[i]
        w = b[i]
        out[i, 0] = z * w + s
        out[i, 1] = z / w
        out[i, 2] = z ** 3 - w.conjugate()
        out[i, 3] = complex(abs(z), cmath.phase(w))
        out[i, 4] = cmath.exp(z) + cmath.log(w)
        out[i, 5] = cmath.sqrt(z) * cmath.tanh(w)
        out[i, 6] = cmath.asin(z) + cmath.acosh(w)
        out[i, 7] = cmath.atan(z) - cmath.sin(w) * cmath.cosh(z)


def complex_mix_expected(a, b, s):
    a, b = a.astype(np.complex128), b.astype(np.complex128)
    cols = [a * b + s, a / b, a ** 3 - b.conj(), np.abs(a) + 1j * np.angle(b),
            np.exp(a) + np.log(b), np.sqrt(a) * np.tanh(b), np.arcsin(a) + np.arccosh(b),
            np.arctan(a) - np.sin(b) * np.cosh(a)]
    return np.stack(cols, 1)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_kernel_on_cuda(dtype):
    a, b = complex_values(dtype, 1), complex_values(dtype, 2)
    s = dtype(0.5 - 2j)
    out = np.zeros((N, 8), dtype)
    _, _, _, result = launch(complex_mix, a, b, s, out)
    expected = complex_mix_expected(a, b, s)
    scale = np.maximum(np.abs(expected), 1)
    rtol = 1e-4 if dtype == np.complex64 else 1e-11
    assert np.all(np.abs(result - expected) <= rtol * scale)
    cpu = np.zeros_like(out)
    complex_mix.on("cpu")[(N + 127) // 128, 128](a, b, s, cpu)
    assert np.all(np.abs(result - cpu) <= rtol * scale)


@zm.kernel
def modulus(x, y, out):
    i = zm.grid(1)
    if i < x.size:
        z = complex(x[i], y[i])
        out[i] = abs(cmath.exp(z * z) / (z + 2.0))


def test_gradient_through_complex_on_cuda():
    rng = np.random.default_rng(3)
    x, y = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    args = [zm.Duplicated(x, np.zeros(N)), zm.Duplicated(y, np.zeros(N)),
            zm.Duplicated(np.zeros(N), np.zeros(N))]
    assert zm.check_grad(modulus, (N + 127) // 128, 128, *args, backend="cuda").ok


@zm.kernel
def half_mix(a, b, n, out, wide):
    i = zm.grid(1)
    if i < a.size:
        x = a[i]
        y = b[i]
        out[i, 0] = cuda.fp16.hfma(x, y, x)
        out[i, 1] = cuda.fp16.hdiv(x, y) + x * y
        out[i, 2] = cuda.fp16.hrint(x * 3.0)
        out[i, 3] = cuda.fp16.hsqrt(cuda.fp16.habs(x))
        out[i, 4] = cuda.fp16.hexp10(cuda.fp16.hmin(x, y))
        wide[i] = x + n


def test_float16_kernel_on_cuda():
    rng = np.random.default_rng(4)
    a = rng.uniform(-2, 2, N).astype(np.float16)
    b = rng.uniform(0.5, 2, N).astype(np.float16)
    out, wide = np.zeros((N, 5), np.float16), np.zeros(N)
    _, _, _, result, wide = launch(half_mix, a, b, np.int32(5), out, wide)
    cpu, cpu_wide = np.zeros_like(out), np.zeros_like(wide)
    half_mix.on("cpu")[(N + 127) // 128, 128](a, b, np.int32(5), cpu, cpu_wide)
    np.testing.assert_array_equal(result[:, [0, 2, 3]], cpu[:, [0, 2, 3]])
    # x * y + hdiv(x, y): the GPU contracts it into one fma.rn.f16 (one rounding, as nvcc
    # does), the CPU rounds twice: a few f16 ulps apart
    np.testing.assert_allclose(result[:, 1].astype(float), cpu[:, 1].astype(float), rtol=4e-3)
    np.testing.assert_allclose(result[:, 4].astype(float), cpu[:, 4].astype(float), rtol=2e-3)
    np.testing.assert_array_equal(wide, a + np.int32(5))
