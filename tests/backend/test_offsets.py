"""Element offsets in 32 bits where every in-bounds offset fits (CUDA C's `int` indexing),
64 bits everywhere else."""
from __future__ import annotations

import numpy as np

import zymo as zm


@zm.kernel
def stencil_row(a, out):
    c, r = zm.grid(2)
    if r < a.shape[0] and c < a.shape[1]:
        out[r, c] = a[r, min(c + 1, a.shape[1] - 1)] - a[max(r - 1, 0), c]


def _args():
    a = np.arange(35, dtype=np.float32).reshape(5, 7)
    return a, np.zeros_like(a)


def test_launch_types_numpy_arrays_small_and_hand_written_types_not():
    spec = stencil_row.specialize(*_args())
    assert all(p.type.small for p in spec.params)
    assert "array<f32, 2, small>" in spec.ir()
    typed = stencil_row.specialize(zm.Array(zm.f32, 2), zm.Array(zm.f32, 2))
    assert not any(p.type.small for p in typed.params)


def _exact_i32_multiplies(llvm: str) -> int:
    return llvm.count("mul nsw nuw i32") + llvm.count("mul nuw nsw i32")


def test_small_arrays_index_in_i32_without_wrapping():
    llvm = stencil_row.specialize(*_args()).llvm("cpu", optimized=False)
    assert _exact_i32_multiplies(llvm) == 3          # one per access: row * row stride
    typed = stencil_row.specialize(zm.Array(zm.f32, 2), zm.Array(zm.f32, 2))
    llvm = typed.llvm("cpu", optimized=False)
    assert _exact_i32_multiplies(llvm) == 0 and "mul i64" in llvm


def test_bounds_checked_kernels_keep_64_bit_offsets():
    checked = zm.kernel(stencil_row.py_func, boundscheck=True)
    assert _exact_i32_multiplies(checked.specialize(*_args()).llvm("cpu", optimized=False)) == 0


def test_ptx_uses_32_bit_multiplies_like_cuda_c():
    ptx = stencil_row.specialize(*_args()).ptx("sm_90")
    assert "mul.wide.s32" in ptx and "mul.lo.s64" not in ptx
    wide = stencil_row.specialize(zm.Array(zm.f32, 2), zm.Array(zm.f32, 2)).ptx("sm_90")
    assert "mul.lo.s64" in wide


def test_small_and_wide_offsets_compute_the_same_on_cpu():
    a, out = _args()
    stencil_row[(1, 1), (8, 8)](a, out)
    strided = np.zeros((5, 14), np.float32)[:, ::2]     # layout "A": 64-bit offsets
    stencil_row[(1, 1), (8, 8)](a, strided)
    expected = np.concatenate([a[:, 1:], a[:, -1:]], axis=1) - np.concatenate([a[:1], a[:-1]])
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(strided, expected)
