"""float16 in kernels: arrays and scalars, arithmetic with NumPy's promotion, conversions,
comparisons, `zm.fp16.*` (numba's `cuda.fp16.*`) against NumPy's float16, derivatives, and PTX
with native f16 instructions that ptxas accepts."""
import types

import numpy as np
import pytest

import zymo as zm
from zymo.backend import nvptx
from zymo.backend.nvptx import ptxas
from zymo.diagnostics import CompileError
from zymo.frontend.values import promote
from zymo.ir import types as T

BACKENDS = ("interp", "cpu")
needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
N = 64
cuda = types.SimpleNamespace()   # kernels read `cuda.X` as `zm.X`, as for numba's module


def halves(low, high, seed):
    return np.random.default_rng(seed).uniform(low, high, N).astype(np.float16)


@pytest.mark.parametrize("other", [T.bool_, T.i8, T.u8, T.i16, T.u16, T.i32, T.u32, T.i64,
                                   T.u64, T.f16, T.f32, T.f64, T.c64, T.c128])
def test_promotion_is_numpys(other):
    assert promote(T.f16, other).dtype == np.promote_types(np.float16, other.dtype)
    assert promote(other, T.f16) == promote(T.f16, other)


@zm.kernel
def arithmetic(a, b, n, out, wide, flags):
    i = zm.grid(1)
    if i < a.size:
        x = a[i]
        y = b[i]
        out[i, 0] = x + y
        out[i, 1] = x - y
        out[i, 2] = x * y
        out[i, 3] = x / y
        out[i, 4] = -x * 2.0
        out[i, 5] = zm.f16(zm.f32(x) * 3)
        out[i, 6] = zm.f16(i)
        wide[i, 0] = x + n           # f16 + i32 -> f64 (NumPy)
        wide[i, 1] = x * zm.i8(3)    # f16 * i8 -> f16
        wide[i, 2] = x + zm.f32(0.1)   # f16 + f32 -> f32
        flags[i, 0] = x < y
        flags[i, 1] = x == y
        flags[i, 2] = x >= 0.5


@pytest.mark.parametrize("backend", BACKENDS)
def test_arithmetic_conversions_and_comparisons(backend):
    a, b = halves(-4, 4, 1), halves(0.25, 4, 2)
    b[:4] = a[:4]
    out, wide, flags = np.zeros((N, 7), np.float16), np.zeros((N, 3)), np.zeros((N, 3), bool)
    spec = arithmetic.specialize(a, b, np.int32(7), out, wide, flags)
    assert "arith.add(%" in spec.ir() and ": f16" in spec.ir()
    arithmetic.on(backend)[2, 32](a, b, np.int32(7), out, wide, flags)
    expected = np.stack([a + b, a - b, a * b, a / b, -a * np.float16(2),
                         (a.astype(np.float32) * 3).astype(np.float16),
                         np.arange(N).astype(np.float16)], 1)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(wide[:, 0], a + np.int32(7))
    np.testing.assert_array_equal(wide[:, 1], a * np.int8(3))
    np.testing.assert_array_equal(wide[:, 2], a + np.float32(0.1))
    assert (a + np.int32(7)).dtype == np.float64 and (a * np.int8(3)).dtype == np.float16
    np.testing.assert_array_equal(flags, np.stack([a < b, a == b, a >= 0.5], 1))


@zm.kernel
def scaled(a, s, out):
    i = zm.grid(1)
    if i < a.size:
        out[i] = a[i] * s


@pytest.mark.parametrize("backend", BACKENDS)
def test_float16_scalar_argument(backend):
    a = halves(-2, 2, 3)
    out = np.zeros(N, np.float16)
    scaled.on(backend)[2, 32](a, np.float16(1.5), out)
    np.testing.assert_array_equal(out, a * np.float16(1.5))


# ---- zm.fp16 -------------------------------------------------------------------------------
def _f16(fn):
    return lambda *xs: np.asarray(fn(*(np.float64(x) for x in xs))).astype(np.float16)


