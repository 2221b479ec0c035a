"""The numba.cuda kernel language beyond numbers and arrays: tuple and namedtuple arguments,
record arrays, slices inside kernels, enumerate/zip loops, operator.* functions, tuples of
tuples at loop indices and captured GPU arrays; each on the CPU backend and the interpreter,
through ptxas for CUDA, and through zm.grad where derivatives flow."""
from __future__ import annotations

import operator
from collections import namedtuple

import numpy as np
import pytest

import zymo as zm
from zymo.backend.nvptx import ptxas
from zymo.diagnostics import CompileError

from reference_check import check

needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
Affine = namedtuple("Affine", "scale shift")
RECORD = np.dtype([("x", np.float64), ("n", np.int32), ("w", np.float64)], align=True)


def assembles(spec) -> None:
    for arch in ("sm_80", "sm_90"):
        report = ptxas.assemble(spec.ptx(arch), arch)
        assert report.registers > 0


# ---- tuple and namedtuple arguments --------------------------------------------------------
@zm.kernel
def affine(pair, f, x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * f.scale + f[1] + pair[0] * pair[1]


def test_tuple_and_namedtuple_arguments():
    x = np.arange(40, dtype=np.float32)
    f = Affine(np.float32(2.0), np.float32(-1.0))
    check(affine, 1, 64, [(3.0, np.float32(0.5)), f, x, np.zeros_like(x)],
          {3: x * 2 - 1 + 1.5})
    # other element types are other specializations
    out = np.zeros_like(x)
    affine[1, 64]((2, 3), Affine(np.float32(1.0), np.float32(0.0)), x, out)
    np.testing.assert_array_equal(out, x + 6)


@zm.kernel
def nested_tuple_arg(t, x):
    i = zm.grid(1)
    if i < x.shape[0]:
        (a, b), arr = t
        x[i] = arr[i] * a + b


def test_tuple_holding_arrays():
    src = np.arange(10, dtype=np.float64)
    check(nested_tuple_arg, 1, 32, [((2.0, 1.0), src), np.zeros(10)], {1: src * 2 + 1})


@needs_ptxas
def test_tuple_arguments_assemble():
    spec = affine.specialize((zm.f32, zm.f32), Affine(zm.f32, zm.f32), zm.Array(zm.f32, 1),
                             zm.Array(zm.f32, 1))
    assert spec.params[0].type == zm.f32 and len(spec.params) == 6
    assembles(spec)


# ---- record arrays -------------------------------------------------------------------------
@zm.kernel
def records(r, out):
    i = zm.grid(1)
    if i < r.shape[0]:
        out[i] = r[i].x * r[i]["n"] + r.w[i] + len(r)
        r[i].w = 7.0
        r[i]["n"] += 1
        rec = r[i]
        rec.x *= 2.0


def make_records(n=5):
    r = np.zeros(n, RECORD)
    r["x"], r["n"], r["w"] = np.arange(n) + 1.0, np.arange(n) % 3, 0.25
    return r


def test_record_arrays_read_and_write():
    r = make_records()
    want = make_records()
    want["w"], want["n"], want["x"] = 7.0, want["n"] + 1, want["x"] * 2
    out = r["x"] * r["n"] + r["w"] + len(r)
    check(records, 1, 32, [r, np.zeros(5)], {0: want, 1: out})


def test_unaligned_record_fields_are_refused():
    packed = np.zeros(4, np.dtype([("a", np.int8), ("x", np.float64)]))
    with pytest.raises(zm.LaunchError, match="align=True"):
        records[1, 4](packed, np.zeros(4))


def test_missing_field_is_a_compile_error():
    @zm.kernel
    def bad(r):
        r[0].y = 1.0

    with pytest.raises(CompileError, match="no field 'y'") as info:
        bad[1, 1](make_records())
    assert "test_numba_constructs.py" in str(info.value)


@needs_ptxas
def test_records_assemble():
    assembles(records.specialize(make_records(), np.zeros(5)))


@zm.kernel
def record_energy(r, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = r[i].x * r[i].x * r[i]["w"] + r[i].w * r[i].n


def test_record_derivatives():
    r, out = make_records(), np.zeros(5)
    dr = np.zeros(5, RECORD)
    zm.grad(record_energy)[1, 32](zm.Duplicated(r, dr), zm.Duplicated(out, np.ones(5)))
    np.testing.assert_allclose(dr["x"], 2 * r["x"] * r["w"])
    np.testing.assert_allclose(dr["w"], r["x"] ** 2 + r["n"])
    # against central differences on each float field
    for field in ("x", "w"):
        for k in range(5):
            plus, minus = r.copy(), r.copy()
            plus[field][k] += 1e-6
            minus[field][k] -= 1e-6
            hi, lo = np.zeros(5), np.zeros(5)
            record_energy[1, 32](plus, hi)
            record_energy[1, 32](minus, lo)
            assert np.isclose((hi - lo).sum() / 2e-6, dr[field][k], rtol=1e-6)


# ---- slices inside kernels -----------------------------------------------------------------
@zm.kernel
def row_stats(a, out):
    i = zm.grid(1)
    if i < a.shape[0]:
        row = a[i, :]
        total = 0.0
        for j in range(len(row)):
            total += row[j]
        evens = a[i, ::2]
        even_total = 0.0
        for j in range(evens.shape[0]):
            even_total += evens[j]
        out[i, 0] = total
        out[i, 1] = even_total
        out[i, 2] = a[i, 1:][-1]
        out[i, 3] = a[i, ::-1][0]
        out[i, 4] = len(a[i, 1:3]) + a[1:, 2:].shape[1] * 10 + a[i:, :].shape[0] * 100


def test_slices():
    a = np.arange(20, dtype=np.float64).reshape(4, 5)
    want = np.stack([a.sum(1), a[:, ::2].sum(1), a[:, -1], a[:, -1],
                     2 + 30 + 100 * (4 - np.arange(4))], axis=1)
    check(row_stats, 1, 8, [a, np.zeros((4, 5))], {1: want})


@zm.kernel
def window(x, lo, hi, out):
    i = zm.grid(1)
    if i == 0:
        v = x[lo:hi]
        out[0] = len(v)
        s = 0.0
        for t in v[::3]:
            s += t
        out[1] = s
        if len(v) > 0:
            v[0] = -1.0


@pytest.mark.parametrize("lo,hi", [(2, 9), (-5, 100), (7, 3), (0, -2)])
def test_run_time_slice_bounds(lo, hi):
    x = np.arange(12, dtype=np.float64)
    want_x = x.copy()
    view = want_x[lo:hi]
    want = np.array([len(view), view[::3].sum()])
    if len(view):
        view[0] = -1.0
    check(window, 1, 1, [x, np.int32(lo), np.int32(hi), np.zeros(2)], {0: want_x, 3: want})


@zm.func
def dot(u, v):
    s = 0.0
    for a, b in zip(u, v):
        s += a * b
    return s


@zm.kernel
def row_dots(a, b, out):
    i = zm.grid(1)
    if i < a.shape[0]:
        out[i] = dot(a[i, 1:], b[i, :-1]) * dot(a[i, ::2], a[i, ::2])


def test_views_passed_to_device_functions_and_derivatives():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 6)), rng.normal(size=(3, 6))
    want = (a[:, 1:] * b[:, :-1]).sum(1) * (a[:, ::2] ** 2).sum(1)
    check(row_dots, 1, 4, [a, b, np.zeros(3)], {2: want}, rtol=1e-12)
    report = zm.check_grad(row_dots, 1, 4, zm.Duplicated(a, np.zeros_like(a)),
                           zm.Duplicated(b, np.zeros_like(b)),
                           zm.Duplicated(np.zeros(3), np.ones(3)))
    assert report.ok, str(report)


