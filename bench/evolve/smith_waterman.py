"""Smith-Waterman local alignment of DNA reads (ADEPT style) for the evolutionary optimizer.

Two kernels compute the same thing the way ADEPT's two historical versions did (see
shared/research/gevo-and-tuners.md, section 2): one thread block per pair, one thread per query
base, a wavefront over the anti-diagonals of the DP matrix.

- `sw_v0`, the naive starting point ("V0", ADEPT's shared-memory branch): every DP value of the
  current, previous and previous-previous diagonals lives in shared memory; every diagonal
  every thread clears the whole current arrays (as ADEPT's V0 has each thread memset them; the
  same value from every thread, which the interpreter's race detector accepts), with a barrier
  after each, computes, writes a traceback direction to global memory, and copies the arrays
  one diagonal back, with five barriers in all. The best cell is found by thread 0 alone, in a
  serial scan.
- `sw_v1`, the hand-tuned version ("V1", ADEPT at 5874138): H, E and F stay in registers, the
  neighbour's values come by warp shuffles and, across warp boundaries, through per-warp
  shared slots (one barrier per diagonal); a warp-shuffle max-with-argmax reduction at the end.

Scoring (the brief's DNA scores, ADEPT's gap convention; its kernels take E and F as
`max(prev_E + extendGap, prev_H + startGap)`): match +3, mismatch -3, and a gap of k bases costs
GAP_OPEN + (k - 1) * GAP_EXTEND = -6 - (k - 1), i.e. the first gap base costs the opening alone.
With H the local score, E a gap in the query (moving along the reference) and F a gap in the
reference, for query row i and reference column j (1-based):

    E[i][j] = max(E[i][j-1] - 1, H[i][j-1] - 6)
    F[i][j] = max(F[i-1][j] - 1, H[i-1][j] - 6)
    H[i][j] = max(0, H[i-1][j-1] + s(q[i], r[j]), E[i][j], F[i][j])

with H = 0 and E = F = -inf on row and column 0.

Outputs per pair: the best score and the 0-based inclusive end positions (q_end, r_end) of the
best cell. Ties are broken deterministically: the smallest r_end, then the smallest q_end.
When no cell scores above 0 the score is 0 and both ends are -1.

All kernels share one signature, so one `inputs`, `launch_config` and `check` serve both:
`(q_seq, q_off, q_len, r_seq, r_off, r_len, trace, scores, q_end, r_end)`. `trace`
(int32, pairs x MAX_QUERY_LEN) is V0's traceback scratch: V0 overwrites its row with the
direction each thread's cell took on every diagonal, the wasted global traffic of ADEPT's V0,
which stored a pointer per DP cell, shrunk to one row per pair; nothing reads it, `check`
ignores it and V1 never touches it.
"""
from __future__ import annotations

import numpy as np

import zymo as zm

from .sw_data import (MAX_QUERY_LEN, MAX_REF_LEN, Pairs, cached_pairs, make_pairs, subset)

MATCH = 3
MISMATCH = -3
GAP_OPEN = -6
GAP_EXTEND = -1
NEG = -(1 << 20)   # minus infinity that survives adding gap penalties in int32

WARP = 32
FULL = 0xFFFFFFFF
MAX_WARPS = 32     # 1024 threads
SHUFFLE_OFFSETS = (16, 8, 4, 2, 1)
NSHUFFLES = 5
ROWS = MAX_QUERY_LEN + 1   # row 0 is the boundary

# positions of the arguments
Q_SEQ, Q_OFF, Q_LEN, R_SEQ, R_OFF, R_LEN, TRACE, SCORES, Q_END, R_END = range(10)
OUTPUTS = (SCORES, Q_END, R_END)


# ---- reference ---------------------------------------------------------------------------------
def _padded(flat: np.ndarray, off: np.ndarray, lens: np.ndarray, width: int) -> np.ndarray:
    out = np.full((len(lens), width), 255, np.uint8)
    for p in range(len(lens)):
        out[p, :lens[p]] = flat[off[p]:off[p] + lens[p]]
    return out


