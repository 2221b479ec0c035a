"""Application kernels: dynamic programming, search, hashing, RNG, CFD fluxes, n-body, sparse,
softmax, cellular automata and small per-thread linear algebra."""
from __future__ import annotations

import math

import numpy as np

import zymo as zm

from .case import Case, cdiv, f32, f64, ints, wide

BLOCK = 64


# ---- edit distance of short fixed-length strings, one pair per thread (local arrays) ---------
STR_LEN = 8
ROW_LEN = 9


@zm.kernel
def edit_distance(sa, sb, out):
    t = zm.grid(1)
    if t < sa.shape[0]:
        prev = zm.local.array(ROW_LEN, zm.i32)
        cur = zm.local.array(ROW_LEN, zm.i32)
        for j in range(ROW_LEN):
            prev[j] = j
        for i in range(1, ROW_LEN):
            cur[0] = i
            for j in range(1, ROW_LEN):
                cost = 0 if sa[t, i - 1] == sb[t, j - 1] else 1
                cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            for j in range(ROW_LEN):
                prev[j] = cur[j]
        out[t] = prev[STR_LEN]


def _edit_args(rng):
    n = 300
    sa = ints(rng, np.uint8, n, STR_LEN, low=65, high=69)  # "ABCD"
    sb = sa.copy()
    mutate = rng.random((n, STR_LEN)) < 0.4
    sb[mutate] = ints(rng, np.uint8, int(mutate.sum()), low=65, high=69)
    sb[0] = sa[0]
    return [sa, sb, np.zeros(n, np.int32)]


def _levenshtein(a, b):
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
        prev = cur
    return prev[-1]


def _edit_ref(args):
    sa, sb = args[0].tolist(), args[1].tolist()
    return {2: np.array([_levenshtein(a, b) for a, b in zip(sa, sb)], np.int32)}


# ---- longest increasing subsequence, O(n^2) DP in a local array --------------------------------
LIS_LEN = 12


@zm.kernel
def lis_length(seqs, out):
    t = zm.grid(1)
    if t < seqs.shape[0]:
        dp = zm.local.array(LIS_LEN, zm.i32)
        best = 0
        for i in range(LIS_LEN):
            dp[i] = 1
            for j in range(i):
                if seqs[t, j] < seqs[t, i] and dp[j] + 1 > dp[i]:
                    dp[i] = dp[j] + 1
            best = max(best, dp[i])
        out[t] = best


def _lis_args(rng):
    seqs = ints(rng, np.int16, 300, LIS_LEN, low=-50, high=50)
    seqs[0] = np.arange(LIS_LEN)
    seqs[1] = np.arange(LIS_LEN)[::-1]
    return [seqs, np.zeros(300, np.int32)]


def _lis_ref(args):
    out = []
    for s in args[0].tolist():
        dp = []
        for i in range(len(s)):
            dp.append(1 + max([dp[j] for j in range(i) if s[j] < s[i]], default=0))
        out.append(max(dp))
    return {1: np.array(out, np.int32)}


# ---- binary search (while loop): leftmost insertion point -------------------------------------
@zm.kernel
def search_sorted(sorted_vals, queries, out):
    i = zm.grid(1)
    if i < queries.shape[0]:
        q = queries[i]
        lo = 0
        hi = sorted_vals.shape[0]
        while lo < hi:
            mid = (lo + hi) // 2
            if sorted_vals[mid] < q:
                lo = mid + 1
            else:
                hi = mid
        out[i] = lo


def _search_args(rng):
    vals = np.sort(f32(rng, 1000, low=-10.0, high=10.0))
    vals[100:110] = vals[100]  # a run of duplicates
    q = f32(rng, 700, low=-12.0, high=12.0)
    q[:50] = vals[rng.integers(0, 1000, 50)]  # exact hits
    q[50] = vals[100]
    return [vals, q, np.zeros(700, np.int64)]


def _search_ref(args):
    return {2: np.searchsorted(args[0], args[1], side="left").astype(np.int64)}