def test_run_time_slice_step_is_a_compile_error():
    @zm.kernel
    def bad(x, s):
        x[::s][0] = 1.0

    with pytest.raises(CompileError, match="slice step"):
        bad[1, 1](np.zeros(4), 2)


@needs_ptxas
def test_slices_assemble():
    assembles(row_stats.specialize(np.zeros((4, 5)), np.zeros((4, 5))))
    assembles(row_dots.specialize(np.zeros((3, 6)), np.zeros((3, 6)), np.zeros(3)))


# ---- enumerate, zip, tuples of tuples, operator --------------------------------------------
WEIGHTS = ((1.0, 2.0), (3.0, 4.0))


@zm.func
def combine(op, x, y):
    return op(x, y)


@zm.kernel
def loops(a, b, out):
    if zm.grid(1) == 0:
        s = 0.0
        for j, (x, y) in enumerate(zip(a, b)):
            s += j * x * y
        out[0] = s
        t = 0.0
        for j, w in enumerate((1.0, 2.0, 3.0), 1):
            t += j * w
        out[1] = t
        u = 0.0
        for x, r in zip(a[1:], range(10, 20, 3)):
            u += x * r
        out[2] = u
        w = 0.0
        for p in range(2):
            for q in range(2):
                w += WEIGHTS[p][q] * (p + 1)
        out[3] = w
        out[4] = combine(operator.mul, a[0], 3.0) + operator.sub(a[1], b[1]) + \
            combine(operator.add, 1.0, 2.0) + (1.0 if operator.lt(a[0], a[1]) else 0.0)


