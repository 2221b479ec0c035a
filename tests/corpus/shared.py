"""Shared memory and barriers: reductions, tiled matmul, transpose, scan, halo stencil, sort."""
from __future__ import annotations

import numpy as np

import zymo as zm

from .case import Case, cdiv, f32, ints, wide

BLOCK = 256
LOG_BLOCK = 8
TILE = 16
TILE_PAD = TILE + 1
SCAN_BLOCK = 128
NBINS = 64
RADIUS = 3
HALO_BLOCK = 128
HALO_LEN = HALO_BLOCK + 2 * RADIUS
SORT_N = 256


# ---- tree reduction: one partial sum per block, barrier inside a while loop ---------------------
@zm.kernel
def block_sum(x, partial):
    s = zm.shared.array(BLOCK, zm.f32)
    tid = zm.threadIdx.x
    i = zm.blockIdx.x * zm.blockDim.x + tid
    s[tid] = x[i] if i < x.shape[0] else 0.0
    zm.syncthreads()
    stride = zm.blockDim.x // 2
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        zm.syncthreads()
        stride //= 2
    if tid == 0:
        partial[zm.blockIdx.x] = s[0]


def _sum_args(rng):
    n = 3000
    return [f32(rng, n), np.zeros(cdiv(n, BLOCK), np.float32)]


def _sum_ref(args):
    x = wide(args[0])
    pad = np.zeros(cdiv(x.size, BLOCK) * BLOCK)
    pad[:x.size] = x
    return {1: pad.reshape(-1, BLOCK).sum(axis=1)}


# ---- max reduction with a for loop over module-level constants --------------------------------
@zm.kernel
def block_max(x, partial):
    s = zm.shared.array(BLOCK, zm.f32)
    tid = zm.threadIdx.x
    i = zm.blockIdx.x * BLOCK + tid
    s[tid] = x[i] if i < x.shape[0] else -1e30
    zm.syncthreads()
    for level in range(LOG_BLOCK):
        half = BLOCK >> (level + 1)
        if tid < half:
            s[tid] = max(s[tid], s[tid + half])
        zm.syncthreads()
    if tid == 0:
        partial[zm.blockIdx.x] = s[0]


def _max_args(rng):
    n = 2000
    return [f32(rng, n, low=-100.0, high=100.0), np.zeros(cdiv(n, BLOCK), np.float32)]


def _max_ref(args):
    x = wide(args[0])
    pad = np.full(cdiv(x.size, BLOCK) * BLOCK, -1e30)
    pad[:x.size] = x
    return {1: pad.reshape(-1, BLOCK).max(axis=1)}