# ---- 64-bit hashing: splitmix64 and FNV-1a (u64 wrap-around, shifts, xor) ---------------------
@zm.func
def splitmix64(x):
    z = x + 0x9E3779B97F4A7C15
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB
    return z ^ (z >> 31)


@zm.kernel
def hash_splitmix(seeds, out, chained):
    i = zm.grid(1)
    if i < seeds.shape[0]:
        h = splitmix64(seeds[i])
        out[i] = h
        chained[i] = splitmix64(h ^ zm.u64(i))


def _np_splitmix(x):
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _splitmix_args(rng):
    seeds = ints(rng, np.uint64, 500)
    seeds[:3] = [0, 1, 2**64 - 1]
    return [seeds, np.zeros(500, np.uint64), np.zeros(500, np.uint64)]


def _splitmix_ref(args):
    h = _np_splitmix(args[0])
    return {1: h, 2: _np_splitmix(h ^ np.arange(h.size, dtype=np.uint64))}


FNV64_OFFSET = 0xCBF29CE484222325
FNV64_PRIME = 0x100000001B3
FNV32_OFFSET = 0x811C9DC5
FNV32_PRIME = 0x01000193


@zm.kernel
def fnv1a(data, out64, out32):
    i = zm.grid(1)
    if i < data.shape[0]:
        h = zm.u64(FNV64_OFFSET)
        g = zm.u32(FNV32_OFFSET)
        for k in range(data.shape[1]):
            byte = data[i, k]
            h ^= zm.u64(byte)
            h *= FNV64_PRIME
            g = (g ^ zm.u32(byte)) * FNV32_PRIME
        out64[i] = h
        out32[i] = g


def _fnv_args(rng):
    return [ints(rng, np.uint8, 400, 16), np.zeros(400, np.uint64), np.zeros(400, np.uint32)]


def _fnv_ref(args):
    out64, out32 = [], []
    for row in args[0].tolist():
        h, g = FNV64_OFFSET, FNV32_OFFSET
        for byte in row:
            h = ((h ^ byte) * FNV64_PRIME) % 2**64
            g = ((g ^ byte) * FNV32_PRIME) % 2**32
        out64.append(h)
        out32.append(g)
    return {1: np.array(out64, np.uint64), 2: np.array(out32, np.uint32)}


# ---- xorshift32 Monte Carlo estimate of pi, all-integer, one atomic per thread ----------------
@zm.func
def xorshift32(s):
    s ^= s << 13
    s ^= s >> 17
    s ^= s << 5
    return s


@zm.kernel
def monte_carlo_pi(seeds, states, inside, samples):
    i = zm.grid(1)
    if i < seeds.shape[0]:
        s = seeds[i]
        count = 0
        for _ in range(samples):
            s = xorshift32(s)
            a = zm.i64(s & 0xFFFF)
            b = zm.i64(s >> 16)
            if a * a + b * b < 4294967296:
                count += 1
        states[i] = s
        zm.atomic.add(inside, 0, count)


def _mc_args(rng):
    n = 256
    return [ints(rng, np.uint32, n, low=1), np.zeros(n, np.uint32), np.zeros(1, np.int32), 64]


def _mc_ref(args):
    s = args[0].copy()
    count = 0
    for _ in range(args[3]):
        s ^= s << np.uint32(13)
        s ^= s >> np.uint32(17)
        s ^= s << np.uint32(5)
        a = (s & np.uint32(0xFFFF)).astype(np.int64)
        b = (s >> np.uint32(16)).astype(np.int64)
        count += int((a * a + b * b < 2**32).sum())
    return {1: s, 2: np.array([count], np.int32)}


# ---- CFD: 1-D Euler fluxes (Rusanov and HLL) on 5 conserved variables, gamma = 1.4 -------------
GAMMA = 1.4


@zm.func
def load_state(U, c):
    return U[c, 0], U[c, 1], U[c, 2], U[c, 3], U[c, 4]


