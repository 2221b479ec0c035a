"""Shared memory, barriers and warp ops, each kernel checked on the CPU backend (threads split
at barriers) and on the interpreter against NumPy: block and warp reductions, scans, tiled
matmul and transpose, bitonic sort, values live across barriers, halos, iterative relaxation,
barriers under block-uniform branches, softmax rows, local arrays across warp shuffles."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm

from reference_check import cdiv, check

RNG = np.random.default_rng(1234)


# ---- shared-memory tree reduction (classic CUDA sample, sum per block + atomic) ---------------
RED_TPB = 128


@zm.kernel
def block_sum(x, partial, total):
    sdata = zm.shared.array(RED_TPB, zm.f32)
    tid = zm.threadIdx.x
    i = zm.blockIdx.x * zm.blockDim.x * 2 + tid
    n = x.shape[0]
    v = zm.f32(0.0)
    if i < n:
        v = x[i]
    if i + zm.blockDim.x < n:
        v += x[i + zm.blockDim.x]
    sdata[tid] = v
    zm.syncthreads()
    s = zm.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        zm.syncthreads()
        s >>= 1
    if tid == 0:
        partial[zm.blockIdx.x] = sdata[0]
        zm.atomic.add(total, 0, sdata[0])


@pytest.mark.parametrize("n", [1, 255, 256, 1000])
def test_block_sum(n):
    x = RNG.integers(-8, 8, n).astype(np.float32)  # exact sums in any order
    nb = cdiv(n, 2 * RED_TPB)
    pad = np.zeros(nb * 2 * RED_TPB, np.float32)
    pad[:n] = x
    partial = pad.reshape(nb, 2, RED_TPB).sum(axis=(1, 2))
    check(block_sum, nb, RED_TPB, [x, np.zeros(nb, np.float32), np.zeros(1, np.float32)],
          {1: partial, 2: np.array([x.sum()], np.float32)})


# ---- warp-shuffle reduction (shfl_down) + shared across warps ---------------------------------
@zm.func
def warp_reduce(v):
    off = 16
    while off > 0:
        v += zm.shfl_down_sync(0xFFFFFFFF, v, off)
        off //= 2
    return v


@zm.kernel
def warp_block_sum(x, out):
    warp_sums = zm.shared.array(32, zm.i32)
    i = zm.grid(1)
    lane = zm.laneid
    wid = zm.threadIdx.x // 32
    v = 0
    if i < x.shape[0]:
        v = x[i]
    v = warp_reduce(v)
    if lane == 0:
        warp_sums[wid] = v
    zm.syncthreads()
    nw = zm.blockDim.x // 32
    if wid == 0:
        v = warp_sums[lane] if lane < nw else 0
        v = warp_reduce(v)
        if lane == 0:
            out[zm.blockIdx.x] = v


@pytest.mark.parametrize("n", [1, 100, 512])
def test_warp_block_sum(n):
    x = RNG.integers(-1000, 1000, n).astype(np.int32)
    nb = cdiv(n, 256)
    pad = np.zeros(nb * 256, np.int32)
    pad[:n] = x
    check(warp_block_sum, nb, 256, [x, np.zeros(nb, np.int32)],
          {1: pad.reshape(nb, 256).sum(axis=1).astype(np.int32)})


# ---- warp inclusive scan with shfl_up, block scan via shared, ballot count --------------------
@zm.kernel
def warp_scan_ballot(x, scan, npos):
    i = zm.grid(1)
    lane = zm.threadIdx.x % zm.warpsize
    v = x[i]
    d = 1
    while d < 32:
        y = zm.shfl_up_sync(0xFFFFFFFF, v, d)
        if lane >= d:
            v += y
        d *= 2
    scan[i] = v
    mask = zm.ballot_sync(0xFFFFFFFF, x[i] > 0)
    if lane == 0:
        c = 0
        while mask:
            c += mask & 1
            mask >>= 1
        npos[i // 32] = c


def test_warp_scan_ballot():
    n = 128
    x = RNG.integers(-5, 6, n).astype(np.int32)
    scan = np.cumsum(x.reshape(-1, 32), axis=1).ravel().astype(np.int32)
    npos = (x.reshape(-1, 32) > 0).sum(axis=1).astype(np.int32)
    check(warp_scan_ballot, 2, 64, [x, np.zeros(n, np.int32), np.zeros(4, np.int32)],
          {1: scan, 2: npos})


@zm.kernel
def xor_allreduce_max(x, out):
    i = zm.grid(1)
    v = x[i]
    for m in (16, 8, 4, 2, 1):
        v = max(v, zm.shfl_xor_sync(0xFFFFFFFF, v, m))
    out[i] = v
    src = zm.shfl_sync(0xFFFFFFFF, x[i], 31 - zm.laneid)
    x[i] = src  # each thread writes its own element


def test_xor_allreduce_max():
    n = 96
    x = RNG.standard_normal(n).astype(np.float32)
    want = np.repeat(x.reshape(-1, 32).max(axis=1), 32)
    rev = x.reshape(-1, 32)[:, ::-1].ravel()
    check(xor_allreduce_max, 3, 32, [x, np.zeros(n, np.float32)], {0: rev, 1: want})


# ---- tiled matrix multiply (numba docs fast_matmul) -------------------------------------------
TILE = 8


@zm.kernel
def fast_matmul(A, B, C):
    sA = zm.shared.array(shape=(TILE, TILE), dtype=zm.f32)
    sB = zm.shared.array(shape=(TILE, TILE), dtype=zm.f32)
    x, y = zm.grid(2)
    tx = zm.threadIdx.x
    ty = zm.threadIdx.y
    bpg = zm.gridDim.x
    tmp = zm.f32(0.0)
    for i in range(bpg):
        sA[ty, tx] = 0
        sB[ty, tx] = 0
        if y < A.shape[0] and (tx + i * TILE) < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * TILE]
        if x < B.shape[1] and (ty + i * TILE) < B.shape[0]:
            sB[ty, tx] = B[ty + i * TILE, x]
        zm.syncthreads()
        for j in range(TILE):
            tmp += sA[ty, j] * sB[j, tx]
        zm.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = tmp


@pytest.mark.parametrize("n", [5, 16, 19])
def test_fast_matmul(n):
    A = RNG.standard_normal((n, n)).astype(np.float32)
    B = RNG.standard_normal((n, n)).astype(np.float32)
    g = cdiv(n, TILE)
    check(fast_matmul, (g, g), (TILE, TILE), [A, B, np.zeros((n, n), np.float32)],
          {2: A.astype(np.float64) @ B}, rtol=1e-4, atol=1e-4)


# ---- transpose through a padded shared tile, non-square, 2-D grid -----------------------------
@zm.kernel
def transpose_tile(src, dst):
    tile = zm.shared.array((TILE, TILE + 1), zm.f64)
    bx = zm.blockIdx.x * TILE
    by = zm.blockIdx.y * TILE
    x = bx + zm.threadIdx.x
    y = by + zm.threadIdx.y
    if y < src.shape[0] and x < src.shape[1]:
        tile[zm.threadIdx.y, zm.threadIdx.x] = src[y, x]
    zm.syncthreads()
    x2 = by + zm.threadIdx.x
    y2 = bx + zm.threadIdx.y
    if y2 < dst.shape[0] and x2 < dst.shape[1]:
        dst[y2, x2] = tile[zm.threadIdx.x, zm.threadIdx.y]


@pytest.mark.parametrize("shape", [(1, 1), (5, 13), (16, 8)])
def test_transpose_tile(shape):
    a = RNG.standard_normal(shape)
    grid = (cdiv(shape[1], TILE), cdiv(shape[0], TILE))
    check(transpose_tile, grid, (TILE, TILE), [a, np.zeros(shape[::-1])], {1: a.T})


# ---- bitonic sort of one block in shared memory (nested loops with barriers) ------------------
SORT_N = 64


@zm.kernel
def bitonic_sort_block(keys):
    s = zm.shared.array(SORT_N, zm.i32)
    t = zm.threadIdx.x
    base = zm.blockIdx.x * SORT_N
    s[t] = keys[base + t]
    zm.syncthreads()
    k = 2
    while k <= SORT_N:
        j = k // 2
        while j > 0:
            ixj = t ^ j
            if ixj > t:
                up = (t & k) == 0
                a = s[t]
                b = s[ixj]
                if (a > b) == up:
                    s[t] = b
                    s[ixj] = a
            zm.syncthreads()
            j //= 2
        k *= 2
    keys[base + t] = s[t]


def test_bitonic_sort_block():
    keys = RNG.integers(-1000, 1000, 3 * SORT_N).astype(np.int32)
    want = np.sort(keys.reshape(3, SORT_N), axis=1).ravel()
    check(bitonic_sort_block, 3, SORT_N, [keys], {0: want})


# ---- values live across barriers: locals, local arrays, loop-carried, device-func barrier -----
@zm.func
def stage_and_sum_neighbors(sh, t, v):
    sh[t] = v
    zm.syncthreads()
    n = zm.blockDim.x
    r = sh[(t + 1) % n] + sh[(t + n - 1) % n]
    zm.syncthreads()
    return r


@zm.kernel
def across_barriers(x, out, hist):
    sh = zm.shared.array(64, zm.f64)
    loc = zm.local.array(4, zm.f64)
    t = zm.threadIdx.x
    g = zm.grid(1)
    v = x[g]
    acc = 0.0
    for it in range(4):
        loc[it] = v * (it + 1)
        v = stage_and_sum_neighbors(sh, t, v) * 0.5
        acc += v
    total = 0.0
    for it in range(4):
        total += loc[it]
    out[g] = acc + total
    hist[g] = v


def _across_ref(x, nb, bs):
    x = x.reshape(nb, bs)
    v = x.copy()
    acc = np.zeros_like(v)
    total = np.zeros_like(v)
    for it in range(4):
        total += v * (it + 1)
        v = (np.roll(v, -1, axis=1) + np.roll(v, 1, axis=1)) * 0.5
        acc += v
    return (acc + total).ravel(), v.ravel()


def test_across_barriers():
    x = RNG.standard_normal(128)
    o, h = _across_ref(x, 2, 64)
    check(across_barriers, 2, 64, [x, np.zeros(128), np.zeros(128)], {1: o, 2: h},
          rtol=1e-12, atol=1e-12)


# ---- 1-D stencil with halo in shared memory, out-of-range threads kept alive ------------------
RADIUS = 3
ST_BS = 32


@zm.kernel
def stencil_1d(x, out):
    tmp = zm.shared.array(ST_BS + 2 * RADIUS, zm.f32)
    g = zm.grid(1)
    slot = zm.threadIdx.x + RADIUS
    n = x.shape[0]
    tmp[slot] = x[g] if g < n else 0.0
    if zm.threadIdx.x < RADIUS:
        left = g - RADIUS
        right = g + ST_BS
        tmp[slot - RADIUS] = x[left] if left >= 0 else 0.0
        tmp[slot + ST_BS] = x[right] if right < n else 0.0
    zm.syncthreads()
    if g < n:
        s = zm.f32(0)
        for off in range(-RADIUS, RADIUS + 1):
            s += tmp[slot + off]
        out[g] = s


@pytest.mark.parametrize("n", [1, 40, 64])
def test_stencil_1d(n):
    x = RNG.integers(-4, 5, n).astype(np.float32)
    p = np.pad(x, RADIUS)
    want = sum(p[k:k + n] for k in range(2 * RADIUS + 1)).astype(np.float32)
    check(stencil_1d, cdiv(n, ST_BS), ST_BS, [x, np.zeros(n, np.float32)], {1: want})


# ---- iterative relaxation: while True with barriers, shared flag, double buffer ---------------
@zm.kernel
def relax_until_stable(x, iters):
    flag = zm.shared.array(1, zm.i32)
    buf = zm.shared.array((2, 64), zm.i32)
    t = zm.threadIdx.x
    n = x.shape[0]
    if t < n:
        buf[0, t] = x[t]
    it = 0
    cur = 0
    while True:
        if t == 0:
            flag[0] = 0
        zm.syncthreads()
        if t < n:
            v = buf[cur, t]
            if t > 0 and buf[cur, t - 1] + 1 < v:
                v = buf[cur, t - 1] + 1
                flag[0] = 1
            buf[1 - cur, t] = v
        zm.syncthreads()
        cur = 1 - cur
        done = flag[0] == 0
        zm.syncthreads()
        if done:
            break
        it += 1
    if t < n:
        x[t] = buf[cur, t]
    if t == 0:
        iters[0] = it


def _relax_ref(x):
    x = x.copy()
    it = 0
    while True:
        new = x.copy()
        new[1:] = np.minimum(x[1:], x[:-1] + 1)
        if np.array_equal(new, x):
            return x, it
        x = new
        it += 1


@pytest.mark.parametrize("n", [1, 8, 50])
def test_relax_until_stable(n):
    x = RNG.integers(0, 100, n).astype(np.int32)
    want, it = _relax_ref(x)
    check(relax_until_stable, 1, 64, [x, np.zeros(1, np.int32)],
          {0: want, 1: np.array([it], np.int32)})


# ---- barrier under a block-uniform branch; shared array declared in a device function ---------
@zm.func
def rotate_in_block(v):
    s = zm.shared.array(32, zm.f32)
    t = zm.threadIdx.x
    s[t] = v
    zm.syncthreads()
    return s[(t + 1) % 32]


@zm.kernel
def uniform_branch_barrier(x, out, rot):
    sh = zm.shared.array(32, zm.f32)
    t = zm.threadIdx.x
    g = zm.grid(1)
    sh[t] = x[g]
    if zm.blockIdx.x % 2 == 1:
        zm.syncthreads()
        out[g] = sh[31 - t]
    else:
        out[g] = sh[t] * 2
    rot[g] = rotate_in_block(x[g])


def test_uniform_branch_barrier():
    x = RNG.standard_normal(128).astype(np.float32)
    b = x.reshape(4, 32)
    want = np.where((np.arange(4) % 2 == 1)[:, None], b[:, ::-1], b * 2).ravel()
    check(uniform_branch_barrier, 4, 32, [x, np.zeros(128, np.float32), np.zeros(128, np.float32)],
          {1: want, 2: np.roll(b, -1, axis=1).ravel()})


# ---- work-efficient (Blelloch) exclusive scan of one block ------------------------------------
SCAN_N = 64


@zm.kernel
def blelloch_scan(x, out, totals):
    temp = zm.shared.array(SCAN_N, zm.i64)
    t = zm.threadIdx.x
    base = zm.blockIdx.x * SCAN_N
    n = x.shape[0]
    ai = base + 2 * t
    temp[2 * t] = x[ai] if ai < n else 0
    temp[2 * t + 1] = x[ai + 1] if ai + 1 < n else 0
    offset = 1
    d = SCAN_N >> 1
    while d > 0:
        zm.syncthreads()
        if t < d:
            a = offset * (2 * t + 1) - 1
            b = offset * (2 * t + 2) - 1
            temp[b] += temp[a]
        offset *= 2
        d >>= 1
    if t == 0:
        totals[zm.blockIdx.x] = temp[SCAN_N - 1]
        temp[SCAN_N - 1] = 0
    d = 1
    while d < SCAN_N:
        offset >>= 1
        zm.syncthreads()
        if t < d:
            a = offset * (2 * t + 1) - 1
            b = offset * (2 * t + 2) - 1
            tmp = temp[a]
            temp[a] = temp[b]
            temp[b] += tmp
        d *= 2
    zm.syncthreads()
    if ai < n:
        out[ai] = temp[2 * t]
    if ai + 1 < n:
        out[ai + 1] = temp[2 * t + 1]


@pytest.mark.parametrize("n", [1, 63, 64, 150])
def test_blelloch_scan(n):
    x = RNG.integers(-(2**40), 2**40, n).astype(np.int64)
    nb = cdiv(n, SCAN_N)
    pad = np.zeros(nb * SCAN_N, np.int64)
    pad[:n] = x
    blocks = pad.reshape(nb, SCAN_N)
    excl = (np.cumsum(blocks, axis=1) - blocks).ravel()[:n]
    check(blelloch_scan, nb, SCAN_N // 2, [x, np.zeros(n, np.int64), np.zeros(nb, np.int64)],
          {1: excl, 2: blocks.sum(axis=1)})


# ---- row softmax: one block per row, shared-memory max and sum reductions (float32) -----------
SM_T = 64


@zm.kernel
def softmax_rows(x, out):
    red = zm.shared.array(SM_T, zm.f32)
    row = zm.blockIdx.x
    t = zm.threadIdx.x
    ncol = x.shape[1]
    m = -math.inf
    for c in range(t, ncol, SM_T):
        m = max(m, x[row, c])
    red[t] = m
    zm.syncthreads()
    s = SM_T // 2
    while s > 0:
        if t < s:
            red[t] = max(red[t], red[t + s])
        zm.syncthreads()
        s //= 2
    m = red[0]
    zm.syncthreads()
    acc = zm.f32(0)
    for c in range(t, ncol, SM_T):
        acc += math.exp(x[row, c] - m)
    red[t] = acc
    zm.syncthreads()
    s = SM_T // 2
    while s > 0:
        if t < s:
            red[t] += red[t + s]
        zm.syncthreads()
        s //= 2
    total = red[0]
    for c in range(t, ncol, SM_T):
        out[row, c] = math.exp(x[row, c] - m) / total


@pytest.mark.parametrize("shape", [(1, 1), (3, 50), (4, 200)])
def test_softmax_rows(shape):
    x = (RNG.standard_normal(shape) * 5).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    check(softmax_rows, shape[0], SM_T, [x, np.zeros(shape, np.float32)],
          {1: e / e.sum(1, keepdims=True)}, rtol=2e-5, atol=1e-7)


# ---- local array live across warp shuffles and barriers; uniform break after all_sync ---------
@zm.kernel
def local_across_phases(x, out):
    i = zm.grid(1)
    buf = zm.local.array(4, zm.f64)
    for k in range(4):
        buf[k] = x[i] * (k + 1)
    acc = 0.0
    for k in range(4):
        v = zm.shfl_xor_sync(0xFFFFFFFF, buf[k], 1)
        buf[k] = buf[k] + v
        zm.syncthreads()
        acc += buf[(k + 1) % 4]
    out[i] = acc


@zm.kernel
def warp_vote_break(x, out):
    i = zm.grid(1)
    v = x[i]
    k = 0
    while k < 5:
        s = zm.shfl_xor_sync(0xFFFFFFFF, v, 1)
        v = v + s * 0.5
        k += 1
        if k >= 2 and zm.all_sync(0xFFFFFFFF, v > 1.0):
            break
    out[i] = v + k


def test_local_across_phases():
    x = RNG.random(64)
    pair = x + x.reshape(-1, 2)[:, ::-1].ravel()
    check(local_across_phases, 2, 32, [x, np.zeros(64)], {1: 9 * x + pair}, rtol=1e-14)


def test_warp_vote_break():
    x = RNG.random(64) * 0.6
    want = np.zeros(64)
    for w in range(2):
        v = x[32 * w:32 * (w + 1)].copy()
        k = 0
        while k < 5:
            v = v + v.reshape(-1, 2)[:, ::-1].ravel() * 0.5
            k += 1
            if k >= 2 and np.all(v > 1.0):
                break
        want[32 * w:32 * (w + 1)] = v + k
    check(warp_vote_break, 2, 32, [x, np.zeros(64)], {1: want}, rtol=1e-14)