def reference(pairs: Pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scores, q_end, r_end) of every pair, in NumPy, over the anti-diagonals of all pairs at
    once (the same recurrence and tie-break as the kernels, independently written)."""
    n = len(pairs)
    if n == 0:
        z = np.zeros(0, np.int32)
        return z, z.copy(), z.copy()
    lq, lr = pairs.q_len.astype(np.int64), pairs.r_len.astype(np.int64)
    qmax, rmax = int(lq.max()), int(lr.max())
    q = _padded(pairs.q_seq, pairs.q_off, pairs.q_len, qmax)
    r = _padded(pairs.r_seq, pairs.r_off, pairs.r_len, rmax)
    rows = np.arange(1, qmax + 1)
    pidx = np.arange(n)[:, None]
    # values of the last two diagonals by row 0..qmax; cells not started hold column 0's values
    h_prev = np.zeros((n, qmax + 1), np.int64)
    h_pp = np.zeros_like(h_prev)
    e_prev = np.full_like(h_prev, NEG)
    f_prev = np.full_like(h_prev, NEG)
    best = np.zeros((n, qmax), np.int64)
    best_col = np.full((n, qmax), -1, np.int64)
    for d in range(2, qmax + rmax + 1):
        j = d - rows                                   # column of each row on this diagonal
        valid = (rows[None, :] <= lq[:, None]) & (j[None, :] >= 1) & (j[None, :] <= lr[:, None])
        rb = r[pidx, np.clip(j - 1, 0, rmax - 1)[None, :]]
        s = np.where(q == rb, MATCH, MISMATCH)
        e = np.maximum(e_prev[:, 1:] + GAP_EXTEND, h_prev[:, 1:] + GAP_OPEN)
        f = np.maximum(f_prev[:, :-1] + GAP_EXTEND, h_prev[:, :-1] + GAP_OPEN)
        h = np.maximum(np.maximum(h_pp[:, :-1] + s, 0), np.maximum(e, f))
        h_new = np.zeros_like(h_prev)
        h_new[:, 1:] = np.where(valid, h, 0)
        e_new = np.full_like(h_prev, NEG)
        e_new[:, 1:] = np.where(valid, e, NEG)
        f_new = np.full_like(h_prev, NEG)
        f_new[:, 1:] = np.where(valid, f, NEG)
        # strictly greater: each row keeps the first (smallest) column of its best
        up = valid & (h > best)
        best = np.where(up, h, best)
        best_col = np.where(up, j[None, :] - 1, best_col)
        h_pp, h_prev, e_prev, f_prev = h_prev, h_new, e_new, f_new
    # largest score, then smallest r_end, then smallest q_end
    key = (best << 22) + ((2047 - best_col) << 11) + (2047 - rows[None, :])
    row = key.argmax(axis=1)
    scores = best[np.arange(n), row]
    hit = scores > 0
    q_end = np.where(hit, row, -1)
    r_end = np.where(hit, best_col[np.arange(n), row], -1)
    return scores.astype(np.int32), q_end.astype(np.int32), r_end.astype(np.int32)


# ---- shared device code ------------------------------------------------------------------------
@zm.func
def beats(s, r, q, s2, r2, q2):
    """Does the cell (s2, r2, q2) beat (s, r, q) under the tie-break?"""
    return s2 > s or (s2 == s and (r2 < r or (r2 == r and q2 < q)))


# ---- V0: everything in shared memory, cleared and copied every diagonal -----------------------
@zm.kernel
def sw_v0(q_seq, q_off, q_len, r_seq, r_off, r_len, trace, scores, q_end, r_end):
    h_cur = zm.shared.array(ROWS, zm.i32)
    h_prev = zm.shared.array(ROWS, zm.i32)
    h_pp = zm.shared.array(ROWS, zm.i32)
    e_cur = zm.shared.array(ROWS, zm.i32)
    e_prev = zm.shared.array(ROWS, zm.i32)
    e_pp = zm.shared.array(ROWS, zm.i32)
    f_cur = zm.shared.array(ROWS, zm.i32)
    f_prev = zm.shared.array(ROWS, zm.i32)
    f_pp = zm.shared.array(ROWS, zm.i32)
    best_s = zm.shared.array(ROWS, zm.i32)
    best_r = zm.shared.array(ROWS, zm.i32)
    ref = zm.shared.array(MAX_REF_LEN, zm.u8)
    p = zm.blockIdx.x
    t = zm.threadIdx.x
    nt = zm.blockDim.x
    lq = q_len[p]
    lr = r_len[p]
    ro = r_off[p]
    qb = q_seq[q_off[p] + t] if t < lq else 255
    for k in range(t, lr, nt):
        ref[k] = r_seq[ro + k]
    for k in range(t, ROWS, nt):
        h_prev[k] = 0
        h_pp[k] = 0
        e_prev[k] = NEG
        e_pp[k] = NEG
        f_prev[k] = NEG
        f_pp[k] = NEG
        best_s[k] = 0
        best_r[k] = -1
    zm.syncthreads()
    i = t + 1
    for d in range(2, lq + lr + 1):
        # every thread clears the whole arrays that the diagonal overwrites anyway, a barrier
        # after each (ADEPT V0's memsets)
        for k in range(ROWS):
            h_cur[k] = 0
        zm.syncthreads()
        for k in range(ROWS):
            e_cur[k] = NEG
        zm.syncthreads()
        for k in range(ROWS):
            f_cur[k] = NEG
        zm.syncthreads()
        j = d - i
        direction = 0
        if t < lq and j >= 1 and j <= lr:
            e = max(e_prev[i] + GAP_EXTEND, h_prev[i] + GAP_OPEN)
            f = max(f_prev[i - 1] + GAP_EXTEND, h_prev[i - 1] + GAP_OPEN)
            diag = h_pp[i - 1] + (MATCH if qb == ref[j - 1] else MISMATCH)
            h = max(0, diag, e, f)
            h_cur[i] = h
            e_cur[i] = e
            f_cur[i] = f
            if h == 0:
                direction = 0
            elif h == diag:
                direction = 1
            elif h == e:
                direction = 2
            else:
                direction = 3
            if h > best_s[i]:
                best_s[i] = h
                best_r[i] = j - 1
        trace[p, t] = direction
        zm.syncthreads()
        for k in range(t, ROWS, nt):
            h_pp[k] = h_prev[k]
            h_prev[k] = h_cur[k]
            e_pp[k] = e_prev[k]
            e_prev[k] = e_cur[k]
            f_pp[k] = f_prev[k]
            f_prev[k] = f_cur[k]
        zm.syncthreads()
    if t == 0:
        bs = 0
        br = -1
        bq = -1
        for row in range(1, lq + 1):
            if beats(bs, br, bq, best_s[row], best_r[row], row - 1):
                bs = best_s[row]
                br = best_r[row]
                bq = row - 1
        scores[p] = bs
        q_end[p] = bq
        r_end[p] = br


# ---- V1: registers, warp shuffles, per-warp slots, shuffle reduction --------------------------
@zm.kernel
def sw_v1(q_seq, q_off, q_len, r_seq, r_off, r_len, trace, scores, q_end, r_end):
    # two buffers by diagonal parity, so one barrier per diagonal orders writes and reads
    slot_h = zm.shared.array(2 * MAX_WARPS, zm.i32)
    slot_f = zm.shared.array(2 * MAX_WARPS, zm.i32)
    red_s = zm.shared.array(MAX_WARPS, zm.i32)
    red_r = zm.shared.array(MAX_WARPS, zm.i32)
    red_q = zm.shared.array(MAX_WARPS, zm.i32)
    p = zm.blockIdx.x
    t = zm.threadIdx.x
    lane = t % WARP
    warp = t // WARP
    lq = q_len[p]
    lr = r_len[p]
    ro = r_off[p]
    mine = t < lq
    qb = q_seq[q_off[p] + t] if mine else 255
    row = t + 1
    # this thread's cell on the last diagonal; before it starts, column 0's values
    h = 0
    e = NEG
    f = NEG
    up_last = 0    # H[i-1][j-1]: what the row above sent one diagonal ago
    best = 0
    best_r = -1
    best_q = -1
    for d in range(2, lq + lr + 1):
        par = (d & 1) * MAX_WARPS
        if lane == WARP - 1:
            slot_h[par + warp] = h
            slot_f[par + warp] = f
        zm.syncthreads()
        up_h = zm.shfl_up_sync(FULL, h, 1)
        up_f = zm.shfl_up_sync(FULL, f, 1)
        if lane == 0:
            if warp == 0:
                up_h = 0
                up_f = NEG
            else:
                up_h = slot_h[par + warp - 1]
                up_f = slot_f[par + warp - 1]
        j = d - row
        if mine and j >= 1 and j <= lr:
            rb = r_seq[ro + j - 1]
            e = max(e + GAP_EXTEND, h + GAP_OPEN)
            f = max(up_f + GAP_EXTEND, up_h + GAP_OPEN)
            h = max(0, up_last + (MATCH if qb == rb else MISMATCH), e, f)
            if h > best:
                best = h
                best_r = j - 1
                best_q = t
        up_last = up_h
    for k in range(NSHUFFLES):
        s2 = zm.shfl_down_sync(FULL, best, SHUFFLE_OFFSETS[k])
        r2 = zm.shfl_down_sync(FULL, best_r, SHUFFLE_OFFSETS[k])
        q2 = zm.shfl_down_sync(FULL, best_q, SHUFFLE_OFFSETS[k])
        if beats(best, best_r, best_q, s2, r2, q2):
            best = s2
            best_r = r2
            best_q = q2
    if lane == 0:
        red_s[warp] = best
        red_r[warp] = best_r
        red_q[warp] = best_q
    zm.syncthreads()
    if warp == 0:
        nwarps = zm.blockDim.x // WARP
        best = red_s[lane] if lane < nwarps else 0
        best_r = red_r[lane] if lane < nwarps else -1
        best_q = red_q[lane] if lane < nwarps else -1
        for k in range(NSHUFFLES):
            s2 = zm.shfl_down_sync(FULL, best, SHUFFLE_OFFSETS[k])
            r2 = zm.shfl_down_sync(FULL, best_r, SHUFFLE_OFFSETS[k])
            q2 = zm.shfl_down_sync(FULL, best_q, SHUFFLE_OFFSETS[k])
            if beats(best, best_r, best_q, s2, r2, q2):
                best = s2
                best_r = r2
                best_q = q2
        if lane == 0:
            scores[p] = best
            q_end[p] = best_q
            r_end[p] = best_r


KERNELS = {"v0": sw_v0, "v1": sw_v1}


# ---- workload interface ------------------------------------------------------------------------
def pair_args(pairs: Pairs) -> list:
    """Launch arguments for `pairs`, outputs zeroed."""
    n = len(pairs)
    return [pairs.q_seq, pairs.q_off, pairs.q_len, pairs.r_seq, pairs.r_off, pairs.r_len,
            np.zeros((n, MAX_QUERY_LEN), np.int32), np.zeros(n, np.int32),
            np.zeros(n, np.int32), np.zeros(n, np.int32)]


def inputs(rng: np.random.Generator, n_pairs: int = 200, **lengths) -> list:
    """Fresh pairs from `rng` (keyword lengths as in `make_pairs`) and zeroed outputs."""
    return pair_args(make_pairs(n_pairs, rng, **lengths))


_pool: dict = {}
POOL = 200_000
HOLDOUT = 200_000


def _cached(n: int, seed) -> Pairs:
    key = (n, seed)
    if key not in _pool:
        _pool[key] = cached_pairs(n, list(seed))
    return _pool[key]


def sampled_inputs(rng: np.random.Generator, n_pairs: int = 2000, pool: int = POOL) -> list:
    """`n_pairs` pairs drawn by `rng` from a pool of generated pairs (on disk, loaded once per
    process): fresh random inputs for each evaluation at a fraction of the cost of generating
    them. Held-out inputs never come from this pool."""
    pairs = _cached(pool, (pool, 2026))
    pick = np.sort(rng.choice(len(pairs), size=n_pairs, replace=False))
    return pair_args(subset(pairs, pick))


def small_inputs(rng: np.random.Generator) -> list:
    """Four short pairs whose queries span two or three warps (the per-warp hand-over runs):
    for the reference interpreter's race check of an evolved variant."""
    return inputs(rng, 4, ref_len=(40, 90), query_len=(33, 70))