@zm.func
def pressure(q):
    rho, mx, my, mz, e = q
    return (GAMMA - 1.0) * (e - 0.5 * (mx * mx + my * my + mz * mz) / rho)


@zm.func
def flux_x(q, p):
    rho, mx, my, mz, e = q
    u = mx / rho
    return mx, mx * u + p, my * u, mz * u, (e + p) * u


@zm.func
def rusanov_flux(qL, qR):
    pL = pressure(qL)
    pR = pressure(qR)
    fL = flux_x(qL, pL)
    fR = flux_x(qR, pR)
    sL = abs(qL[1] / qL[0]) + math.sqrt(GAMMA * pL / qL[0])
    sR = abs(qR[1] / qR[0]) + math.sqrt(GAMMA * pR / qR[0])
    s = max(sL, sR)
    return (0.5 * (fL[0] + fR[0]) - 0.5 * s * (qR[0] - qL[0]),
            0.5 * (fL[1] + fR[1]) - 0.5 * s * (qR[1] - qL[1]),
            0.5 * (fL[2] + fR[2]) - 0.5 * s * (qR[2] - qL[2]),
            0.5 * (fL[3] + fR[3]) - 0.5 * s * (qR[3] - qL[3]),
            0.5 * (fL[4] + fR[4]) - 0.5 * s * (qR[4] - qL[4]))


@zm.func
def hll_flux(qL, qR):
    pL = pressure(qL)
    pR = pressure(qR)
    uL = qL[1] / qL[0]
    uR = qR[1] / qR[0]
    cL = math.sqrt(GAMMA * pL / qL[0])
    cR = math.sqrt(GAMMA * pR / qR[0])
    sL = min(uL - cL, uR - cR)
    sR = max(uL + cL, uR + cR)
    fL = flux_x(qL, pL)
    if sL >= 0.0:
        return fL
    fR = flux_x(qR, pR)
    if sR <= 0.0:
        return fR
    inv = 1.0 / (sR - sL)
    return ((sR * fL[0] - sL * fR[0] + sL * sR * (qR[0] - qL[0])) * inv,
            (sR * fL[1] - sL * fR[1] + sL * sR * (qR[1] - qL[1])) * inv,
            (sR * fL[2] - sL * fR[2] + sL * sR * (qR[2] - qL[2])) * inv,
            (sR * fL[3] - sL * fR[3] + sL * sR * (qR[3] - qL[3])) * inv,
            (sR * fL[4] - sL * fR[4] + sL * sR * (qR[4] - qL[4])) * inv)


@zm.kernel
def euler_face_flux(U, F_rus, F_hll):
    f = zm.grid(1)
    if f < F_rus.shape[0]:
        qL = load_state(U, f)
        qR = load_state(U, f + 1)
        fr = rusanov_flux(qL, qR)
        fh = hll_flux(qL, qR)
        for k in range(5):
            F_rus[f, k] = fr[k]
            F_hll[f, k] = fh[k]


@zm.kernel
def euler_fv_step(U, U_new, dt_dx):
    c = zm.grid(1)
    n = U.shape[0]
    if c < n:
        q = load_state(U, c)
        if c == 0 or c == n - 1:
            for k in range(5):
                U_new[c, k] = q[k]
            return
        f_west = rusanov_flux(load_state(U, c - 1), q)
        f_east = rusanov_flux(q, load_state(U, c + 1))
        for k in range(5):
            U_new[c, k] = q[k] - dt_dx * (f_east[k] - f_west[k])


def _euler_states(rng, n):
    rho = rng.uniform(0.5, 2.0, n)
    u = rng.uniform(-3.0, 3.0, n)  # sub- and supersonic faces in both directions
    v = rng.uniform(-1.0, 1.0, n)
    w = rng.uniform(-1.0, 1.0, n)
    p = rng.uniform(0.5, 2.0, n)
    e = p / (GAMMA - 1) + 0.5 * rho * (u * u + v * v + w * w)
    return np.stack([rho, rho * u, rho * v, rho * w, e], axis=1)


