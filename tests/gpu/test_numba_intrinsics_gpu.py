"""numba.cuda's intrinsics (tests/ops/test_numba_intrinsics.py) on a GPU: atomics, block votes,
warp matches and math give what the interpreter gives, or, where the threads' order decides
the old values, what any order of them gives."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from ops import test_numba_intrinsics as K

pytestmark = pytest.mark.gpu


def _launch(kernel, backend: str, grid, block, *args):
    """Run `kernel[grid, block]` on `backend`; the array arguments after the launch."""
    moved = [zm.to_device(a) if backend == "cuda" and isinstance(a, np.ndarray) else a
             for a in args]
    kernel.on(backend)[grid, block](*moved)
    return [m.copy_to_host() if backend == "cuda" else m for m, a in zip(moved, args)
            if isinstance(a, np.ndarray)]


def _both(kernel, grid, block, make_args):
    return (_launch(kernel, "cuda", grid, block, *make_args()),
            _launch(kernel, "interp", grid, block, *make_args()))


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_inc_and_dec_wrap_on_the_gpu(dtype):
    limit, start = 9, np.array([7, 1, 14, 3], dtype)
    n = 45
    gpu, cpu = _both(K.wrapping_counters, 2, 32,
                     lambda: [start.copy(), dtype(limit), np.zeros((4, n), dtype)])
    np.testing.assert_array_equal(gpu[0], cpu[0])
    # the old values come in the threads' order, but the sequence they form does not change
    np.testing.assert_array_equal(np.sort(gpu[1], axis=1), np.sort(cpu[1], axis=1))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_bitwise_atomics_on_the_gpu(dtype):
    info = np.iinfo(dtype)
    x = np.random.default_rng(3).integers(info.min, info.max, 70, dtype=dtype, endpoint=True)
    start = np.array([[-1, -1], [0, 0], [0, 5]]).astype(dtype)
    gpu, cpu = _both(K.bitwise_atomics, 3, 32,
                     lambda: [start.copy(), x, np.zeros((3, len(x)), dtype)])
    np.testing.assert_array_equal(gpu[0], cpu[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint64])
@pytest.mark.parametrize("start", [np.nan, 0.5], ids=["nan", "half"])
def test_max_min_nanmax_nanmin_on_the_gpu(dtype, start):
    floating = np.issubdtype(dtype, np.floating)
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(90) if floating else rng.integers(0, 99, 90)).astype(dtype)
    if floating:
        x[[3, 40, 77]] = np.nan
    begin = np.full((2, 2), start if floating else 50).astype(dtype)
    gpu, cpu = _both(K.extrema, 3, 32, lambda: [begin.copy(), x])
    np.testing.assert_array_equal(gpu[0], cpu[0])


def test_cas_and_compare_and_swap_on_the_gpu():
    n = 40
    ticket, owner, olds = _launch(K.claims, "cuda", 2, 32, np.zeros(1, np.int64),
                                  np.full((2, 3), -1, np.int64), np.zeros(n, np.int64))
    # thread i can move the ticket from i to i + 1 only: the ones that did form a prefix
    assert 1 <= ticket[0] <= n
    np.testing.assert_array_equal(olds[:ticket[0]], np.arange(ticket[0]))
    for r in range(2):
        for c in range(3):
            assert owner[r, c] % 2 == r and owner[r, c] % 3 == c


@pytest.mark.parametrize("block", [(32, 1), (5, 7), (64, 3)], ids=str)
def test_block_votes_on_the_gpu(block):
    size = block[0] * block[1]
    x = np.random.default_rng(size).integers(-50, 50, 3 * size).astype(np.int32)
    gpu, cpu = _both(K.block_votes, 3, block, lambda: [x, np.zeros((3, len(x)), np.int32)])
    np.testing.assert_array_equal(gpu[1], cpu[1])


def test_block_vote_loop_on_the_gpu():
    work = np.random.default_rng(9).integers(0, 12, 48).astype(np.int32)
    gpu, cpu = _both(K.drain, 1, 48, lambda: [work, np.zeros(48, np.int32),
                                              np.zeros(48, np.int32)])
    for got, want in zip(gpu, cpu):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_syncwarp_match_selp_lanemask_on_the_gpu(dtype):
    x = np.random.default_rng(4).integers(0, 4, 96).astype(dtype).astype(np.float32)
    gpu, cpu = _both(K.warp_exchange, 1, 96, lambda: [x, np.zeros(96, np.float32),
                                                      np.zeros((4, 96), np.uint32)])
    for got, want in zip(gpu, cpu):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int64, np.float64, np.uint32])
def test_match_on_the_gpu(dtype):
    x = np.zeros(64, dtype)
    x[:32] = np.random.default_rng(8).integers(0, 3, 32)
    gpu, cpu = _both(K.match_values, 1, 64, lambda: [x, np.zeros((2, 64), np.uint32),
                                                     np.zeros(64, bool)])
    for got, want in zip(gpu, cpu):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_math_on_the_gpu(dtype):
    with np.errstate(over="ignore"):
        x = np.array(K.EDGES + list(np.random.default_rng(7).uniform(-6, 6, 40)), dtype)
    gpu, cpu = _both(K.unary_math, 2, 32, lambda: [x, np.zeros((9, len(x)), dtype)])
    tolerance = 1e-13 if dtype == np.float64 else 1e-6   # libdevice's gamma against Python's
    for row in (0, 1, 2, 8):
        np.testing.assert_allclose(gpu[1][row], cpu[1][row], rtol=tolerance, atol=tolerance)
    np.testing.assert_array_equal(gpu[1][3:8], cpu[1][3:8])
    y = np.resize(np.array([1.0, 2.0, 0.0, -1.0, np.inf, 1.0, 3.0, np.nan, 0.7, -0.0], dtype),
                  len(x))
    n = np.random.default_rng(11).integers(-1100, 1100, len(x)).astype(np.int32)
    gpu, cpu = _both(K.split_math, 2, 32, lambda: [x, y, n, np.zeros((6, len(x)), dtype),
                                                   np.zeros((4, len(x)), np.int64)])
    for got, want in zip(gpu, cpu):
        np.testing.assert_array_equal(got, want)
