"""numba's CUDA vector types (`cuda.float32x4`, `cuda.int2`, ...): the names and type objects
numba has, construction from numbers and smaller vectors, `.x .y .z .w`, vectors through
device functions, branches and loops, on the interpreter and the CPU against NumPy; PTX that
ptxas accepts; errors; derivatives through a vector against finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from zymo import cuda
from zymo.backend.nvptx import ptxas
from zymo.cuda import types as nt
from zymo.cuda.core import errors
from zymo.cuda.vector_types import vector_types

needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
BACKENDS = ("cpu", "interp")
BASES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
         "float64")


# ---- names --------------------------------------------------------------------------------------
def test_every_base_type_and_count_is_a_vector_type():
    assert sorted(vector_types) == sorted(f"{b}x{n}" for b in BASES for n in range(1, 5))
    for name, vty in vector_types.items():
        base, count = name[:-2], int(name[-1])
        assert vty.name == name and vty.num_elements == count
        assert vty.base_type is getattr(nt, base)
        assert vty.attr_names == ("x", "y", "z", "w")[:count]
        assert getattr(cuda, name) is vty.user_facing_object


@pytest.mark.parametrize("alias, name", [
    ("float4", "float32x4"), ("double2", "float64x2"), ("int3", "int32x3"),
    ("char1", "int8x1"), ("uchar4", "uint8x4"), ("short2", "int16x2"), ("ushort3", "uint16x3"),
    ("uint2", "uint32x2"), ("longlong4", "int64x4"), ("ulonglong1", "uint64x1"),
    ("long2", f"int{np.dtype(np.int_).itemsize * 8}x2"),
])
def test_cuda_c_names_are_aliases(alias, name):
    assert getattr(cuda, alias) is getattr(cuda, name)
    assert alias in getattr(cuda, name).aliases


def test_constructors_are_for_kernels_only():
    with pytest.raises(RuntimeError, match="inside kernels"):
        cuda.float4(1, 2, 3, 4)


# ---- construction and fields --------------------------------------------------------------------
def readout(vobj, count):
    def kernel(out, x):
        i = zm.grid(1)
        if i < out.shape[0] // count:
            if count == 1:                  # decided at compile time: one branch is lowered
                v = vobj(x[i])
                items = (v.x,)
            elif count == 2:
                v = vobj(x[i], x[i] + 1)
                items = (v.x, v.y)
            elif count == 3:
                v = vobj(x[i], x[i] + 1, x[i] + 2)
                items = (v.x, v.y, v.z)
            else:
                v = vobj(x[i], x[i] + 1, x[i] + 2, x[i] + 3)
                items = (v.x, v.y, v.z, v.w)
            for k, item in enumerate(items):
                out[i * count + k] = item
    return kernel


@pytest.mark.parametrize("backend", BACKENDS)
def test_construction_converts_to_the_base_type(backend):
    for vty in vector_types.values():
        count, dtype = vty.num_elements, vty.base_type.dtype
        # a negative float converted to an unsigned integer is undefined in C: none for those
        x = np.array([-3.75 if dtype.kind != "u" else 3.75, 0.5, 7.25, 120.5])
        out = np.zeros(4 * count)
        zm.kernel(readout(vty.user_facing_object, count)).on(backend)[1, 4](out, x)
        # each element is the float64 converted to the base type (C's truncation for integers)
        rows = (x[:, None] + np.arange(count)).astype(dtype)
        np.testing.assert_array_equal(out, rows.ravel().astype(np.float64), err_msg=vty.name)


def fancy(out):
    one, two, three = cuda.float32(1), cuda.float32(2), cuda.float32(3)
    v1 = cuda.float32x1(one)
    v2 = cuda.float2(v1, three)
    v3 = cuda.float32x3(two, v2)
    built = (cuda.float4(v2, v2), cuda.float4(v3, v1), cuda.float4(one, v2, two),
             cuda.float4(cuda.float4(v1, two, v1, three)), cuda.float32x4(v1, v3))
    j = 0
    for v in built:
        out[j], out[j + 1], out[j + 2], out[j + 3] = v.x, v.y, v.z, v.w
        j += 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_vectors_build_bigger_vectors(backend):
    out = np.zeros(20, np.float32)
    zm.kernel(fancy).on(backend)[1, 1](out)
    np.testing.assert_array_equal(out, [1, 3, 1, 3, 2, 1, 3, 1, 1, 1, 3, 2, 1, 2, 1, 3,
                                        1, 2, 1, 3])


@cuda.jit(device=True)
def cross(a, b):
    return cuda.double3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x)


@cuda.jit(device=True)
def load3(p, i):
    return cuda.double3(p[i, 0], p[i, 1], p[i, 2])


def torque(out, p, f, steps):
    i = zm.grid(1)
    if i < p.shape[0]:
        total = cuda.float64x3(0.0, 0.0, 0.0)
        for s in range(steps):                      # a vector carried by a loop
            t = cross(load3(p, i), load3(f, (i + s) % p.shape[0]))
            total = cuda.double3(total.x + t.x, total.y + t.y, total.z + t.z)
        if p[i, 0] < 0:                             # and joined after a branch
            total = cuda.double3(-total.x, total.y, total.z)
        out[i, 0], out[i, 1], out[i, 2] = total.x, total.y, total.z


def torque_reference(p, f, steps):
    n = p.shape[0]
    out = np.zeros_like(p)
    for i in range(n):
        out[i] = sum(np.cross(p[i], f[(i + s) % n]) for s in range(steps))
        if p[i, 0] < 0:
            out[i, 0] = -out[i, 0]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_vectors_through_device_functions_loops_and_branches(backend):
    rng = np.random.default_rng(0)
    p, f = rng.standard_normal((6, 3)), rng.standard_normal((6, 3))
    out = np.zeros_like(p)
    zm.kernel(torque).on(backend)[1, 8](out, p, f, 3)
    np.testing.assert_allclose(out, torque_reference(p, f, 3), rtol=1e-12)


@needs_ptxas
def test_ptx_assembles():
    array = nt.float64[:, ::1]
    ptx, _ = cuda.compile_ptx(torque, (array, array, array, nt.int32), device=False, cc=(9, 0))
    ptxas.assemble(ptx, "sm_90")
    for base in ("int8", "uint16", "float32"):
        ptx, _ = cuda.compile_ptx(readout(getattr(cuda, f"{base}x4"), 4),
                                  (nt.float64[::1], nt.float64[::1]), device=False, cc=(9, 0))
        ptxas.assemble(ptx, "sm_90")


# ---- errors -------------------------------------------------------------------------------------
def too_few(out):
    v = cuda.float32x4(cuda.float2(1, 2), 3)
    out[0] = v.x


def too_many(out):
    v = cuda.int2(1, 2, 3)
    out[0] = v.x


def other_base(out):
    v = cuda.float32x3(cuda.int2(1, 2), 3)
    out[0] = v.x


def not_a_number(out):
    v = cuda.float2(out, 1)
    out[0] = v.x


def no_such_field(out):
    v = cuda.float2(1, 2)
    out[0] = v.z


@pytest.mark.parametrize("pyfunc, message", [
    (too_few, "float32x4 has 4 elements, the arguments give 3"),
    (too_many, "int32x2 has 2 elements, the arguments give 3"),
    (other_base, "takes float32 vectors and numbers"),
    (not_a_number, "takes numbers and float32 vectors, not"),
    (no_such_field, "no field 'z'"),
], ids=lambda v: getattr(v, "__name__", None))
def test_errors_name_the_line(pyfunc, message):
    with pytest.raises(errors.TypingError, match=message) as info:
        cuda.compile_ptx(pyfunc, (nt.float32[::1],), device=False)
    assert "test_vector_types.py:" in str(info.value)


# ---- derivatives --------------------------------------------------------------------------------
def rotate(out, xy, angle):
    i = zm.grid(1)
    if i < xy.shape[0]:
        v = cuda.double2(xy[i, 0], xy[i, 1])
        c, s = cuda.double2(np.cos(angle), np.sin(angle)).x, np.sin(angle)
        r = cuda.double2(c * v.x - s * v.y, s * v.x + c * v.y)
        out[i] = r.x * r.y


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_through_vectors(backend):
    rng = np.random.default_rng(2)
    xy = rng.standard_normal((5, 2))
    args = (zm.Duplicated(np.zeros(5), np.zeros(5)), zm.Duplicated(xy, np.zeros_like(xy)),
            zm.Active(0.3))
    report = zm.check_grad(zm.kernel(rotate), 1, 8, *args, backend=backend)
    assert report.ok, str(report)
    report = zm.check_jvp(zm.kernel(rotate), 1, 8, *args, backend=backend)
    assert report.ok, str(report)