def test_enumerate_zip_operator_and_nested_tuples():
    a, b = np.arange(1.0, 6.0), np.arange(5.0) + 2
    want = [sum(j * x * y for j, (x, y) in enumerate(zip(a, b))), 14.0,
            sum(x * r for x, r in zip(a[1:], range(10, 20, 3))), 17.0,
            a[0] * 3 + a[1] - b[1] + 3 + 1]
    check(loops, 1, 32, [a, b, np.zeros(5)], {2: np.array(want)})


@needs_ptxas
def test_loops_assemble():
    assembles(loops.specialize(np.zeros(5), np.zeros(5), np.zeros(5)))


# ---- captured GPU arrays (by reference) ----------------------------------------------------
class HostAsGpu:
    """Host memory that says it is a GPU array: what a captured device array looks like to
    the compiler (the launch itself needs a GPU: tests/gpu)."""

    def __init__(self, array):
        self.array = array

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.array.shape, "typestr": self.array.dtype.str, "version": 3,
                "data": (self.array.ctypes.data, False), "strides": None}


COUNTS = np.zeros(4, np.float32)
CAPTURED = HostAsGpu(COUNTS)
FROZEN = np.array([10.0, 20.0, 30.0, 40.0], np.float32)


@zm.func
def bump(i):
    CAPTURED[i] += 1.0
    return CAPTURED[i]


@zm.kernel
def uses_captured(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] + bump(i) + len(CAPTURED) + FROZEN[i]


def test_captured_gpu_arrays_are_arguments():
    x = np.arange(4, dtype=np.float32)
    spec = uses_captured.specialize(x, np.zeros(4, np.float32))
    assert len(spec.params) == 3 and "captured" in spec.ir("frontend")
    for backend in ("interp", "cpu"):
        counts, out = np.zeros(4, np.float32), np.zeros(4, np.float32)
        for launch in (1, 2):   # the kernel reads the array as it is at each launch
            spec.launch(backend, (1, 1, 1), (4, 1, 1), [x, out, counts])
            np.testing.assert_array_equal(counts, launch)
            np.testing.assert_array_equal(out, x + launch + 4 + FROZEN)


@needs_ptxas
def test_captured_gpu_arrays_assemble():
    assembles(uses_captured.specialize(np.zeros(4, np.float32), np.zeros(4, np.float32)))
