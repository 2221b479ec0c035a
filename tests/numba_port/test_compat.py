"""numba's test-support and compatibility names on zymo.cuda: config flags that drive zymo's
behaviour, errors, numpy_support, numba's TestCase.assertPreciseEqual, override_config,
compile_ptx (PTX that ptxas accepts) and numba's top-level names on `zymo`."""
from __future__ import annotations

import subprocess
import sys
import unittest
import warnings

import numpy as np
import pytest

import zymo
from zymo import cuda
from zymo.backend.nvptx import ptxas
from zymo.cuda.core import config, errors
from zymo.cuda.np import numpy_support
from zymo.cuda.tests.support import CheckWarningsMixin, TestCase, override_config
from zymo.cuda.types import float16, float32, int32, int64
from zymo.runtime.cuda import launch

needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")


class _Case(TestCase, CheckWarningsMixin):
    def runTest(self):   # noqa: N802
        pass


@pytest.fixture
def case():
    return _Case()


# ---- assertPreciseEqual ------------------------------------------------------------------------
@pytest.mark.parametrize("first, second, prec", [
    (1, 1, "exact"), (np.int32(3), 3, "exact"), (True, True, "exact"),
    (1.0, 1.0, "exact"), (float("nan"), float("nan"), "exact"),
    (1.0, 1.0 + 2**-52, "double"),                       # one ulp
    (np.float32(1), np.float32(1) + np.float32(2**-23), "single"),
    (1 + 2j, 1 + 2j + 2**-51 * 1j, "double"),
    (np.arange(4.0), np.arange(4.0), "exact"),
    ((1, 2.0), (1, 2.0), "exact"), ([np.nan], [np.nan], "exact"),
])
def test_precise_equal_accepts(case, first, second, prec):
    case.assertPreciseEqual(first, second, prec=prec)


@pytest.mark.parametrize("first, second, prec", [
    (1, 2, "exact"), (1, 1.0, "exact"),                  # int and float are not comparable
    (1.0, 1.0 + 2**-52, "exact"),
    (1.0, 1.0 + 2**-49, "double"),                       # eight ulps
    (np.float32(1), np.float32(1) + np.float32(2**-20), "single"),
    (0.0, -0.0, "exact"), (np.zeros(2), -np.zeros(2), "double"),
    (np.arange(4.0), np.arange(4.0, dtype=np.float32), "exact"),       # dtypes
    (np.zeros((2, 3)), np.zeros((2, 3), order="F"), "exact"),          # layouts
    (np.zeros(3), np.zeros(4), "exact"), ((1, 2), (1, 2, 3), "exact"),
    (1 + 2j, 1 + 3j, "double"), (float("nan"), 1.0, "double"),
])
def test_precise_equal_rejects(case, first, second, prec):
    with pytest.raises(AssertionError):
        case.assertPreciseEqual(first, second, prec=prec)


def test_precise_equal_options(case):
    case.assertPreciseEqual(1.0, 1.0 + 2**-50, prec="double", ulps=4)
    case.assertPreciseEqual(0.0, -0.0, ignore_sign_on_zero=True)
    case.assertPreciseEqual(1e-20, 2e-20, prec="double", abs_tol=1e-19)
    with pytest.raises(AssertionError, match=r"at index \(2,\)"):
        case.assertPreciseEqual(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 4.0]))
    with pytest.raises(ValueError):
        case.assertPreciseEqual(1.0, 1.0, prec="half")


# ---- config and warnings ----------------------------------------------------------------------
def test_config_is_shared_and_numba_like():
    assert cuda.config is config and config.ENABLE_CUDASIM is False
    assert cuda.HAS_NUMBA is False


def test_implicit_copy_flag_drives_the_launch_switch():
    with override_config("CUDA_WARN_ON_IMPLICIT_COPY", 0):
        assert launch.WARN_ON_HOST_COPY[0] is False
        with override_config("CUDA_WARN_ON_IMPLICIT_COPY", 1):
            assert launch.WARN_ON_HOST_COPY[0] is True
            with override_config("DISABLE_PERFORMANCE_WARNINGS", 1):
                assert launch.WARN_ON_HOST_COPY[0] is False
            assert launch.WARN_ON_HOST_COPY[0] is True
        assert config.CUDA_WARN_ON_IMPLICIT_COPY is False


