"""datetime64[unit] and timedelta64[unit] in kernels: arrays, scalar arguments, NumPy's
arithmetic and unit rules, NaT, comparisons; on the CPU backend and the interpreter against
NumPy, through ptxas for CUDA, and through zymo.cuda (types, ufuncs, device array views)."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from zymo import cuda
from zymo.backend.nvptx import ptxas
from zymo.diagnostics import CompileError
from zymo.ir import types as T

from reference_check import BACKENDS, run

needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")


def dates(n=40, seed=0):
    rng = np.random.default_rng(seed)
    start = np.datetime64("2005-02-01") + np.arange(n)
    end = start + rng.integers(-5000, 5000, n)
    end[3] = np.datetime64("NaT")
    return start, end


@zm.kernel
def arithmetic(start, end, delta, target, matches, before, shift, later, ratio, scaled):
    i = zm.grid(1)
    if i < delta.shape[0]:
        delta[i] = end[i] - start[i]
        matches[i] = start[i] == target
        before[i] = end[i] < start[i]
        later[i] = start[i] + shift * 2 - delta[i] // 3     # days and hours: stored in s
        ratio[i] = delta[i] / shift
        scaled[i] = delta[i] * 1.5 + 1


def test_arithmetic_units_and_nat_match_numpy():
    start, end = dates()
    n = start.size
    shift = np.timedelta64(5, "h")
    args = [start, end, np.zeros(n, "m8[D]"), start[5], np.zeros(n, bool), np.zeros(n, bool),
            shift, np.zeros(n, "M8[s]"), np.zeros(n), np.zeros(n, "m8[D]")]
    delta = end - start
    with np.errstate(invalid="ignore"):
        want = {2: delta, 4: start == start[5], 5: end < start,
                7: (start + shift * 2 - delta // 3).astype("M8[s]"), 8: delta / shift,
                9: delta * 1.5 + 1}
    for backend in BACKENDS:
        got = run(arithmetic, 1, 64, args, backend)
        for index, expected in want.items():
            np.testing.assert_array_equal(got[index], expected, err_msg=f"{backend} {index}")
        assert np.isnat(got[2][3]) and np.isnat(got[7][3]) and np.isnan(got[8][3])


@zm.kernel
def coarsen(fine, coarse, halves):
    i = zm.grid(1)
    if i < fine.shape[0]:
        coarse[i] = fine[i]            # to a coarser unit: toward minus infinity, as astype
        halves[i] = (fine[i] - fine[0]) // 2


def test_unit_conversion_and_truncating_division():
    fine = np.array([-25, -1, 0, 1, 47, -7], "M8[h]")
    fine[4] = np.datetime64("NaT")
    for backend in BACKENDS:
        got = run(coarsen, 1, 8, [fine, np.zeros(6, "M8[D]"), np.zeros(6, "m8[h]")], backend)
        np.testing.assert_array_equal(got[1], fine.astype("M8[D]"))
        np.testing.assert_array_equal(got[2], (fine - fine[0]) // 2)


def test_datetime_plus_datetime_is_a_compile_error():
    @zm.kernel
    def bad(a, out):
        out[0] = a[0] + a[1]

    with pytest.raises(CompileError, match="NumPy has no datetime64") as info:
        bad[1, 1](np.zeros(2, "M8[D]"), np.zeros(1, "M8[D]"))
    assert "test_datetimes.py" in str(info.value)


@needs_ptxas
def test_datetimes_assemble():
    start, end = dates()
    n = start.size
    spec = arithmetic.specialize(start, end, np.zeros(n, "m8[D]"), start[5], np.zeros(n, bool),
                                 np.zeros(n, bool), np.timedelta64(5, "h"),
                                 np.zeros(n, "M8[s]"), np.zeros(n), np.zeros(n, "m8[D]"))
    for arch in ("sm_80", "sm_90"):
        assert ptxas.assemble(spec.ptx(arch), arch).registers > 0


# ---- zymo.cuda ------------------------------------------------------------------------------
def test_numba_types_of_datetimes():
    from zymo.cuda.np.numpy_support import from_dtype
    day = from_dtype(np.dtype("M8[D]"))
    assert str(day) == "datetime64[D]" and day.unit == "D"
    assert from_dtype(np.dtype("m8[s]")) == cuda.types.NPTimedelta("s")
    assert day[:].zymo_type == T.Array(T.time_type("D", False), 1, "global", "A")


def test_ufunc_infers_a_timedelta_result():
    from zymo.cuda.np.numpy_support import from_dtype
    day = from_dtype(np.dtype("M8[D]"))

    @cuda.vectorize([(day, day)], target="cuda")
    def between(a, b):
        return b - a

    start, end = dates()
    got = between(start, end)
    assert got.dtype == np.dtype("m8[D]")
    np.testing.assert_array_equal(got, end - start)


def test_device_array_view_as_int64_shares_memory():
    start, _ = dates()
    device = cuda.to_device(start)
    viewed = device.view(np.int64)
    np.testing.assert_array_equal(viewed.copy_to_host(), start.view(np.int64))
    assert viewed.gpu_data == device.gpu_data
    assert cuda.to_device(start).gpu_data != device.gpu_data