def _np_pressure(q):
    return (GAMMA - 1) * (q[:, 4] - 0.5 * (q[:, 1] ** 2 + q[:, 2] ** 2 + q[:, 3] ** 2) / q[:, 0])


def _np_flux(q, p):
    u = q[:, 1] / q[:, 0]
    return np.stack([q[:, 1], q[:, 1] * u + p, q[:, 2] * u, q[:, 3] * u, (q[:, 4] + p) * u], 1)


def _np_rusanov(qL, qR):
    pL, pR = _np_pressure(qL), _np_pressure(qR)
    sL = np.abs(qL[:, 1] / qL[:, 0]) + np.sqrt(GAMMA * pL / qL[:, 0])
    sR = np.abs(qR[:, 1] / qR[:, 0]) + np.sqrt(GAMMA * pR / qR[:, 0])
    s = np.maximum(sL, sR)[:, None]
    return 0.5 * (_np_flux(qL, pL) + _np_flux(qR, pR)) - 0.5 * s * (qR - qL)


def _np_hll(qL, qR):
    pL, pR = _np_pressure(qL), _np_pressure(qR)
    uL, uR = qL[:, 1] / qL[:, 0], qR[:, 1] / qR[:, 0]
    cL, cR = np.sqrt(GAMMA * pL / qL[:, 0]), np.sqrt(GAMMA * pR / qR[:, 0])
    sL = np.minimum(uL - cL, uR - cR)[:, None]
    sR = np.maximum(uL + cL, uR + cR)[:, None]
    fL, fR = _np_flux(qL, pL), _np_flux(qR, pR)
    mid = (sR * fL - sL * fR + sL * sR * (qR - qL)) / (sR - sL)
    return np.where(sL >= 0, fL, np.where(sR <= 0, fR, mid))


def _face_args(rng):
    n = 400
    return [_euler_states(rng, n), np.zeros((n - 1, 5)), np.zeros((n - 1, 5))]


def _face_ref(args):
    U = args[0]
    return {1: _np_rusanov(U[:-1], U[1:]), 2: _np_hll(U[:-1], U[1:])}


def _fv_args(rng):
    n = 300
    return [_euler_states(rng, n), np.zeros((n, 5)), 0.05]


def _fv_ref(args):
    U, _, r = args
    F = _np_rusanov(U[:-1], U[1:])
    out = U.copy()
    out[1:-1] = U[1:-1] - r * (F[1:] - F[:-1])
    return {1: out}


# ---- n-body accelerations with shared-memory tiles ----------------------------------------------
NB_TILE = 64
EPS2 = 0.01