def test_override_config_restores_and_checks_names():
    with override_config("OPT", 0):
        assert config.OPT == 0
    assert config.OPT == 3
    with pytest.raises(AttributeError, match="no flag"):
        with override_config("NO_SUCH_FLAG", 1):
            pass


def test_debuginfo_default_drives_jit_debug():
    def k(a):
        a[0] = 1
    with override_config("CUDA_DEBUGINFO_DEFAULT", 1):
        assert cuda.jit(k).boundscheck
    assert not cuda.jit(k).boundscheck


def test_errors_relations():
    assert errors.TypingError is zymo.CompileError
    assert issubclass(errors.NumbaPerformanceWarning, errors.NumbaWarning)
    assert issubclass(launch.HostCopyWarning, errors.NumbaPerformanceWarning)
    assert issubclass(errors.NumbaDeprecationWarning, DeprecationWarning)
    assert issubclass(errors.NumbaIRAssumptionWarning, errors.NumbaPedanticWarning)
    assert issubclass(errors.LoweringError, errors.NumbaError)
    assert cuda.NumbaPerformanceWarning is errors.NumbaPerformanceWarning


def test_check_warnings(case):
    with case.check_warnings(["slow"], category=errors.NumbaPerformanceWarning):
        warnings.warn("this is slow", launch.HostCopyWarning)
    with pytest.raises(AssertionError):
        with case.check_warnings(["slow"]):
            warnings.warn("this is fast", RuntimeWarning)


def test_cuda_test_case_turns_warnings_off():
    from zymo.cuda.testing import CUDATestCase

    class T(CUDATestCase):
        def test(self):
            assert not config.CUDA_WARN_ON_IMPLICIT_COPY
            assert not config.CUDA_LOW_OCCUPANCY_WARNINGS

    result = unittest.TestResult()
    T("test").run(result)
    assert result.wasSuccessful() and config.CUDA_WARN_ON_IMPLICIT_COPY


# ---- numpy_support ----------------------------------------------------------------------------
def test_numpy_support_round_trips():
    for dtype in (np.int8, np.uint64, np.float16, np.float32, np.complex128, np.bool_):
        assert numpy_support.as_dtype(numpy_support.from_dtype(dtype)) == np.dtype(dtype)
    record = np.dtype([("a", np.float32), ("b", np.int32)])
    assert numpy_support.as_dtype(numpy_support.from_dtype(record)) == record
    for dtype in ("M8[s]", "m8[D]"):     # numba's NPDatetime / NPTimedelta
        assert numpy_support.as_dtype(numpy_support.from_dtype(dtype)) == np.dtype(dtype)
    with pytest.raises(TypeError):
        numpy_support.from_dtype(np.dtype(object))


# ---- compile_ptx ------------------------------------------------------------------------------
def _add_one(r, x):
    r[0] = x + 1


def _to_int(x):
    return np.int32(x)


@needs_ptxas
def test_compile_ptx_kernel_assembles():
    ptx, restype = cuda.compile_ptx(_add_one, (float32[::1], float32))
    assert restype == cuda.void and ".entry" in ptx
    ptxas.assemble(ptx, "sm_90")


@needs_ptxas
def test_compile_ptx_device_function():
    ptx, restype = cuda.compile_ptx(_to_int, (float16,), device=True, cc=(8, 0))
    assert restype == int32 and ".target sm_80" in ptx
    ptxas.assemble(ptx, "sm_80")
    ptx, restype = cuda.compile_ptx(_to_int, "int64(float32)", device=True)
    assert restype == int64 and ("st.global.b64" in ptx or "st.global.u64" in ptx)
    with override_config("CUDA_DEFAULT_PTX_CC", (8, 6)):
        assert ".target sm_86" in cuda.compile_ptx(_add_one, (float32[::1], float32))[0]
    with pytest.raises(ValueError, match="PTX only"):
        cuda.compile(_to_int, (float32,), output="ltoir")


