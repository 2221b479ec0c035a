"""Warp-level primitives: shuffles (down, up, xor, indexed), votes, activemask, lane ids.

Every warp op here runs with all lanes of the warp converged (no bounds branch around it), so
the results are defined by CUDA semantics.
"""
from __future__ import annotations

import numpy as np

import zymo as zm

from .case import Case, f32, f64, ints, wide

FULL = 0xFFFFFFFF
WARP = 32
XOR_MASKS = (16, 8, 4, 2, 1)
NMASKS = 5


def _per_warp(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, WARP)


# ---- warp-shuffle reduction: shfl_down loop, lane 0 adds atomically ----------------------------
@zm.kernel
def warp_sum(x, out):
    i = zm.grid(1)
    v = x[i] if i < x.shape[0] else 0.0
    offset = 16
    while offset > 0:
        v += zm.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if zm.laneid == 0:
        zm.atomic.add(out, 0, v)


def _wsum_args(rng):
    return [f32(rng, 5000, low=0.0, high=1.0), np.zeros(1, np.float32)]


def _wsum_ref(args):
    return {1: np.array([wide(args[0]).sum()])}


# ---- two-level block reduction: warp shuffles, shared partials, one partial per block ---------
WARPS_PER_BLOCK = 8


@zm.kernel
def block_sum_warps(x, partial):
    sums = zm.shared.array(WARPS_PER_BLOCK, zm.f64)
    i = zm.grid(1)
    lane = zm.threadIdx.x % WARP
    warp = zm.threadIdx.x // WARP
    v = x[i] if i < x.shape[0] else 0.0
    for k in range(NMASKS):
        v += zm.shfl_down_sync(FULL, v, XOR_MASKS[k])
    if lane == 0:
        sums[warp] = v
    zm.syncthreads()
    if warp == 0:
        w = sums[lane] if lane < WARPS_PER_BLOCK else 0.0
        for k in range(NMASKS):
            w += zm.shfl_down_sync(FULL, w, XOR_MASKS[k])
        if lane == 0:
            partial[zm.blockIdx.x] = w


def _bsw_args(rng):
    n = 2000
    return [f64(rng, n), np.zeros(8)]


def _bsw_ref(args):
    x = np.zeros(8 * 256)
    x[:args[0].size] = args[0]
    return {1: x.reshape(8, 256).sum(axis=1)}


# ---- butterfly all-reduce with shfl_xor: every lane gets its warp's max (f64) ------------------
@zm.kernel
def warp_allmax_xor(x, out):
    i = zm.grid(1)
    m = x[i]
    for k in range(NMASKS):
        m = max(m, zm.shfl_xor_sync(FULL, m, XOR_MASKS[k]))
    out[i] = m


def _allmax_args(rng):
    return [f64(rng, 256, low=-10.0, high=10.0), np.zeros(256)]


def _allmax_ref(args):
    m = _per_warp(args[0]).max(axis=1)
    return {1: np.repeat(m, WARP)}


# ---- inclusive scan within each warp with shfl_up ---------------------------------------------
@zm.kernel
def warp_scan(x, out):
    i = zm.grid(1)
    lane = zm.laneid
    v = x[i]
    offset = 1
    while offset < zm.warpsize:
        u = zm.shfl_up_sync(FULL, v, offset)
        if lane >= offset:
            v += u
        offset *= 2
    out[i] = v


def _wscan_args(rng):
    return [ints(rng, np.int32, 256, low=-1000, high=1000), np.zeros(256, np.int32)]


def _wscan_ref(args):
    return {1: np.cumsum(_per_warp(args[0]), axis=1).ravel().astype(np.int32)}


# ---- indexed shuffles: broadcast from lane 0, rotate by one, and a data-dependent gather -------
@zm.kernel
def warp_shuffles(x, src, bcast, rot, gath):
    i = zm.grid(1)
    lane = zm.laneid
    v = x[i]
    bcast[i] = zm.shfl_sync(FULL, v, 0)
    rot[i] = zm.shfl_sync(FULL, v, (lane + 1) % WARP)
    gath[i] = zm.shfl_sync(FULL, v, src[i])


def _shfl_args(rng):
    return [f32(rng, 128), ints(rng, np.int32, 128, low=0, high=WARP),
            np.zeros(128, np.float32), np.zeros(128, np.float32), np.zeros(128, np.float32)]


def _shfl_ref(args):
    x, src = _per_warp(args[0]), _per_warp(args[1])
    rows = np.arange(x.shape[0])[:, None]
    return {2: np.repeat(x[:, 0], WARP), 3: np.roll(x, -1, axis=1).ravel(),
            4: x[rows, src].ravel()}


# ---- votes: ballot, all, any ------------------------------------------------------------------
@zm.kernel
def warp_votes(x, ballots, alls, anys):
    i = zm.grid(1)
    p = x[i] > 0.0
    ballots[i] = zm.ballot_sync(FULL, p)
    alls[i] = 1 if zm.all_sync(FULL, p) else 0
    anys[i] = 1 if zm.any_sync(FULL, p) else 0


def _votes_args(rng):
    x = f32(rng, 192)
    x[0:32] = np.abs(x[0:32]) + 0.5     # warp 0: all positive
    x[32:64] = -np.abs(x[32:64]) - 0.5  # warp 1: none positive
    x[64:96] = -1.0
    x[64 + 7] = 1.0                     # warp 2: only lane 7
    return [x, np.zeros(192, np.uint32), np.zeros(192, np.int32), np.zeros(192, np.int32)]


