"""cuda.jit as numba documents it, on the CPU backend through `from zymo import cuda`."""
import shutil
import subprocess
import sys

import numpy as np
import pytest

from zymo import cuda
from zymo.cuda import float32, int32, void


@cuda.jit
def axpy(out, a, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def test_lazy_kernel_compiles_per_argument_types():
    x = np.arange(10, dtype=np.float32)
    y = np.ones(10, np.float32)
    out = np.zeros(10, np.float32)
    axpy[1, 32](out, 2.0, x, y)
    np.testing.assert_array_equal(out, 2 * x + y)
    outd = np.zeros(10)
    axpy[2, 8](outd, 3, x.astype(np.float64), y.astype(np.float64))
    np.testing.assert_array_equal(outd, 3 * x + y)
    assert len(axpy.overloads) == 2
    assert (cuda.float32[::1], cuda.float64, cuda.float32[::1], cuda.float32[::1]) \
        in axpy.overloads


def test_signature_string_compiles_eagerly_and_converts_scalars():
    @cuda.jit("void(float32[:], int32)")
    def fill(x, n):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = n / 2     # true division of an int32: the scalar arrived as int32
    assert list(fill.overloads) == [(float32[:], int32)]
    x = np.zeros(4, np.float32)
    fill[1, 4](x, 7)
    np.testing.assert_array_equal(x, 3.5)
    with pytest.raises(TypeError, match="No matching definition"):
        fill[1, 4](np.zeros(4, np.float64), 7)


def test_signature_objects_tuples_and_lists():
    @cuda.jit([void(float32[:, ::1], int32), "void(float64[:, ::1], int32)"])
    def scale(m, k):
        i, j = cuda.grid(2)
        if i < m.shape[0] and j < m.shape[1]:
            m[i, j] = m[i, j] * k
    assert len(scale.overloads) == 2 and scale.signatures[1] == (cuda.float64[:, ::1], int32)
    for dtype in (np.float32, np.float64):
        m = np.arange(12, dtype=dtype).reshape(3, 4)
        scale[(1, 1), (4, 4)](m, 3)
        np.testing.assert_array_equal(m, np.arange(12).reshape(3, 4) * 3)

    @cuda.jit((int32[:, ::1],))
    def rows(m):
        col = cuda.grid(1)
        if col < m.shape[1]:
            for row in range(1, m.shape[0]):
                m[row, col] = m[row - 1, col] + 1
    m = np.zeros((4, 3), np.int32)
    rows[1, 32](m)
    np.testing.assert_array_equal(m, np.repeat(np.arange(4)[:, None], 3, axis=1))
    assert rows.overloads[(int32[:, ::1],)].max_cooperative_grid_blocks(32) >= 1


def test_a_signature_for_a_c_array_refuses_a_strided_one():
    @cuda.jit("void(float64[::1])")
    def one(x):
        x[0] = 1
    with pytest.raises(TypeError, match="No matching definition"):
        one[1, 1](np.zeros(8)[::2])


def test_device_functions_and_kernels_called_from_kernels():
    @cuda.jit(device=True)
    def square(v):
        return v * v

    @cuda.jit("float64(float64)", device=True, inline=True)
    def twice(v):
        return 2 * v

    @cuda.jit
    def add_one(x, i):      # a kernel, called below as a device function
        x[i] += 1

    @cuda.jit
    def k(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = twice(square(x[i]))
            add_one(x, i)
    x = np.arange(6, dtype=np.float64)
    k[1, 8](x)
    np.testing.assert_array_equal(x, 2 * np.arange(6.0) ** 2 + 1)
    assert square(3) == 9          # outside kernels a device function is Python
    import zymo as zm
    assert isinstance(square, zm.DeviceFunction)


def test_plain_functions_and_py_func_objects_are_device_functions():
    from math import pi

    def business_logic(x, y, z):
        return 4 * z * (2 * x - (4 * y) / 2 * pi)

    @cuda.jit
    def f(res, xarr, yarr, zarr):
        tid = cuda.grid(1)
        if tid < len(xarr):
            res[tid] = business_logic(xarr[tid], yarr[tid], zarr[tid])
    X, Y, Z = np.array([1, 10, 234]), np.array([2, 2, 4014]), np.array([3, 14, 2211])
    results = np.zeros(3)
    f.forall(len(X))(results, X, Y, Z)
    np.testing.assert_allclose(results, [business_logic(*t) for t in zip(X, Y, Z)])


def test_options_are_accepted_and_debug_checks_bounds():
    @cuda.jit(fastmath=True, max_registers=64, lineinfo=True, opt=True, cache=True)
    def k(x):
        x[cuda.grid(1)] = 1.5
    x = np.zeros(32)
    k[1, 32](x)
    assert (x == 1.5).all() and k.fastmath and k.max_registers == 64

    @cuda.jit(debug=True)
    def outside(x):
        x[cuda.grid(1) + 1] = 1
    import zymo as zm
    with pytest.raises(zm.BoundsError):
        outside.on("cpu")[1, 4](np.zeros(4))
    with pytest.raises(TypeError, match="unknown option"):
        cuda.jit(fastmaths=True)


def test_launch_configurations_with_stream_and_shared_memory():
    @cuda.jit
    def k(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = i
    s = cuda.stream()
    for config in [(1, 16), (1, 16, s), (1, 16, s, 0), (1, 16, 0, 0)]:
        x = np.zeros(16)
        k[config](x)
        s.synchronize()
        np.testing.assert_array_equal(x, np.arange(16))
    assert k.py_func.__name__ == "k"
    with pytest.raises(Exception, match="configuration"):
        k(np.zeros(2))


def test_forall_covers_every_task():
    x = np.zeros(1000, np.int64)

    @cuda.jit
    def mark(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += 1
    mark.forall(len(x))(x)
    mark.forall(len(x), tpb=64)(x)
    assert (x == 2).all()


def test_launches_reuse_zymo_kernel_launch_objects():
    """kernel[grid, block] is zm.Kernel's: the same cached Launch, no extra work per launch."""
    import zymo as zm
    assert cuda.Dispatcher.__getitem__ is zm.Kernel.__getitem__
    assert axpy[1, 32] is axpy[1, 32]


def test_inspection():
    @cuda.jit("void(float32[::1], float32)")
    def scale(x, a):
        i = cuda.grid(1)
        if i < x.size:
            x[i] *= a
    ptx = scale.inspect_asm()
    (sig, text), = ptx.items()
    assert sig == (float32[::1], float32) and ".entry" in text and "mul.f32" in text.replace(
        "mul.rn.f32", "mul.f32")
    assert scale.inspect_ptx(void(float32[::1], float32)) == text
    assert "define" in next(iter(scale.inspect_llvm().values()))
    if shutil.which("nvdisasm") is None:
        with pytest.raises(RuntimeError, match="nvdisasm"):
            scale.inspect_sass()
    else:
        assert "FMUL" in next(iter(scale.inspect_sass().values()))
    import io
    out = io.StringIO()
    scale.inspect_types(file=out)
    assert "f32" in out.getvalue()


def test_typing_errors_are_catchable_as_numba_names():
    @cuda.jit
    def bad(x):
        x[0] = undefined_name   # noqa: F821
    with pytest.raises(cuda.TypingError, match="undefined_name"):
        bad[1, 1](np.zeros(1))
    assert issubclass(cuda.CudaSupportError, cuda.CudaAPIError)
    from zymo.cuda.cudadrv.driver import CudaAPIError
    assert CudaAPIError is cuda.CudaAPIError


def test_a_kernel_from_python_dash_c_compiles():
    code = ("import numpy as np\nfrom zymo import cuda\n@cuda.jit\ndef k(a):\n"
            "    a[cuda.grid(1)] = 7\nx = np.zeros(4)\nk[1, 4](x)\nprint(x.sum())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "28.0"


def test_a_kernel_from_compiled_code_says_what_to_do_or_compiles_via_linecache():
    import linecache
    src = "def k(a):\n    a[0] = 5\n"
    namespace = {}
    exec(compile(src, "<string>", "exec"), namespace)   # a code object: no source recorded
    with pytest.raises(cuda.TypingError, match="linecache"):
        cuda.jit(namespace["k"])[1, 1](np.zeros(1))
    name = "<zymo-test-exec>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    exec(compile(src, name, "exec"), namespace)
    x = np.zeros(1)
    cuda.jit(namespace["k"])[1, 1](x)
    assert x[0] == 5


def test_cooperative_grid_sync_through_zymo_cuda():
    from zymo.cuda import int32

    sig = (int32[:, ::1],)

    @cuda.jit(sig)
    def rows_from_the_row_above(m):
        col = cuda.grid(1)
        g = cuda.cg.this_grid()
        for row in range(1, m.shape[0]):
            m[row, col] = m[row - 1, m.shape[1] - col - 1] + 1
            g.sync()

    a = np.zeros((16, 64), dtype=np.int32)
    assert rows_from_the_row_above.overloads[sig].max_cooperative_grid_blocks(32) >= 2
    rows_from_the_row_above[2, 32](a)
    np.testing.assert_array_equal(a, np.tile(np.arange(16), (64, 1)).T)


def test_specialize_gives_a_dispatcher_for_those_types():
    from zymo.cuda import float32

    @cuda.jit
    def double(x, y):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = x[i] * 2

    x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    by_values = double.specialize(x, y)
    by_types = double.specialize(float32[::1], float32[::1])
    assert by_values.specialized and not double.specialized
    by_types[1, 4](x, y)
    np.testing.assert_array_equal(y, x * 2)
    with pytest.raises(RuntimeError, match="specialized already"):
        by_values.specialize(x, y)
    with pytest.raises(TypeError, match="No matching definition"):
        by_values[1, 4](x.astype(np.float64), y.astype(np.float64))


def test_declared_integers_keep_their_low_bits():
    @cuda.jit("void(int32[::1], int32, uint8)")
    def store(out, a, b):
        out[0] = a
        out[1] = b

    out = np.zeros(2, np.int32)
    store[1, 1](out, 0xFFFFFFFF, 257)      # as a C cast: -1 and 1
    np.testing.assert_array_equal(out, [-1, 1])