# ---- tiled matrix product with shared tiles, barriers inside the k loop ------------------------
@zm.kernel
def matmul_tiled(A, B, C):
    sA = zm.shared.array((TILE, TILE), zm.f32)
    sB = zm.shared.array((TILE, TILE), zm.f32)
    tx = zm.threadIdx.x
    ty = zm.threadIdx.y
    row = zm.blockIdx.y * TILE + ty
    col = zm.blockIdx.x * TILE + tx
    M = A.shape[0]
    K = A.shape[1]
    N = B.shape[1]
    acc = 0.0
    for t in range((K + TILE - 1) // TILE):
        ka = t * TILE + tx
        kb = t * TILE + ty
        sA[ty, tx] = A[row, ka] if row < M and ka < K else 0.0
        sB[ty, tx] = B[kb, col] if kb < K and col < N else 0.0
        zm.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        zm.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


def _matmul_args(m, k, n):
    def make(rng):
        return [f32(rng, m, k), f32(rng, k, n), np.zeros((m, n), np.float32)]
    return make


def _matmul_ref(args):
    return {2: wide(args[0]) @ wide(args[1])}


# ---- transpose through a padded shared tile ------------------------------------------------------
@zm.kernel
def transpose_shared(a, out):
    tile = zm.shared.array((TILE, TILE_PAD), zm.f32)
    tx = zm.threadIdx.x
    ty = zm.threadIdx.y
    rows, cols = a.shape
    x = zm.blockIdx.x * TILE + tx
    y = zm.blockIdx.y * TILE + ty
    if y < rows and x < cols:
        tile[ty, tx] = a[y, x]
    zm.syncthreads()
    x2 = zm.blockIdx.y * TILE + tx
    y2 = zm.blockIdx.x * TILE + ty
    if y2 < cols and x2 < rows:
        out[y2, x2] = tile[tx, ty]


def _transpose_args(rng):
    return [f32(rng, 37, 53), np.zeros((53, 37), np.float32)]


def _transpose_ref(args):
    return {1: args[0].T.copy()}


# ---- Hillis-Steele inclusive scan per block with a double buffer (2-D shared array) -----------
@zm.kernel
def block_scan(x, out):
    buf = zm.shared.array((2, SCAN_BLOCK), zm.f32)
    tid = zm.threadIdx.x
    i = zm.blockIdx.x * SCAN_BLOCK + tid
    n = x.shape[0]
    buf[0, tid] = x[i] if i < n else 0.0
    zm.syncthreads()
    src = 0
    offset = 1
    while offset < SCAN_BLOCK:
        v = buf[src, tid]
        if tid >= offset:
            v += buf[src, tid - offset]
        buf[1 - src, tid] = v
        zm.syncthreads()
        src = 1 - src
        offset *= 2
    if i < n:
        out[i] = buf[src, tid]


def _scan_args(rng):
    n = 1000
    return [f32(rng, n), np.zeros(n, np.float32)]


def _scan_ref(args):
    x = wide(args[0])
    out = np.concatenate([np.cumsum(x[k:k + SCAN_BLOCK]) for k in range(0, x.size, SCAN_BLOCK)])
    return {1: out}


# ---- histogram: shared atomics per block, then one global atomic per bin ----------------------
@zm.kernel
def histogram_shared(vals, hist):
    sh = zm.shared.array(NBINS, zm.i32)
    tid = zm.threadIdx.x
    for b in range(tid, NBINS, zm.blockDim.x):
        sh[b] = 0
    zm.syncthreads()
    for i in range(zm.grid(1), vals.shape[0], zm.gridsize(1)):
        zm.atomic.add(sh, vals[i] >> 2, 1)
    zm.syncthreads()
    for b in range(tid, NBINS, zm.blockDim.x):
        zm.atomic.add(hist, b, sh[b])


def _hist_args(rng):
    return [ints(rng, np.uint8, 10_000), np.zeros(NBINS, np.int32)]


def _hist_ref(args):
    return {1: np.bincount(args[0] >> 2, minlength=NBINS).astype(np.int32)}


# ---- 1-D moving average with a halo in shared memory, clamped at the ends ---------------------
@zm.kernel
def stencil1d_shared(x, out):
    sh = zm.shared.array(HALO_LEN, zm.f32)
    tid = zm.threadIdx.x
    g = zm.blockIdx.x * HALO_BLOCK + tid
    n = x.shape[0]
    sh[tid + RADIUS] = x[min(g, n - 1)]
    if tid < RADIUS:
        sh[tid] = x[max(g - RADIUS, 0)]
        sh[tid + HALO_BLOCK + RADIUS] = x[min(g + HALO_BLOCK, n - 1)]
    zm.syncthreads()
    if g < n:
        acc = 0.0
        for k in range(-RADIUS, RADIUS + 1):
            acc += sh[tid + RADIUS + k]
        out[g] = acc / (2 * RADIUS + 1)


def _halo_args(rng):
    n = 1000
    return [f32(rng, n), np.zeros(n, np.float32)]


def _halo_ref(args):
    x = np.pad(wide(args[0]), RADIUS, mode="edge")
    n = args[0].size
    w = 2 * RADIUS + 1
    return {1: sum(x[k:k + n] for k in range(w)) / w}


# ---- bitonic sort of 256 keys per block ------------------------------------------------------
@zm.kernel
def bitonic_sort_block(keys, out):
    sh = zm.shared.array(SORT_N, zm.i32)
    tid = zm.threadIdx.x
    base = zm.blockIdx.x * SORT_N
    sh[tid] = keys[base + tid]
    zm.syncthreads()
    k = 2
    while k <= SORT_N:
        j = k // 2
        while j > 0:
            partner = tid ^ j
            if partner > tid:
                a = sh[tid]
                b = sh[partner]
                ascending = (tid & k) == 0
                if (a > b) == ascending:
                    sh[tid] = b
                    sh[partner] = a
            zm.syncthreads()
            j //= 2
        k *= 2
    out[base + tid] = sh[tid]


def _bitonic_args(rng):
    keys = ints(rng, np.int32, 3 * SORT_N, low=-1000, high=1000)
    return [keys, np.zeros_like(keys)]


def _bitonic_ref(args):
    return {1: np.sort(args[0].reshape(-1, SORT_N), axis=1).ravel()}


CASES = [
    Case("block_sum", block_sum, cdiv(3000, BLOCK), BLOCK, _sum_args, _sum_ref, rtol=1e-5,
         atol=1e-4, features=("shared", "barrier", "barrier_in_loop", "while", "ifexp"),
         differentiable=True),
    Case("block_max", block_max, cdiv(2000, BLOCK), BLOCK, _max_args, _max_ref,
         features=("shared", "barrier", "barrier_in_loop", "module_constant", "min_max")),
    Case("matmul_tiled_64x48x32", matmul_tiled, (2, 4), (TILE, TILE), _matmul_args(64, 48, 32),
         _matmul_ref, rtol=1e-4, atol=1e-4, features=("shared", "barrier", "barrier_in_loop",
                                                        "2d_grid", "2d_shared"),
         differentiable=True),
    Case("matmul_tiled_37x29x41", matmul_tiled, (cdiv(41, TILE), cdiv(37, TILE)), (TILE, TILE),
         _matmul_args(37, 29, 41), _matmul_ref, rtol=1e-4, atol=1e-4,
         features=("shared", "barrier", "barrier_in_loop", "2d_grid", "2d_shared"),
         differentiable=True),
    Case("transpose_shared", transpose_shared, (cdiv(53, TILE), cdiv(37, TILE)), (TILE, TILE),
         _transpose_args, _transpose_ref, features=("shared", "barrier", "2d_shared")),
    Case("block_scan", block_scan, cdiv(1000, SCAN_BLOCK), SCAN_BLOCK, _scan_args, _scan_ref,
         rtol=1e-5, atol=1e-4, features=("shared", "barrier", "barrier_in_loop", "2d_shared"),
         differentiable=True),
    Case("histogram_shared", histogram_shared, 8, 128, _hist_args, _hist_ref,
         features=("shared", "barrier", "atomic", "shared_atomic", "gridsize", "u8")),
    Case("stencil1d_shared", stencil1d_shared, cdiv(1000, HALO_BLOCK), HALO_BLOCK, _halo_args,
         _halo_ref, features=("shared", "barrier", "halo", "negative_range", "min_max"),
         differentiable=True),
    Case("bitonic_sort_block", bitonic_sort_block, 3, SORT_N, _bitonic_args, _bitonic_ref,
         features=("shared", "barrier", "barrier_in_loop", "bitops", "while")),
]
