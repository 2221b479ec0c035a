"""numba's type names: objects for signatures, element types of shared/local/const arrays, and
casts in kernels."""
import numpy as np
import pytest

from zymo import cuda
from zymo.cuda import types
from zymo.ir import types as T


def test_type_objects_map_onto_zymo_types():
    assert cuda.float32.zymo_type is T.f32 or cuda.float32.zymo_type == T.f32
    assert cuda.uint16.zymo_type == T.u16 and cuda.boolean.zymo_type == T.bool_
    assert cuda.float32[:].zymo_type == T.Array(T.f32, 1, "global", "A")
    assert cuda.float32[:, ::1].zymo_type == T.Array(T.f32, 2, "global", "C")
    assert cuda.float32[::1, :].layout == "F"
    assert cuda.float32[::1, :].zymo_type.layout == "A"   # passed with its strides
    assert cuda.int8 is types.int8 and cuda.bool_ is cuda.boolean and cuda.f4 is cuda.float32
    assert np.dtype(cuda.float64) == np.float64
    assert cuda.float32(1.5) == np.float32(1.5) and isinstance(cuda.int16(3), np.int16)
    sig = cuda.void(cuda.float32[:], cuda.int32)
    assert sig.args == (cuda.float32[:], cuda.int32) and sig.return_type == cuda.void
    assert types.parse("void(float32[:], int32)") == sig
    assert types.signature_of("float32[:], int32") == sig
    assert types.signature_of((cuda.float32[:], cuda.int32)) == sig
    assert str(cuda.complex128) == "complex128"
    with pytest.raises(TypeError, match="signature"):
        types.parse("void(floaty[:])")
    with pytest.raises(TypeError, match=":"):
        cuda.float32[1:3]


def test_numba_types_in_shared_local_const_arrays_and_casts():
    from zymo.cuda.types import int32
    TABLE = np.array([1.0, 2.0, 3.0, 4.0])

    @cuda.jit
    def k(out):
        tid = cuda.threadIdx.x
        sh = cuda.shared.array(shape=32, dtype=cuda.float32)
        loc = cuda.local.array(2, types.int64)
        table = cuda.const.array_like(TABLE)
        sh[tid] = cuda.float32(tid) / 3
        loc[0] = int32(tid) * 2
        loc[1] = cuda.int64(table[tid % 4])
        cuda.syncthreads()
        out[tid] = sh[31 - tid] + loc[0] + loc[1]
    out = np.zeros(32, np.float64)
    k[1, 32](out)
    tids = np.arange(32)
    expected = (np.float32(31 - tids) / np.float32(3)).astype(np.float64) + 2 * tids + \
        TABLE[tids % 4]
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_float32_casts_round_to_single_precision():
    @cuda.jit
    def k(out, x):
        out[0] = cuda.float32(x[0]) - x[0]
    out = np.zeros(1)
    k[1, 1](out, np.array([0.1]))
    assert out[0] == np.float64(np.float32(0.1)) - 0.1


def test_unknown_attribute_of_the_module_is_named_with_a_suggestion():
    @cuda.jit
    def k(x):
        x[0] = cuda.gird(1)
    with pytest.raises(cuda.TypingError, match="did you mean 'grid'"):
        k[1, 1](np.zeros(1))


def test_array_type_constructor():
    assert types.Array(cuda.float32, 2, "C") == cuda.float32[:, ::1]
    assert types.parse('void(Array(float32, 1, "A"))').args == (cuda.float32[:],)
    with pytest.raises(TypeError):
        types.Array(cuda.float32, 1, "X")
