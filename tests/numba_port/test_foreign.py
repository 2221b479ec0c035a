"""Foreign device functions as numba documents them (`cuda.declare_device(name, sig, link=...)`,
`cuda.CUSource`, `cuda.jit(link=...)`, `ffi.from_buffer`): CUDA C compiled for the host runs on
the CPU backend and the interpreter; the PTX calls the symbol and assembles; GPU runs are in
tests/gpu/test_foreign_gpu.py."""
import re

import numpy as np
import pytest

import zymo as zm
from zymo import cuda
from zymo.backend import host_c
from zymo.backend.nvptx import ptxas
from zymo.cuda import float32, int32, types
from zymo.diagnostics import CompileError

needs_cxx = pytest.mark.skipif(host_c.compiler() is None, reason="no C++ compiler")
pytestmark = needs_cxx

MUL = """
extern "C" __device__ int mul_f32(float *out, float x, float y) { *out = x * y; return 0; }

extern "C" __device__ int sum_f32(float *out, float *a, int n) {
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) s += a[i];
  *out = (float)s;
  return 0;
}

extern "C" __device__ int scale_in_place(void *out, double *a, double k, int i) {
  a[i] *= k;
  return 0;
}
"""
TIMES2 = cuda.CUSource('extern "C" __device__ int times2(int *out, int a) '
                       '{ *out = a * 2; return 0; }')
TIMES4 = cuda.CUSource("""
extern "C" __device__ int times2(int *out, int a);
extern "C" __device__ int times4(int *out, int a) { int t; times2(&t, a); *out = 2 * t; return 0; }
""")


@pytest.fixture
def mul_cu(tmp_path):
    path = tmp_path / "functions.cu"
    path.write_text(MUL)
    return str(path)


def test_declared_function_from_a_file_runs_on_the_cpu(mul_cu):
    mul = cuda.declare_device("mul_f32", "float32(float32, float32)", link=mul_cu)

    @cuda.jit
    def multiply(r, x, y):
        i = cuda.grid(1)
        if i < len(r):
            r[i] = mul(x[i], y[i])

    rng = np.random.default_rng(1)
    x, y = rng.random(40, np.float32), rng.random(40, np.float32)
    r = np.zeros_like(x)
    multiply[2, 32](r, x, y)
    np.testing.assert_array_equal(r, x * y)


def test_numba_api_of_a_declaration():
    f1 = cuda.declare_device("f1", int32(float32[:]))
    assert f1.name == "f1" and f1.sig.args == (float32[:],) and f1.sig.return_type == int32
    assert cuda.declare_device("f1", "int32(float32[:])").sig.return_type == int32
    for bad in ((float32[:],), "(float32[:],)"):
        with pytest.raises(TypeError, match="Return type"):
            cuda.declare_device("f1", bad)


@pytest.mark.parametrize("container", [list, tuple, set])
def test_sources_in_memory_call_each_other(container):
    times4 = cuda.declare_device("times4", "int32(int32)", link=container([TIMES2, TIMES4]))

    @cuda.jit
    def kernel(r, x):
        i = cuda.grid(1)
        if i < len(r):
            r[i] = times4(x[i])

    x = np.arange(10, dtype=np.int32)
    r = np.empty_like(x)
    kernel[1, 32](r, x)
    np.testing.assert_array_equal(r, 4 * x)


def test_declared_function_called_from_device_functions_and_the_kernel():
    times2 = cuda.declare_device("times2", "int32(int32)", link=TIMES2)

    @cuda.jit(device=True)
    def twice(v):
        return times2(v)

    @cuda.jit
    def kernel(r, x):
        i = cuda.grid(1)
        if i < len(r):
            r[i] = twice(x[i]) + times2(x[i] + i)

    x = np.arange(10, dtype=np.int32)
    r = np.empty_like(x)
    kernel[1, 32](r, x)
    np.testing.assert_array_equal(r, 2 * x + 2 * (x + np.arange(10)))


def test_pointers_from_ffi_from_buffer_read_and_write(mul_cu):
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()
    total = cuda.declare_device("sum_f32", "float32(CPointer(float32), int32)", link=mul_cu)
    scale = cuda.declare_device("scale_in_place", types.void(types.CPointer(types.float64),
                                                            types.float64, types.int32),
                                link=mul_cu)

    @cuda.jit
    def kernel(result, a, b):
        result[()] = total(ffi.from_buffer(a), len(a))
        i = cuda.grid(1)
        if i < len(b):
            scale(ffi.from_buffer(b), 3.0, i)

    a = np.arange(10, dtype=np.float32)
    b = np.arange(5, dtype=np.float64)
    result = np.zeros((), np.float32)
    kernel[1, 8](result, a, b)
    assert result[()] == a.sum()
    np.testing.assert_array_equal(b, 3 * np.arange(5))


