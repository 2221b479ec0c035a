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
