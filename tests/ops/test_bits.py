"""zm.popc / zm.clz / zm.ffs / zm.brev (numba's cuda.popc, clz, ffs, brev) on every integer
width, on the CPU backend and the interpreter against Python's integers, and in PTX."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm


@zm.kernel
def bit_counts(x, popc, clz, ffs, brev):
    i = zm.grid(1)
    if i < x.shape[0]:
        popc[i] = zm.popc(x[i])
        clz[i] = zm.clz(x[i])
        ffs[i] = zm.ffs(x[i])
        brev[i] = zm.brev(x[i])


def expected(x):
    bits = x.dtype.itemsize * 8
    rows = []
    for v in x:
        u = int(v) & ((1 << bits) - 1)
        rows.append((bin(u).count("1"), bits - u.bit_length(), (u & -u).bit_length(),
                     int(format(u, f"0{bits}b")[::-1], 2)))
    return rows


@pytest.mark.parametrize("backend", ["cpu", "interp"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint32, np.int32, np.uint64, np.int64])
def test_bit_counts_match_python(backend, dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(1)
    x = np.concatenate([np.array([0, 1, 2, 3, 12, info.max, info.min], dtype),
                        rng.integers(info.min, info.max, 25, dtype=dtype, endpoint=True)])
    outs = [np.zeros(len(x), np.int32) for _ in range(3)] + [np.zeros_like(x)]
    bit_counts.on(backend)[1, 32](x, *outs)
    want = expected(x)
    for column, out in enumerate(outs[:3]):
        np.testing.assert_array_equal(out, [row[column] for row in want])
    unsigned = outs[3].view(f"u{x.dtype.itemsize}")
    assert [int(v) for v in unsigned] == [row[3] for row in want]


def test_bit_counts_are_single_instructions_in_ptx():
    x = np.zeros(2, np.uint32)
    ptx = bit_counts.specialize(x, *(np.zeros(2, np.int32),) * 3, x).ptx("sm_90")
    assert "popc.b32" in ptx and "clz.b32" in ptx and "brev.b32" in ptx


def test_floats_are_rejected_with_a_hint():
    @zm.kernel
    def popc_of_float(x, out):
        out[0] = zm.popc(x[0])
    with pytest.raises(zm.CompileError, match="zm.popc takes an integer"):
        popc_of_float[1, 1](np.zeros(1), np.zeros(1, np.int32))
