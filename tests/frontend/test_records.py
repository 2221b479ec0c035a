"""Record (structured) dtypes beyond fields of numbers: fields that are arrays (`r.j[i, k]`),
complex fields, packed dtypes, one NumPy record passed to a kernel (written in place), whole
records and whole array fields assigned, record arrays in constant memory and at module level;
on the CPU backend and the interpreter against NumPy, and through ptxas for CUDA."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from zymo.backend.nvptx import ptxas
from zymo.diagnostics import CompileError

from reference_check import BACKENDS, check

needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")

MIXED = np.dtype([("a", np.float64), ("b", np.int32), ("c", np.complex64),
                  ("d", np.uint8, (4,))], align=True)                     # c at offset 12
GRID = np.dtype([("i", np.int32), ("j", np.float32, (3, 2))])            # unaligned flag
PACKED = np.dtype([("a", "u1"), ("b", "u1"), ("x", "u1"), ("y", "<u4"), ("z", "u1")])
CONST_RECORDS = np.array([(1.5, 2 + 1j, (1, 2)), (2.5, -3j, (3, 4))],
                         dtype=[("x", np.float64), ("c", np.complex128), ("v", np.int16, (2,))])


def assembles(spec) -> None:
    for arch in ("sm_80", "sm_90"):
        assert ptxas.assemble(spec.ptx(arch), arch).registers > 0


def mixed(n=4):
    r = np.zeros(n, MIXED)
    r["a"], r["b"], r["c"] = np.arange(n) / 2, np.arange(n) + 1, np.arange(n) * 1j + 0.5
    r["d"] = np.arange(4 * n).reshape(n, 4)
    return r


def grid_records(n=3):
    r = np.zeros(n, GRID)
    r["i"] = np.arange(n)
    r["j"] = np.arange(6 * n, dtype=np.float32).reshape(n, 3, 2)
    return r


# ---- fields that are arrays, complex fields ------------------------------------------------
@zm.kernel
def nested(r, out):
    k = zm.grid(1)
    if k < r.shape[0]:
        out[k] = r[k].d[1] + r[k]["d"][3] + r[k].c.imag + r.a[k]
        r[k].c = r[k].c * 2j
        r[k].d[0] = 9


def test_array_and_complex_fields():
    r = mixed()
    want = r.copy()
    want["c"] = r["c"] * 2j
    want["d"][:, 0] = 9
    out = r["d"][:, 1] + r["d"][:, 3] + r["c"].imag + r["a"]
    check(nested, 1, 8, [r, np.zeros(4)], {0: want, 1: out})


@zm.kernel
def grid_fields(r, out):
    k = zm.grid(1)
    if k < r.shape[0]:
        rec = r[k]
        for i in range(3):
            for j in range(2):
                out[k, i, j] = rec.j[i, j] * rec.i
        rec.j[2, 1] = -1.0
        rec.i = rec.j.shape[0] * 10 + rec.j.shape[1]


def test_two_dimensional_field():
    r = grid_records()
    want = r.copy()
    want["j"][:, 2, 1] = -1
    want["i"] = 32
    out = r["j"] * r["i"][:, None, None]
    check(grid_fields, 1, 4, [r, np.zeros((3, 3, 2), np.float32)], {0: want, 1: out})


@zm.kernel
def copies(dst, src, row):
    k = zm.grid(1)
    if k < dst.shape[0]:
        dst[k] = src[k + 1]            # every field, the array fields element by element
        dst[k].j = row                 # a whole array field from an array...
        dst[k]["j"][0] = 0.5           # ...a row of it broadcast from a number


def test_whole_record_and_field_assignment():
    src = grid_records(4)
    row = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    want = src[1:].copy()
    want["j"] = row
    want["j"][:, 0] = 0.5
    check(copies, 1, 4, [np.zeros(3, GRID), src, row], {0: want})


# ---- one record as an argument -------------------------------------------------------------
@zm.kernel
def one_record(r, out):
    out[0] = r.c.real + r.d[2]
    r.b = 7
    r.d[3] = r.b + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_record_argument_is_written_in_place(backend):
    k = one_record if backend == "cpu" else one_record.on("interp")
    for recarray in (False, True):
        r = mixed(3)
        if recarray:
            r = r.view(np.recarray)
        out = np.zeros(1)
        k[1, 1](r[1], out)
        assert out[0] == 0.5 + 6
        assert r[1]["b"] == 7 and r[1]["d"][3] == 8
        np.testing.assert_array_equal(r[[0, 2]], mixed(3)[[0, 2]])


# ---- packed (align=False) dtypes -----------------------------------------------------------
@zm.kernel
def packed(r, out):
    k = zm.grid(1)
    if k < r.shape[0]:
        out[k] = r[k].y + r[k].x
        r[k].y = r[k].y * 3


def test_packed_fields_load_and_store_bytewise():
    r = np.zeros(5, PACKED)
    r["x"], r["y"] = np.arange(5), np.arange(5) * 1000 + 70000
    want = r.copy()
    want["y"] = r["y"] * 3
    check(packed, 1, 8, [r, np.zeros(5, np.int64)], {0: want, 1: r["y"] + r["x"]})
    assert "align1" in str(packed.specialize(r, np.zeros(5, np.int64)).params[3].type)


def test_field_stride_not_a_multiple_is_refused():
    odd = np.zeros(3, np.dtype([("a", np.int8), ("x", np.float64)]))   # 9-byte records
    with pytest.raises(zm.LaunchError, match="multiple of its size 8"):
        packed[1, 4](odd, np.zeros(3, np.int64))


# ---- record arrays frozen into the kernel --------------------------------------------------
@zm.kernel
def constants(out, cout):
    k = zm.grid(1)
    if k < out.shape[0]:
        table = zm.const.array_like(CONST_RECORDS)
        out[k] = table[k].x + table[k].v[1] + CONST_RECORDS[k]["v"][0]
        cout[k] = table[k].c


def test_constant_record_arrays():
    out, cout = np.zeros(2), np.zeros(2, np.complex128)
    want = CONST_RECORDS["x"] + CONST_RECORDS["v"][:, 1] + CONST_RECORDS["v"][:, 0]
    check(constants, 1, 2, [out, cout], {0: want, 1: CONST_RECORDS["c"]})


def test_whole_field_shape_mismatch_is_a_compile_error():
    @zm.kernel
    def bad(r):
        r[0].j = r[1].j[0]

    with pytest.raises(CompileError, match="cannot assign a 1-d array to a 2-d one") as info:
        bad[1, 1](grid_records())
    assert "test_records.py" in str(info.value)


# ---- CUDA ----------------------------------------------------------------------------------
@needs_ptxas
def test_records_assemble():
    assembles(nested.specialize(mixed(), np.zeros(4)))
    assembles(grid_fields.specialize(grid_records(), np.zeros((3, 3, 2), np.float32)))
    assembles(one_record.specialize(mixed()[0], np.zeros(1)))
    assembles(packed.specialize(np.zeros(5, PACKED), np.zeros(5, np.int64)))
    assembles(constants.specialize(np.zeros(2), np.zeros(2, np.complex128)))