@zm.kernel
def nbody_accel(pos, mass, acc):
    sx = zm.shared.array(NB_TILE, zm.f32)
    sy = zm.shared.array(NB_TILE, zm.f32)
    sz = zm.shared.array(NB_TILE, zm.f32)
    sm = zm.shared.array(NB_TILE, zm.f32)
    tid = zm.threadIdx.x
    i = zm.grid(1)
    n = pos.shape[0]
    inside = i < n
    xi = pos[i, 0] if inside else 0.0
    yi = pos[i, 1] if inside else 0.0
    zi = pos[i, 2] if inside else 0.0
    ax = 0.0
    ay = 0.0
    az = 0.0
    for tile in range((n + NB_TILE - 1) // NB_TILE):
        j = tile * NB_TILE + tid
        if j < n:
            sx[tid] = pos[j, 0]
            sy[tid] = pos[j, 1]
            sz[tid] = pos[j, 2]
            sm[tid] = mass[j]
        else:
            sx[tid] = 0.0
            sy[tid] = 0.0
            sz[tid] = 0.0
            sm[tid] = 0.0
        zm.syncthreads()
        for k in range(NB_TILE):
            dx = sx[k] - xi
            dy = sy[k] - yi
            dz = sz[k] - zi
            r2 = dx * dx + dy * dy + dz * dz + EPS2
            inv = 1.0 / (r2 * math.sqrt(r2))
            s = sm[k] * inv
            ax += dx * s
            ay += dy * s
            az += dz * s
        zm.syncthreads()
    if inside:
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


def _nbody_args(rng):
    n = 300
    return [f32(rng, n, 3), f32(rng, n, low=0.5, high=1.0), np.zeros((n, 3), np.float32)]


def _nbody_ref(args):
    pos, m = wide(args[0]), wide(args[1])
    d = pos[None, :, :] - pos[:, None, :]
    r2 = (d ** 2).sum(axis=2) + EPS2
    w = m[None, :] / (r2 * np.sqrt(r2))
    return {2: (d * w[:, :, None]).sum(axis=1)}


# ---- sparse matrix-vector product (CSR), data-dependent loop bounds ------------------------------
@zm.kernel
def spmv_csr(indptr, indices, data, x, y):
    r = zm.grid(1)
    if r < y.shape[0]:
        acc = 0.0
        for k in range(indptr[r], indptr[r + 1]):
            acc += data[k] * x[indices[k]]
        y[r] = acc


def _spmv_args(rng):
    rows, cols = 200, 150
    dense = np.where(rng.random((rows, cols)) < 0.05, rng.uniform(-1, 1, (rows, cols)), 0.0)
    dense[7] = 0.0  # an empty row
    indptr = np.concatenate([[0], np.cumsum((dense != 0).sum(axis=1))]).astype(np.int32)
    r, c = np.nonzero(dense)
    return [indptr, c.astype(np.int32), dense[r, c].astype(np.float32), f32(rng, cols),
            np.zeros(rows, np.float32)]


def _spmv_ref(args):
    indptr, indices, data, x, _ = args
    y = np.zeros(indptr.size - 1)
    for r in range(y.size):
        k = slice(indptr[r], indptr[r + 1])
        y[r] = (wide(data[k]) * wide(x)[indices[k]]).sum()
    return {4: y}


# ---- softmax per row, with augmented assignment to array elements -----------------------------
@zm.kernel
def softmax_rows(x, out):
    r = zm.grid(1)
    if r < x.shape[0]:
        m = x[r, 0]
        for j in range(1, x.shape[1]):
            m = max(m, x[r, j])
        s = 0.0
        for j in range(x.shape[1]):
            e = math.exp(x[r, j] - m)
            out[r, j] = e
            s += e
        inv = 1.0 / s
        for j in range(x.shape[1]):
            out[r, j] *= inv


def _softmax_args(rng):
    return [f32(rng, 120, 33, low=-5.0, high=5.0), np.zeros((120, 33), np.float32)]


def _softmax_ref(args):
    x = wide(args[0])
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {1: e / e.sum(axis=1, keepdims=True)}


# ---- Game of Life on a torus: (y - 1) % ny relies on floor modulo ------------------------------
@zm.kernel
def life_step(cur, nxt):
    x, y = zm.grid(2)
    ny, nx = cur.shape
    if y < ny and x < nx:
        count = 0
        for dy in range(-1, 2):
            for dx in range(-1, 2):
                if dy != 0 or dx != 0:
                    count += zm.i32(cur[(y + dy) % ny, (x + dx) % nx])
        alive = cur[y, x] == 1
        nxt[y, x] = 1 if count == 3 or (alive and count == 2) else 0


def _life_args(rng):
    return [(rng.random((30, 41)) < 0.35).astype(np.uint8), np.zeros((30, 41), np.uint8)]


def _life_ref(args):
    g = args[0].astype(np.int32)
    n = sum(np.roll(np.roll(g, dy, 0), dx, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1)
            if dy or dx)
    return {1: ((n == 3) | ((g == 1) & (n == 2))).astype(np.uint8)}


# ---- Gauss-Jordan solve of a 4x4 system per thread, in a 2-D local array -------------------------
GN = 4
GN1 = 5


@zm.kernel
def solve4(A, b, x):
    t = zm.grid(1)
    if t < A.shape[0]:
        m = zm.local.array((GN, GN1), zm.f64)
        for i in range(GN):
            for j in range(GN):
                m[i, j] = A[t, i, j]
            m[i, GN] = b[t, i]
        for k in range(GN):
            piv = m[k, k]
            for j in range(k, GN1):
                m[k, j] /= piv
            for i in range(GN):
                if i != k:
                    f = m[i, k]
                    for j in range(k, GN1):
                        m[i, j] -= f * m[k, j]
        for i in range(GN):
            x[t, i] = m[i, GN]


def _solve_args(rng):
    n = 200
    A = f64(rng, n, GN, GN) + 6.0 * np.eye(GN)  # diagonally dominant: no pivoting needed
    return [A, f64(rng, n, GN), np.zeros((n, GN))]


def _solve_ref(args):
    return {2: np.linalg.solve(args[0], args[1][:, :, None])[:, :, 0]}


CASES = [
    Case("edit_distance", edit_distance, cdiv(300, BLOCK), BLOCK, _edit_args, _edit_ref,
         features=("local_array", "dp", "min_max", "u8", "ifexp")),
    Case("lis_length", lis_length, cdiv(300, BLOCK), BLOCK, _lis_args, _lis_ref,
         features=("local_array", "dp", "i16", "and_or_not")),
    Case("search_sorted", search_sorted, cdiv(700, 128), 128, _search_args, _search_ref,
         features=("while", "binary_search")),
    Case("hash_splitmix64", hash_splitmix, cdiv(500, 128), 128, _splitmix_args, _splitmix_ref,
         features=("u64", "wraparound", "shift", "bitops", "func", "cast")),
    Case("hash_fnv1a", fnv1a, cdiv(400, 128), 128, _fnv_args, _fnv_ref,
         features=("u64", "u32", "u8", "wraparound", "bitops", "augassign", "module_constant")),
    Case("monte_carlo_pi_xorshift", monte_carlo_pi, 4, 64, _mc_args, _mc_ref,
         features=("u32", "shift", "bitops", "atomic", "func", "i64", "scalar_arg")),
    Case("euler_face_flux_f64", euler_face_flux, cdiv(399, BLOCK), BLOCK, _face_args, _face_ref,
         rtol=1e-11, atol=1e-12, features=("func", "tuple", "tuple_return", "tuple_arg",
                                            "func_early_return", "tuple_loop_index", "cfd",
                                            "f64", "nested_func"),
         differentiable=True),
    Case("euler_fv_step_f64", euler_fv_step, cdiv(300, BLOCK), BLOCK, _fv_args, _fv_ref,
         rtol=1e-11, atol=1e-12, features=("func", "tuple", "cfd", "early_return", "f64"),
         differentiable=True),
    Case("nbody_accel", nbody_accel, cdiv(300, NB_TILE), NB_TILE, _nbody_args, _nbody_ref,
         rtol=1e-4, atol=5e-3, features=("shared", "barrier", "barrier_in_loop", "math", "ifexp"),
         differentiable=True),
    Case("spmv_csr", spmv_csr, cdiv(200, BLOCK), BLOCK, _spmv_args, _spmv_ref, rtol=1e-5,
         atol=1e-5, features=("sparse", "gather", "data_dependent_loop"), differentiable=True),
    Case("softmax_rows", softmax_rows, cdiv(120, BLOCK), BLOCK, _softmax_args, _softmax_ref,
         rtol=1e-5, atol=1e-7, features=("math", "augassign", "min_max"), differentiable=True),
    Case("life_step", life_step, (cdiv(41, 16), cdiv(30, 8)), (16, 8), _life_args, _life_ref,
         features=("2d_grid", "u8", "mod", "negative", "and_or_not", "negative_range")),
    Case("solve4_local_f64", solve4, cdiv(200, BLOCK), BLOCK, _solve_args, _solve_ref,
         rtol=1e-10, atol=1e-12, features=("local_array", "2d_local", "3d_array", "augassign",
                                            "f64"),
         differentiable=True),
]