def small_inputs_v0(rng: np.random.Generator) -> list:
    """Two short pairs, queries over one warp: V0's race check (the interpreter runs its
    whole-array clears, 771 stores per thread and diagonal, one op at a time: it costs
    seconds)."""
    return inputs(rng, 2, ref_len=(20, 30), query_len=(33, 40))


def holdout_inputs(rng: np.random.Generator | None = None, n_pairs: int = HOLDOUT) -> list:
    """The held-out set: `n_pairs` pairs from their own seed (never in the fitness pool), the
    same for every check, so every candidate faces all of them. `rng` is unused."""
    return pair_args(_cached(n_pairs, (n_pairs, 7, 2026)))


def args_pairs(args) -> Pairs:
    return Pairs(*(args[k] for k in (Q_SEQ, Q_OFF, Q_LEN, R_SEQ, R_OFF, R_LEN)))


def launch_config(args) -> tuple[int, int]:
    """One block per pair, one thread per base of the longest query, whole warps."""
    q_len = args[Q_LEN]
    longest = int(q_len.max()) if len(q_len) else 1
    assert longest <= MAX_QUERY_LEN
    return max(len(q_len), 1), max(WARP, -(-longest // WARP) * WARP)


def expected(args) -> list:
    """`args` with the outputs the reference computes."""
    out = list(args)
    out[SCORES], out[Q_END], out[R_END] = reference(args_pairs(args))
    return out


def check(expected_args, got_args) -> float:
    """0.0 when every pair's score and end positions agree, else the fraction that do not."""
    bad = np.zeros(len(expected_args[SCORES]), bool)
    for k in OUTPUTS:
        bad |= np.asarray(expected_args[k]) != np.asarray(got_args[k])
    return float(bad.mean()) if bad.size else 0.0


def _workloads() -> dict:
    from .workloads import Workload
    race_inputs = {"v0": small_inputs_v0, "v1": small_inputs}
    return {f"sw_{name}": Workload(
        kernel, launch_config, sampled_inputs, holdout_inputs, check, 0.0, race_inputs[name],
        describe=f"Smith-Waterman {name.upper()} (ADEPT style; pairs as in the heading); every "
                 f"score and end position must agree")
        for name, kernel in KERNELS.items()}


WORKLOADS = _workloads()
