"""numba's transfer hints (`cuda.In`, `cuda.Out`, `cuda.InOut`) and launch extensions
(`kernel.extensions`, `prepare_args`, `wrap_arg`), as its documentation describes them."""
import numpy as np

from zymo import cuda
from zymo.cuda.args import wrap_arg


@cuda.jit
def scale(src, dst):
    i = cuda.grid(1)
    if i < src.size:
        dst[i] = 2 * src[i]
        src[i] = -1


def test_hints_choose_what_comes_back():
    src = np.arange(8.0)
    dst = np.zeros(8)
    scale[1, 8](cuda.In(src), cuda.Out(dst))
    np.testing.assert_array_equal(dst, 2 * np.arange(8.0))
    np.testing.assert_array_equal(src, np.arange(8.0))     # In: the kernel's writes stay there
    scale[1, 8](cuda.InOut(src), dst)
    np.testing.assert_array_equal(src, -1)


def test_extensions_prepare_each_argument():
    seen = []

    class ReadOnlyInputs:
        def prepare_args(self, ty, val, **kwargs):
            seen.append((str(ty), sorted(kwargs)))
            return ty, wrap_arg(val, default=cuda.In)

    kernel = cuda.jit(scale.py_func)
    kernel.extensions.append(ReadOnlyInputs())
    src, dst = np.arange(4.0), np.zeros(4)
    kernel[1, 4](src, dst)
    np.testing.assert_array_equal(src, np.arange(4.0))
    np.testing.assert_array_equal(dst, 0)          # In for both: nothing came back
    assert seen[0] == ("array(float64, 1d, C)", ["retr", "stream"])
    assert wrap_arg(cuda.Out(dst)).__class__ is cuda.Out


def test_transpose_kernel_numbers_and_records():
    from zymo.cuda.kernels.transpose import transpose
    for rows, cols, dtype in ((5, 6, np.float64), (33, 70, np.complex64), (40, 3, np.bool_)):
        x = (np.arange(rows * cols) % 7).astype(dtype).reshape(rows, cols)
        y = transpose(cuda.to_device(x))
        np.testing.assert_array_equal(y.copy_to_host(), x.T)
    record = np.dtype([("i", np.int32), ("j", np.float32, (3, 2))])
    r = np.zeros((4, 5), record)
    r["i"] = np.arange(20).reshape(4, 5)
    r["j"] = np.arange(120, dtype=np.float32).reshape(4, 5, 3, 2)
    out = cuda.device_array_like(r.T)
    transpose(cuda.to_device(r), out)
    np.testing.assert_array_equal(out.copy_to_host(), r.T)