def _votes_ref(args):
    p = _per_warp(args[0] > 0)
    bits = (p.astype(np.uint64) << np.arange(WARP, dtype=np.uint64)).sum(axis=1)
    return {1: np.repeat(bits.astype(np.uint32), WARP),
            2: np.repeat(p.all(axis=1), WARP).astype(np.int32),
            3: np.repeat(p.any(axis=1), WARP).astype(np.int32)}


# ---- partial warps: activemask and ballot over the lanes that exist; laneid and warpsize ------
@zm.kernel
def partial_warp(x, masks, ballots, lanes, sizes):
    i = zm.grid(1)
    m = zm.activemask()
    masks[i] = m
    ballots[i] = zm.ballot_sync(m, x[i] > 0.5)
    lanes[i] = zm.laneid
    sizes[i] = zm.warpsize


def _partial_args(rng):
    n = 2 * 48  # blocks of 48 threads: a full warp and a 16-lane warp each
    return [f32(rng, n, low=0.0, high=1.0), np.zeros(n, np.uint32), np.zeros(n, np.uint32),
            np.zeros(n, np.int32), np.zeros(n, np.int32)]


def _partial_ref(args):
    x = args[0]
    masks, ballots, lanes = [], [], []
    for block in range(2):
        for start, width in ((0, 32), (32, 16)):
            seg = x[48 * block + start: 48 * block + start + width] > 0.5
            mask = (1 << width) - 1
            bits = sum(1 << k for k in range(width) if seg[k])
            masks += [mask] * width
            ballots += [bits] * width
            lanes += list(range(width))
    n = x.size
    return {1: np.array(masks, np.uint32), 2: np.array(ballots, np.uint32),
            3: np.array(lanes, np.int32), 4: np.full(n, 32, np.int32)}


# ---- 64-bit shuffles: xor-reduce hashed u64 values over each warp --------------------------
@zm.kernel
def warp_xor_u64(x, out):
    i = zm.grid(1)
    h = x[i] * 0x9E3779B97F4A7C15
    for k in range(NMASKS):
        h ^= zm.shfl_xor_sync(FULL, h, XOR_MASKS[k])
    out[i] = h


def _xor_args(rng):
    return [ints(rng, np.uint64, 128), np.zeros(128, np.uint64)]


def _xor_ref(args):
    with np.errstate(over="ignore"):
        h = _per_warp(args[0] * np.uint64(0x9E3779B97F4A7C15))
    return {1: np.repeat(np.bitwise_xor.reduce(h, axis=1), WARP)}


# ---- matrix-vector product with one warp per row --------------------------------------------
@zm.kernel
def warp_gemv(A, x, y):
    warp = zm.grid(1) // WARP
    lane = zm.laneid
    rows, cols = A.shape
    row = warp if warp < rows else rows - 1  # keep every lane converged for the shuffles
    acc = 0.0
    for j in range(lane, cols, WARP):
        acc += A[row, j] * x[j]
    for k in range(NMASKS):
        acc += zm.shfl_xor_sync(FULL, acc, XOR_MASKS[k])
    if lane == 0 and warp < rows:
        y[warp] = acc


def _gemv_args(rng):
    return [f32(rng, 21, 100), f32(rng, 100), np.zeros(21, np.float32)]


def _gemv_ref(args):
    return {2: wide(args[0]) @ wide(args[1])}


CASES = [
    Case("warp_sum_shfl_down", warp_sum, 40, 128, _wsum_args, _wsum_ref, rtol=1e-5, atol=1e-3,
         features=("warp", "shfl_down", "atomic", "float_atomic", "laneid"), differentiable=True),
    Case("block_sum_warps_f64", block_sum_warps, 8, 256, _bsw_args, _bsw_ref, rtol=1e-12,
         atol=1e-12, features=("warp", "shfl_down", "shared", "barrier", "tuple_loop_index",
                               "module_tuple", "f64"), differentiable=True),
    Case("warp_allmax_xor_f64", warp_allmax_xor, 2, 128, _allmax_args, _allmax_ref,
         rtol=0.0, atol=0.0, features=("warp", "shfl_xor", "f64", "module_tuple")),
    Case("warp_scan_shfl_up", warp_scan, 4, 64, _wscan_args, _wscan_ref,
         features=("warp", "shfl_up", "laneid", "warpsize", "while")),
    Case("warp_shuffles", warp_shuffles, 1, 128, _shfl_args, _shfl_ref,
         features=("warp", "shfl_idx")),
    Case("warp_votes", warp_votes, 2, 96, _votes_args, _votes_ref,
         features=("warp", "ballot", "all_sync", "any_sync", "ifexp")),
    Case("partial_warp_activemask", partial_warp, 2, 48, _partial_args, _partial_ref,
         features=("warp", "activemask", "ballot", "laneid", "warpsize", "partial_warp")),
    Case("warp_xor_u64", warp_xor_u64, 1, 128, _xor_args, _xor_ref,
         features=("warp", "shfl_xor", "u64", "wraparound")),
    Case("warp_gemv", warp_gemv, 6, 128, _gemv_args, _gemv_ref, rtol=1e-5, atol=1e-5,
         features=("warp", "shfl_xor", "range_step"), differentiable=True),
]
