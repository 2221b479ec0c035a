"""Foreign device functions on the GPU: CUDA C through NVRTC, PTX files, sources calling each
other, pointers from ffi.from_buffer, all linked by nvJitLink; and the same kernels' CPU
results for comparison (tests/numba_port/test_foreign.py holds the CPU-only checks)."""
import numpy as np
import pytest

pytestmark = pytest.mark.gpu

SOURCE = """
extern "C" __device__ int fma3(double *out, double a, double b, double c)
{ *out = fma(a, b, c); return 0; }
extern "C" __device__ int lane_sum(float *out, float *a, int n)
{ float s = 0; for (int i = 0; i < n; ++i) s += a[i]; *out = s + threadIdx.x * 0; return 0; }
"""
TIMES2 = 'extern "C" __device__ int times2(int *out, int a) { *out = a * 2; return 0; }'
TIMES4 = """extern "C" __device__ int times2(int *out, int a);
extern "C" __device__ int times4(int *out, int a)
{ int t; times2(&t, a); *out = 2 * t; return 0; }"""
# numba's ABI by hand in PTX: a device function doubling its int argument
TIMES2_PTX = """
.version 7.0
.target sm_70
.address_size 64
.visible .func (.param .b32 func_retval0) times2_ptx(.param .b64 out, .param .b32 a)
{
  .reg .b32 %r<3>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [a];
  shl.b32 %r2, %r1, 1;
  st.u32 [%rd1], %r2;
  mov.u32 %r2, 0;
  st.param.b32 [func_retval0], %r2;
  ret;
}
"""


def test_cuda_c_from_a_file_and_pointers(cuda, tmp_path):
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()
    path = tmp_path / "fns.cu"
    path.write_text(SOURCE)
    fma3 = cuda.declare_device("fma3", "float64(float64, float64, float64)", link=str(path))
    lane_sum = cuda.declare_device("lane_sum", "float32(CPointer(float32), int32)",
                                   link=str(path))

    @cuda.jit
    def kernel(r, x, total, a):
        i = cuda.grid(1)
        if i < len(r):
            r[i] = fma3(x[i], 2.0, 1.0)
        if i == 0:
            total[0] = lane_sum(ffi.from_buffer(a), len(a))

    x = np.linspace(-1, 1, 1000)
    r = np.zeros_like(x)
    a = np.arange(7, dtype=np.float32)
    total = np.zeros(1, np.float32)
    kernel[8, 128](r, x, total, a)
    np.testing.assert_array_equal(r, x * 2 + 1)
    assert total[0] == a.sum()


def test_sources_in_memory_and_ptx_files(cuda, tmp_path):
    times4 = cuda.declare_device("times4", "int32(int32)",
                                 link=[cuda.CUSource(TIMES2), cuda.CUSource(TIMES4)])
    ptx = tmp_path / "times2.ptx"
    ptx.write_text(TIMES2_PTX)
    times2_ptx = cuda.declare_device("times2_ptx", "int32(int32)")

    @cuda.jit(link=[str(ptx)])
    def kernel(r, s, x):
        i = cuda.grid(1)
        if i < len(r):
            r[i] = times4(x[i])
            s[i] = times2_ptx(x[i])

    x = cuda.to_device(np.arange(100, dtype=np.int32))
    r = cuda.device_array(100, np.int32)
    s = cuda.device_array(100, np.int32)
    kernel[1, 128](r, s, x)
    np.testing.assert_array_equal(r.copy_to_host(), 4 * np.arange(100))
    np.testing.assert_array_equal(s.copy_to_host(), 2 * np.arange(100))


def test_nvrtc_errors_are_reported(cuda):
    from zymo.diagnostics import LaunchError
    broken = cuda.declare_device("broken", "int32(int32)",
                                 link=cuda.CUSource('extern "C" __device__ int broken('
                                                    'int *o, int a) { SYNTAX ERROR }'))

    @cuda.jit
    def kernel(r):
        r[0] = broken(1)

    with pytest.raises(LaunchError, match="NVRTC could not compile"):
        kernel[1, 1](np.zeros(1, np.int32))
