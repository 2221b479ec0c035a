"""`cuda.libdevice`: libdevice's functions by their names, on the CPU backend and the
interpreter against NumPy, their NVPTX lowering assembled by ptxas."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from zymo import cuda
from zymo.backend.nvptx import ptxas
from zymo.cuda import libdevice
from zymo.cuda.libdevicefuncs import create_signature, functions

BACKENDS = ("cpu", "interp")
needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")


@zm.kernel
def float_functions(x, y, out, exps):
    i = zm.grid(1)
    if i < x.shape[0]:
        s, c = libdevice.sincos(x[i])
        out[0, i] = s
        out[1, i] = c
        f, e = libdevice.frexp(x[i])
        out[2, i] = f
        exps[i] = e
        out[3, i] = libdevice.atan2(x[i], y[i])
        out[4, i] = libdevice.rsqrt(y[i])
        out[5, i] = libdevice.exp10(x[i] * 0.1)
        out[6, i] = libdevice.fmin(x[i], y[i])
        out[7, i] = libdevice.fma(x[i], y[i], 1.5)
        out[8, i] = libdevice.ldexp(x[i], 3)
        out[9, i] = libdevice.tgamma(y[i])
        out[10, i] = libdevice.sinf(x[i])       # float32 arithmetic, widened on the store
        out[11, i] = libdevice.isnand(x[i] / y[i] * 0.0) + libdevice.signbitd(-x[i])


def _float_reference(x, y):
    import math
    f, e = np.frexp(x)
    out = np.stack([np.sin(x), np.cos(x), f, np.arctan2(x, y), 1 / np.sqrt(y), 10 ** (x * 0.1),
                    np.fmin(x, y), x * y + 1.5, x * 8, [math.gamma(v) for v in y],
                    np.sin(x.astype(np.float32)).astype(np.float64),
                    np.signbit(-x).astype(float)])
    return out, e


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_functions_match_numpy(backend):
    x = np.linspace(-3.0, 4.0, 40)
    y = np.linspace(0.25, 5.0, 40)
    out, exps = np.zeros((12, 40)), np.zeros(40, np.int32)
    float_functions.on(backend)[2, 32](x, y, out, exps)
    want, want_exps = _float_reference(x, y)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-12)
    np.testing.assert_array_equal(exps, want_exps)


@zm.kernel
def integer_functions(a, b, c, out):
    i = zm.grid(1)
    if i < a.shape[0]:
        out[0, i] = libdevice.sad(a[i], b[i], c[i])
        out[1, i] = libdevice.abs(a[i] - b[i])
        out[2, i] = libdevice.llmax(a[i], b[i])
        out[3, i] = libdevice.popc(a[i])
        out[4, i] = libdevice.clzll(b[i])
        out[5, i] = libdevice.ffs(a[i])
        out[6, i] = libdevice.umin(a[i], c[i])


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_functions_match_numpy(backend):
    a = np.arange(0, 200, 5, dtype=np.int64)
    b = np.arange(70, 110, dtype=np.int64)
    c = np.arange(15, 55, dtype=np.int64)
    out = np.zeros((7, a.size), np.int64)
    integer_functions.on(backend)[1, 64](a, b, c, out)
    ffs = [(int(v) & -int(v)).bit_length() for v in a]
    want = np.stack([np.abs(a - b) + c, np.abs(a - b), np.maximum(a, b),
                     [bin(int(v)).count("1") for v in a], [64 - int(v).bit_length() for v in b],
                     ffs, np.minimum(a, c)])
    np.testing.assert_array_equal(out, want)


def test_every_function_is_listed_with_its_signature():
    assert len(functions) > 100
    for libname, (retty, args) in functions.items():
        assert callable(getattr(libdevice, libname[len("__nv_"):]))
        create_signature(retty, args)
    assert str(create_signature(*functions["__nv_sincosf"]).return_type) == \
        "UniTuple(float32, float32)"


@needs_ptxas
@pytest.mark.parametrize("kernel, types", [
    (float_functions, (zm.Array(zm.f64, 1), zm.Array(zm.f64, 1), zm.Array(zm.f64, 2),
                       zm.Array(zm.i32, 1))),
    (integer_functions, (zm.Array(zm.i64, 1),) * 3 + (zm.Array(zm.i64, 2),)),
])
def test_lowers_to_libdevice_calls(kernel, types):
    ptx = kernel.specialize(*types).ptx("sm_90")
    ptxas.assemble(ptx, "sm_90")
    assert "ld.param" in ptx and "st.global" in ptx


def test_cuda_namespace_has_it():
    assert cuda.libdevice is libdevice
