"""Arrays of NumPy strings (`S12`, `U12`, top level and record fields) written with constant
strings; shared arrays of records; record arrays in GPU memory (passed as field views);
record types in cuda.jit signatures. On the CPU backend and the interpreter against NumPy,
through ptxas for CUDA, and the launch's GPU views checked on stand-in GPU arrays."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from zymo import cuda
from zymo.backend.nvptx import ptxas
from zymo.cuda.np.numpy_support import from_dtype
from zymo.diagnostics import CompileError
from zymo.runtime.cuda.arguments import flatten_arg, param_of_arg

from reference_check import BACKENDS, check, run

needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")


def assembles(spec) -> None:
    for arch in ("sm_80", "sm_90"):
        assert ptxas.assemble(spec.ptx(arch), arch).registers > 0


# ---- strings ---------------------------------------------------------------------------------
@zm.kernel
def fill_unicode(a):
    i = zm.grid(1)
    if i < len(a) - 1:
        if i % 2 == 0:
            a[i] = "XYZ"
        else:
            a[i] = "a longer text than twelve"


@zm.kernel
def fill_bytes(a):
    i = zm.grid(1)
    if i < a.shape[0]:
        a[i] = b"AB"


@zm.kernel
def fill_fields(r):
    r[0]["x"] = 1
    r[0]["y"] = "ABC"
    r[1].x = 2
    r[1].y = "XYZ"
    r[1].z = b"pq"


def test_constant_strings_into_string_arrays():
    a = np.full(5, "previous", dtype="<U12")
    want = a.copy()
    want[[0, 2]] = "XYZ"
    want[[1, 3]] = "a longer text than twelve"    # NumPy cuts it to 12
    check(fill_unicode, 1, 8, [a], {0: want})
    b = np.full((3,), b"0123456789", dtype="S10")
    check(fill_bytes, 1, 4, [b], {0: np.full(3, b"AB", dtype="S10")})


def test_constant_strings_into_record_fields():
    dt = np.dtype([("x", np.int32), ("y", "<U12"), ("z", "S3")], align=True)
    r = np.zeros(2, dt)
    want = np.array([(1, "ABC", b""), (2, "XYZ", b"pq")], dtype=dt)
    check(fill_fields, 1, 1, [r], {0: want})


def test_str_into_bytes_is_a_compile_error():
    @zm.kernel
    def bad(a):
        a[0] = "text"

    with pytest.raises(CompileError, match="stored into a bytes array") as info:
        bad[1, 1](np.zeros(2, "S4"))
    assert "test_strings_and_shared_records.py" in str(info.value)


@needs_ptxas
def test_strings_assemble():
    assembles(fill_unicode.specialize(np.zeros(5, "<U12")))
    dt = np.dtype([("x", "i4"), ("y", "<U12"), ("z", "S3")], align=True)
    assembles(fill_fields.specialize(np.zeros(2, dt)))


# ---- shared arrays of records ----------------------------------------------------------------
GRID = np.dtype([("i", np.int32), ("j", np.float32, (3, 2))])


@zm.kernel
def through_shared(x, y):
    sm = zm.shared.array(8, dtype=GRID)
    t = zm.threadIdx.x
    i = zm.blockIdx.x * zm.blockDim.x + t
    sm[t] = x[i]
    zm.syncthreads()
    if t == 0:
        for k in range(8):
            y[zm.blockIdx.x * 8 + k] = sm[7 - k]
            y[zm.blockIdx.x * 8 + k].i = sm[7 - k].i + sm[k].j[2, 1]


def grid_records(n=16):
    r = np.zeros(n, GRID)
    r["i"] = np.arange(n)
    r["j"] = np.arange(6 * n, dtype=np.float32).reshape(n, 3, 2)
    return r


def test_shared_record_array_round_trip():
    x = grid_records()
    want = np.zeros_like(x)
    for block in range(2):
        part = x[block * 8:(block + 1) * 8]
        want[block * 8:(block + 1) * 8] = part[::-1]
        want["i"][block * 8:(block + 1) * 8] = part["i"][::-1] + part["j"][:, 2, 1]
    check(through_shared, 2, 8, [x, np.zeros_like(x)], {1: want})


def test_shared_record_array_from_numba_type():
    record = from_dtype(GRID)

    @cuda.jit
    def copy(x, y):
        sm = cuda.shared.array(4, dtype=record)
        t = cuda.threadIdx.x
        sm[t] = x[t]
        cuda.syncthreads()
        y[t] = sm[3 - t]

    x = grid_records(4)
    y = np.zeros_like(x)
    copy[1, 4](x, y)
    np.testing.assert_array_equal(y, x[::-1])


@needs_ptxas
def test_shared_records_assemble():
    assembles(through_shared.specialize(grid_records(), grid_records()))


# ---- record arrays in GPU memory --------------------------------------------------------------
class StandIn:
    """A GPU array as another library exposes it (an address that is never dereferenced)."""

    def __init__(self, shape, dtype, strides=None, address=1 << 32):
        dtype = np.dtype(dtype)
        self.dtype, self.shape, self.ndim = dtype, shape, len(shape)
        self.__cuda_array_interface__ = {"shape": shape, "typestr": dtype.str,
                                         "descr": dtype.descr, "strides": strides,
                                         "data": (address, False), "version": 3}


def test_gpu_record_array_is_passed_as_field_views():
    dt = np.dtype([("a", np.float64), ("b", np.int32), ("h", np.float32, (2,)),
                   ("s", "S6")], align=True)
    gpu = StandIn((5,), dt)
    host = np.zeros(5, dt)
    param = param_of_arg(gpu)
    assert param.kind == "record" and param.fields == dt.names
    assert [p.type for p in param.items] == [p.type for p in param_of_arg(host).items]
    views = [v.__cuda_array_interface__ for v in flatten_arg(gpu)]
    for view, name in zip(views, dt.names):
        offset = dt.fields[name][1]
        assert view["data"][0] == (1 << 32) + offset
        want = host[name] if dt[name].kind != "S" else host[name][..., None].view(np.uint8)
        assert tuple(view["shape"]) == want.shape and tuple(view["strides"]) == want.strides
        assert np.dtype(view["typestr"]) == want.dtype


def test_device_record_array_interface_keeps_its_fields():
    device = cuda.to_device(grid_records(4))
    assert [tuple(d) for d in device.__cuda_array_interface__["descr"]] == GRID.descr


# ---- record types in signatures -----------------------------------------------------------------
def test_record_signature_compiles_and_runs():
    rec_dtype = np.dtype([("a", "int32"), ("b", "float64")], align=True)
    rec = from_dtype(rec_dtype)

    @cuda.jit((rec[:],))
    def copy_b(a):
        i = cuda.grid(1)
        a[i].a = a[i].b

    a = np.zeros(3, rec_dtype)
    a["b"] = [123.0, 246.0, 369.0]
    copy_b[1, 3](a)
    np.testing.assert_array_equal(a["a"], [123, 246, 369])
    if ptxas.find() is not None:
        assembles(copy_b._declared[0])


def test_unaligned_record_signature_is_refused():
    rec = from_dtype(np.dtype([("a", "int32"), ("b", "float64")]))
    with pytest.raises(TypeError, match="type float64 is not aligned"):
        @cuda.jit((rec[:],))
        def f(a):
            a[0].a = a[0].b


def test_aligned_and_packed_records_are_two_signatures():
    packed = np.dtype([("x", np.float16), ("y", np.float16)])
    aligned = np.dtype([("x", np.float16), ("y", np.float16)], align=True)

    @cuda.jit
    def f1(a):
        a[0].x = 1

    @cuda.jit
    def f2(a):
        a[0].x = 1

    f1[1, 1](cuda.to_device(np.zeros(1, packed)))
    f2[1, 1](cuda.to_device(np.zeros(1, aligned)))
    assert f1.signatures[0] != f2.signatures[0]
    assert f1.signatures[0] == (cuda.types.Array(from_dtype(packed), 1, "A"),)


def test_interp_sees_strings_and_records_alike():
    r = np.zeros(2, np.dtype([("x", np.int32), ("y", "<U12"), ("z", "S3")], align=True))
    got = {backend: run(fill_fields, 1, 1, [r], backend)[0] for backend in BACKENDS}
    np.testing.assert_array_equal(got["cpu"], got["interp"])