def test_the_interpreter_calls_the_host_build(mul_cu):
    mul = cuda.declare_device("mul_f32", "float32(float32, float32)", link=mul_cu)

    def multiply(r, x, y):
        i = zm.grid(1)
        if i < len(r):
            r[i] = mul(x[i], y[i]) + 1.0

    x = np.linspace(0, 1, 20, dtype=np.float32)
    y = np.linspace(1, 2, 20, dtype=np.float32)
    results = []
    for backend in ("interp", "cpu"):
        r = np.zeros_like(x)
        zm.kernel(multiply).on(backend)[1, 32](r, x, y)
        results.append(r)
    np.testing.assert_array_equal(results[0], x * y + 1)
    np.testing.assert_array_equal(results[1], results[0])


def test_kernel_level_link(tmp_path):
    (tmp_path / "add.cuh").write_text("template <typename T> __device__ T myadd(T a, T b) "
                                      "{ return a + b; }\n")
    source = tmp_path / "inc" / "plus.cu"
    source.parent.mkdir()
    source.write_text('#include <add.cuh>\nextern "C" __device__ int plus(double *out, double a, '
                      'double b) { *out = myadd(a, b); return 0; }\n')
    old = cuda.config.CUDA_NVRTC_EXTRA_SEARCH_PATHS
    cuda.config.CUDA_NVRTC_EXTRA_SEARCH_PATHS = str(tmp_path)
    try:
        plus = cuda.declare_device("plus", "float64(float64, float64)")

        @cuda.jit(link=[str(source)])
        def kernel(r, x):
            i = cuda.grid(1)
            if i < len(r):
                r[i] = plus(x[i], 0.5)
    finally:
        cuda.config.CUDA_NVRTC_EXTRA_SEARCH_PATHS = old
    x = np.arange(6.0)
    r = np.zeros_like(x)
    kernel[1, 8](r, x)
    np.testing.assert_array_equal(r, x + 0.5)


def test_errors_name_the_call_and_the_way_out(tmp_path):
    bad = cuda.CUSource('extern "C" __device__ int broken(int *out, int a) { SYNTAX ERROR }')
    broken = cuda.declare_device("broken", "int32(int32)", link=bad)

    @cuda.jit
    def uses_broken(r):
        r[0] = broken(1)

    with pytest.raises(CompileError, match=r"compiling .* for the CPU failed"):
        uses_broken[1, 1](np.zeros(1, np.int32))

    absent = cuda.declare_device("absent", "int32(int32)", link=TIMES2)

    @cuda.jit
    def uses_absent(r):
        r[0] = absent(1)

    with pytest.raises(CompileError, match="no function `absent`"):
        uses_absent[1, 1](np.zeros(1, np.int32))

    ptx = tmp_path / "f.ptx"
    ptx.write_text("// PTX\n")
    on_gpu_only = cuda.declare_device("times2", "int32(int32)", link=str(ptx))

    @cuda.jit
    def uses_ptx(r):
        r[0] = on_gpu_only(1)

    with pytest.raises(CompileError, match="runs only on an NVIDIA GPU"):
        uses_ptx[1, 1](np.zeros(1, np.int32))

    times2 = cuda.declare_device("times2", "int32(int32)", link=TIMES2)

    @cuda.jit
    def wrong_arity(r):
        r[0] = times2(1, 2)

    with pytest.raises(CompileError, match=r"times2\(\) takes 1 arguments"):
        wrong_arity[1, 1](np.zeros(1, np.int32))


def test_no_derivative_flows_through_a_foreign_function(mul_cu):
    mul = cuda.declare_device("mul_f32", "float32(float32, float32)", link=mul_cu)

    @zm.kernel
    def k(x, y):
        i = zm.grid(1)
        if i < len(y):
            y[i] = mul(x[i], x[i])

    x, y = np.ones(4, np.float32), np.zeros(4, np.float32)
    with pytest.raises(CompileError, match="cannot differentiate `func.foreign_call`"):
        zm.grad(k).on("cpu")[1, 4](zm.Duplicated(x, np.zeros_like(x)),
                                   zm.Duplicated(y, np.ones_like(y)))


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
def test_ptx_calls_the_symbol_with_numbas_abi(mul_cu):
    mul = cuda.declare_device("mul_f32", "float32(float32, float32)", link=mul_cu)

    def multiply(r, x, y):
        i = cuda.grid(1)
        if i < len(r):
            r[i] = mul(x[i], y[i])

    ptx, _ = cuda.compile_ptx(multiply, "void(float32[::1], float32[::1], float32[::1])")
    assert "call.uni (retval0), mul_f32, (param0, param1, param2)" in ptx
    assert re.search(r"\.extern \.func\s+\(\.param \.b32 func_retval0\) mul_f32\b", ptx)
    ptxas.assemble(ptx, "sm_90", options=("-c",))   # relocatable: the link resolves mul_f32