# ---- numba's names on `zymo` ------------------------------------------------------------------
def test_numba_top_level_names_are_lazy():
    code = ("import sys, zymo; assert 'zymo.cuda' not in sys.modules; "
            "from zymo import types, errors, vectorize, guvectorize, typeof; "
            "import zymo.cuda as c; assert types is c.types and errors is c.core.errors; "
            "v = sys.modules['zymo.cuda.vectorize']; "
            "assert vectorize is v.vectorize and guvectorize is v.guvectorize; "
            "assert typeof is c.typing.typeof; "
            "assert zymo.kernel and zymo.evolve")
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(AttributeError):
        zymo.no_such_name   # noqa: B018


# ---- typing, types, dispatcher additions ------------------------------------------------------
def test_typing_signature_and_typeof():
    from zymo.cuda import types
    from zymo.cuda.typing import signature, typeof
    assert signature(types.float32, types.int32) == types.float32(types.int32)
    assert typeof(np.zeros((2, 3))) == types.Array(types.float64, 2, "C")
    assert typeof(np.zeros((2, 3)).T).layout == "F"
    assert typeof(3) == types.int64 and typeof(np.float32(1)) == types.float32
    assert isinstance(types.float32[:], types.Array)
    assert isinstance(types.complex64, types.Complex)
    assert types.complex64.underlying_float == types.float32


def test_unconfigured_launch_is_a_value_error():
    kernel = cuda.jit(_add_one)
    with pytest.raises(ValueError, match="launch configuration was not specified"):
        kernel(np.zeros(1, np.float32), 1.0)


def _ratio(x):
    return x / (x + 1)


def test_device_function_inspect_asm():
    fast = cuda.jit("float32(float32)", device=True, fastmath=True)(_ratio)
    precise = cuda.jit("float32(float32)", device=True)(_ratio)
    assert "div.approx" in fast.inspect_asm("float32(float32)")
    assert "div.rn.f32" in precise.inspect_asm()[(float32,)]


def _grid_sync(a):
    cuda.cg.this_grid().sync()
    a[0] = 1


def test_overload_cooperative():
    synced, plain = cuda.jit("void(int32[::1])")(_grid_sync), cuda.jit("void(int32[::1])")(
        lambda_free_store)
    assert [o.cooperative for o in synced.overloads.values()] == [True]
    assert [o.cooperative for o in plain.overloads.values()] == [False]


def lambda_free_store(a):
    a[0] = 1


def test_test_case_helpers_and_cbrt():
    from zymo.cuda.testing import CUDATestCase
    from zymo.cuda.tests.support import TestCase

    assert CUDATestCase.FLOAT16_RTOL == float(np.finfo(np.float16).eps)
    module = sys.modules[__name__]
    warnings.warn_explicit("once", UserWarning, "f.py", 1, registry=module.__dict__.setdefault(
        "__warningregistry__", {}))
    TestCase("__init__").reset_module_warnings(__name__)
    assert not hasattr(module, "__warningregistry__")

    @cuda.jit
    def cube_root(out, a):
        out[0] = cuda.cbrt(a)

    out = np.zeros(1)
    cube_root[1, 1](out, 27.0)
    assert out[0] == pytest.approx(3.0, rel=1e-15)   # libm's cbrt, within an ulp
    assert cube_root.inspect_lto_ptx() == cube_root.inspect_asm()


# ---- numba's extension API: what zymo honours ---------------------------------------------------
def test_extension_registrations_type_values_and_lay_out_struct_models():
    from zymo.cuda import extending, types as nt
    from zymo.cuda.np.numpy_support import as_dtype
    from zymo.cuda.typing.typeof import typeof

    class Point:
        def __init__(self, x, y):
            self.x, self.y = x, y

    class PointType(nt.Type):
        def __init__(self):
            super().__init__(name="PointType")

    point_type = PointType()
    assert str(point_type) == "PointType"

    @extending.typeof_impl.register(Point)
    def _typeof_point(value, context):
        return point_type

    @extending.register_model(PointType)
    class PointModel(extending.core_models.StructModel):
        def __init__(self, dmm, fe_type):
            super().__init__(dmm, fe_type, [("x", nt.int32), ("y", nt.float64)])

    extending.make_attribute_wrapper(PointType, "x", "x")
    assert typeof(Point(1, 2.0)) is point_type
    assert as_dtype(point_type) == np.dtype([("x", np.int32), ("y", np.float64)], align=True)
    assert extending.ATTRIBUTES[PointType] == {"x": "x"}