# name: (arity, reference on float16 operands, operand range)
FP16 = {
    "hadd": (2, np.add, (-4, 4)), "hsub": (2, np.subtract, (-4, 4)),
    "hmul": (2, np.multiply, (-4, 4)), "hdiv": (2, np.divide, (0.5, 4)),
    "hneg": (1, np.negative, (-4, 4)), "habs": (1, np.abs, (-4, 4)),
    "hfma": (3, _f16(lambda a, b, c: a * b + c), (-4, 4)),
    "hmax": (2, np.maximum, (-4, 4)), "hmin": (2, np.minimum, (-4, 4)),
    "heq": (2, np.equal, (-1, 1)), "hne": (2, np.not_equal, (-1, 1)),
    "hgt": (2, np.greater, (-4, 4)), "hge": (2, np.greater_equal, (-4, 4)),
    "hlt": (2, np.less, (-4, 4)), "hle": (2, np.less_equal, (-4, 4)),
    "hsin": (1, _f16(np.sin), (-3, 3)), "hcos": (1, _f16(np.cos), (-3, 3)),
    "hlog": (1, _f16(np.log), (0.1, 8)), "hexp": (1, _f16(np.exp), (-3, 3)),
    "hsqrt": (1, _f16(np.sqrt), (0, 8)), "hrsqrt": (1, _f16(lambda x: 1 / np.sqrt(x)), (0.1, 8)),
    "hceil": (1, np.ceil, (-4, 4)), "hfloor": (1, np.floor, (-4, 4)),
    "hrint": (1, np.rint, (-6, 6)), "htrunc": (1, np.trunc, (-4, 4)),
    "hlog2": (1, _f16(np.log2), (0.1, 8)), "hlog10": (1, _f16(np.log10), (0.1, 8)),
    "hexp2": (1, _f16(np.exp2), (-3, 3)), "hexp10": (1, _f16(lambda x: 10 ** x), (-2, 2)),
    "hrcp": (1, _f16(lambda x: 1 / x), (0.25, 4)),
}
SOURCE = '''
import types
import zymo as zm
cuda = types.SimpleNamespace()


@zm.kernel
def k(a, b, c, out):
    i = zm.grid(1)
    if i < a.size:
        out[i] = cuda.fp16.{name}({operands})
'''


def fp16_kernel(name, tmp_path):
    operands = ", ".join(["a[i]", "b[i]", "c[i]"][:FP16[name][0]])
    path = tmp_path / f"fp16_{name}.py"
    path.write_text(SOURCE.format(name=name, operands=operands))
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace["k"]


def test_every_numba_fp16_function_is_named():
    assert sorted(FP16) == sorted(zm.lang.intrinsics.FP16_NAMES)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(FP16))
def test_fp16_functions_match_numpy(name, backend, tmp_path):
    arity, reference, (low, high) = FP16[name]
    args = [halves(low, high, seed) for seed in range(3)]
    if name in ("heq", "hne", "hrint"):   # equal pairs and exact ties
        args[1][:8] = args[0][:8]
        args[0][8:16] = np.arange(8) - 3.5
    kernel = fp16_kernel(name, tmp_path)
    boolean = name[1:] in ("eq", "ne", "gt", "ge", "lt", "le")
    out = np.zeros(N, bool if boolean else np.float16)
    kernel.on(backend)[2, 32](*args, out)
    expected = reference(*args[:arity])
    if boolean or name in ("hadd", "hsub", "hmul", "hdiv", "hneg", "habs", "hmax", "hmin",
                           "hceil", "hfloor", "hrint", "htrunc", "hsqrt", "hfma"):
        np.testing.assert_array_equal(out, expected)   # correctly rounded
    else:
        np.testing.assert_allclose(out.astype(np.float64), expected.astype(np.float64),
                                   rtol=2e-3, atol=2e-3)


def test_fp16_rejects_other_types_at_the_line(tmp_path):
    path = tmp_path / "bad_fp16.py"
    path.write_text("import zymo as zm\n\n@zm.kernel\ndef k(a, out):\n    i = zm.grid(1)\n"
                    "    out[i] = zm.fp16.hadd(a[i], a[i])\n")
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    with pytest.raises(CompileError, match="takes float16 values, not f32") as error:
        namespace["k"].on("cpu")[1, 2](np.zeros(2, np.float32), np.zeros(2, np.float16))
    assert "bad_fp16.py:6" in str(error.value)


# ---- derivatives ---------------------------------------------------------------------------
@zm.kernel
def through_half(x, out):
    i = zm.grid(1)
    if i < x.size:
        h = zm.f16(x[i])
        out[i] = zm.f32(zm.fp16.hmul(h, zm.fp16.hsin(h)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_derivative_through_float16(backend):
    x = np.linspace(-2, 2, N).astype(np.float32)
    dx = np.zeros(N, np.float32)
    zm.grad(through_half).on(backend)[2, 32](zm.Duplicated(x, dx),
                                             zm.Duplicated(np.zeros(N, np.float32),
                                                           np.ones(N, np.float32)))
    expected = np.sin(x) + x * np.cos(x)
    np.testing.assert_allclose(dx, expected, atol=2e-2, rtol=1e-2)


# ---- CUDA: native f16 PTX ------------------------------------------------------------------
@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_uses_native_f16_and_assembles(arch, tmp_path):
    a = zm.Array(zm.f16, 1)
    spec = arithmetic.specialize(a, a, zm.i32, zm.Array(zm.f16, 2), zm.Array(zm.f64, 2),
                                 zm.Array(zm.bool_, 2))
    ptx = nvptx.compile(spec.optimized, arch=arch).ptx
    ptxas.assemble(ptx, arch)
    assert "add.rn.f16" in ptx or "add.f16" in ptx
    for name in sorted(FP16):
        kernel = fp16_kernel(name, tmp_path)
        boolean = name[1:] in ("eq", "ne", "gt", "ge", "lt", "le")
        spec = kernel.specialize(a, a, a, zm.Array(zm.bool_ if boolean else zm.f16, 1))
        ptx = nvptx.compile(spec.optimized, arch=arch).ptx
        ptxas.assemble(ptx, arch)
        if name == "hfma":
            assert "fma.rn.f16" in ptx