C_ABI = cuda.CUSource("""
extern "C" __device__ int add2(int a, int b) { return a + b; }
extern "C" __device__ int const42() { return 42; }
extern "C" __device__ void set42(int *a) { *a = 42; }
""")


def test_c_abi_and_pointers_into_slices():
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()
    add2 = cuda.declare_device("add2", "int32(int32, int32)", link=C_ABI, abi="c")
    const42 = cuda.declare_device("const42", "int32()", link=C_ABI, abi="c")
    set42 = cuda.declare_device("set42", types.void(types.CPointer(types.int32)), link=C_ABI,
                                abi="c")

    def kernel(r, x):
        i = cuda.grid(1)
        if i < len(r):
            r[i] = add2(x[i], i) + const42()
            set42(ffi.from_buffer(x[i:]))

    for backend in ("interp", "cpu"):
        x = np.arange(10, dtype=np.int32)
        r = np.zeros_like(x)
        zm.kernel(kernel).on(backend)[1, 32](r, x)
        np.testing.assert_array_equal(r, 2 * np.arange(10) + 42)
        np.testing.assert_array_equal(x, 42)


def test_raw_pointer_parameters():
    @cuda.jit(types.void(types.CPointer(types.uint8), types.uint32))
    def add_one(p, n):
        i = cuda.grid(1)
        if i < n:
            p[i] += 1

    x = cuda.to_device(np.arange(10, dtype=np.uint8))
    add_one[1, 32](x.__cuda_array_interface__["data"][0], len(x))
    np.testing.assert_array_equal(x.copy_to_host(), np.arange(1, 11))
    assert list(add_one.overloads) == [(types.CPointer(types.uint8), types.uint32)]
    add_one[1, 32](x, len(x))     # an array where a pointer is declared: its memory
    np.testing.assert_array_equal(x.copy_to_host(), np.arange(2, 12))
    with pytest.raises(zm.LaunchError, match="takes an address"):
        add_one[1, 32](1.5, len(x))


def test_device_function_signatures_convert_arguments():
    @cuda.jit("int32(int32, int32)", device=True)
    def pack(hi, lo):
        return ((hi & 0xFF) << 8) | (lo & 0xFF)

    @cuda.jit
    def caller(out, channels):
        out[0] = pack(channels[0], channels[1])

    out = np.zeros(1, np.int32)
    caller[1, 1](out, np.array([1.9, 2.2], np.float32))    # floats truncated, as numba casts
    assert out[0] == (1 << 8) | 2
    with pytest.raises(RuntimeError, match="Cannot compile a device function as a kernel"):
        pack[1, 1]
    with pytest.raises(RuntimeError, match="Cannot inspect SASS of a device function"):
        pack.inspect_sass()


def test_carray_views_the_memory_at_a_pointer():
    from zymo.cuda.np.numpy_support import carray

    @cuda.jit(types.void(types.CPointer(types.float32), types.int32))
    def bump(p, n):
        a = carray(p, (n,), dtype=cuda.float32)
        i = cuda.grid(1)
        if i < len(a):
            a[i] += 1.5

    x = cuda.to_device(np.arange(6, dtype=np.float32))
    bump[1, 8](x.__cuda_array_interface__["data"][0], 4)
    np.testing.assert_array_equal(x.copy_to_host(), [1.5, 2.5, 3.5, 4.5, 4, 5])
    host = carray(x.__cuda_array_interface__["data"][0], (2, 3), dtype=np.float32)
    np.testing.assert_array_equal(host, x.copy_to_host().reshape(2, 3))

    def reinterpret(p):
        a = carray(p, (2,), dtype=cuda.int32)
        a[0] = 1

    with pytest.raises(CompileError, match="does not reinterpret memory"):
        cuda.jit(types.void(types.CPointer(types.float32)))(reinterpret)
