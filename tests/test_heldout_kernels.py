"""Held-out kernels written the way people write numba.cuda code, each checked on the CPU backend
and on the interpreter against a plain NumPy/Python reference."""
from __future__ import annotations

import copy
import math
import types

import numpy as np
import pytest

import zymo as zm

BACKENDS = ("cpu", "interp")


def run(kernel, grid, block, args, backend):
    """Launch `kernel` on a deep copy of `args` on `backend`; return the copied arguments."""
    args = copy.deepcopy(list(args))
    k = kernel if backend == "cpu" else kernel.on("interp")
    k[grid, block](*args)
    return args


def check(kernel, grid, block, args, expected, rtol=0.0, atol=0.0):
    """`expected`: {argument index: array}; every other array argument must come back unchanged."""
    for backend in BACKENDS:
        got = run(kernel, grid, block, args, backend)
        for idx, arg in enumerate(args):
            if not isinstance(arg, np.ndarray):
                continue
            want = expected.get(idx, arg)
            if rtol == 0.0 and atol == 0.0:
                np.testing.assert_array_equal(got[idx], want, err_msg=f"{backend}: arg {idx}")
            else:
                np.testing.assert_allclose(got[idx], want, rtol=rtol, atol=atol,
                                           err_msg=f"{backend}: arg {idx}")


def cdiv(n, d):
    return -(-n // d)


RNG = np.random.default_rng(1234)


# ---- 1. vector add with grid-stride loop ---------------------------------------------------------
@zm.kernel
def vadd_gridstride(a, b, out):
    start = zm.grid(1)
    stride = zm.gridsize(1)
    for i in range(start, out.shape[0], stride):
        out[i] = a[i] + b[i]


@pytest.mark.parametrize("n", [1, 37, 256, 1000])
def test_vadd_gridstride(n):
    a = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    check(vadd_gridstride, 3, 64, [a, b, np.zeros(n, np.float32)], {2: a + b})


def test_vadd_empty():
    a = np.zeros(0, np.float32)
    check(vadd_gridstride, 1, 32, [a, a.copy(), a.copy()], {})


# ---- 2. numba-style: cuda.* names ---------------------------------------------------------------
cuda = types.SimpleNamespace()


def _numba_clamp_scale(x, lo, hi, out):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i >= x.size if False else i >= x.shape[0]:
        return
    v = x[i] * 3.0
    if v < lo:
        v = lo
    elif v > hi:
        v = hi
    out[i] = v


numba_clamp_scale = zm.kernel(_numba_clamp_scale)


def test_numba_clamp_scale():
    n = 300
    x = RNG.standard_normal(n).astype(np.float32)
    want = np.clip(x * np.float32(3.0), np.float32(-1.5), np.float32(2.0))
    check(numba_clamp_scale, cdiv(n, 128), 128, [x, -1.5, 2.0, np.zeros(n, np.float32)],
          {3: want})


# ---- 3. integer floor division / modulo of negatives ---------------------------------------------
@zm.kernel
def int_divmod(a, b, q, r):
    i = zm.grid(1)
    if i < a.shape[0]:
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int16, np.int8])
def test_int_divmod(dtype):
    n = 200
    a = RNG.integers(-100, 100, n).astype(dtype)
    b = RNG.integers(-9, 10, n).astype(dtype)
    b[b == 0] = 3
    check(int_divmod, cdiv(n, 64), 64, [a, b, np.zeros(n, dtype), np.zeros(n, dtype)],
          {2: a // b, 3: a % b})


@zm.kernel
def int_div_const(a, q, r, q2, r2):
    i = zm.grid(1)
    if i < a.shape[0]:
        q[i] = a[i] // 7
        r[i] = a[i] % 7
        q2[i] = a[i] // -4
        r2[i] = a[i] % -4


def test_int_div_const():
    n = 129
    a = np.arange(-64, 65, dtype=np.int32)
    z = lambda: np.zeros(n, np.int32)  # noqa: E731
    check(int_div_const, 3, 64, [a, z(), z(), z(), z()],
          {1: a // 7, 2: a % 7, 3: a // -4, 4: a % -4})


@zm.kernel
def float_floordiv_mod(a, b, q, r):
    i = zm.grid(1)
    if i < a.shape[0]:
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]


def test_float_floordiv_mod():
    n = 100
    a = RNG.uniform(-10, 10, n)
    b = RNG.uniform(-3, 3, n)
    b[np.abs(b) < 0.1] = 0.5
    check(float_floordiv_mod, 2, 64, [a, b, np.zeros(n), np.zeros(n)],
          {2: a // b, 3: a % b}, rtol=1e-12, atol=1e-12)


# ---- 4. bit manipulation: popcount, bit reverse, xorshift hash -----------------------------------
@zm.kernel
def bit_tricks(x, pop, rev, hsh):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        c = 0
        w = v
        while w != 0:
            w &= w - 1
            c += 1
        pop[i] = c
        r = zm.u32(0)
        for b in range(32):
            r = (r << 1) | ((v >> b) & 1)
        rev[i] = r
        h = v
        h ^= h << 13
        h ^= h >> 17
        h ^= h << 5
        hsh[i] = h * zm.u32(2654435761)


def _bitrev32(v):
    return int(f"{int(v):032b}"[::-1], 2)


def test_bit_tricks():
    n = 100
    x = RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x[0] = 0
    x[1] = 0xFFFFFFFF
    pop = np.array([bin(int(v)).count("1") for v in x], np.uint32)
    rev = np.array([_bitrev32(v) for v in x], np.uint32)
    h = []
    for v in x:
        v = int(v)
        v ^= (v << 13) & 0xFFFFFFFF
        v ^= v >> 17
        v ^= (v << 5) & 0xFFFFFFFF
        h.append((v * 2654435761) & 0xFFFFFFFF)
    h = np.array(h, np.uint32)
    z = lambda: np.zeros(n, np.uint32)  # noqa: E731
    check(bit_tricks, 2, 64, [x, z(), z(), z()], {1: pop, 2: rev, 3: h})


# ---- 5. PCG / LCG random hashing with uint64 wrap-around -----------------------------------------
@zm.kernel
def lcg_uniform(seed, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        s = zm.u64(seed) + zm.u64(i) * zm.u64(0x9E3779B97F4A7C15)
        for _ in range(3):
            s = s * zm.u64(6364136223846793005) + zm.u64(1442695040888963407)
        out[i] = zm.f64(s >> 11) * (1.0 / 9007199254740992.0)


def test_lcg_uniform():
    n = 70
    M = (1 << 64) - 1
    want = []
    for i in range(n):
        s = (12345 + i * 0x9E3779B97F4A7C15) & M
        for _ in range(3):
            s = (s * 6364136223846793005 + 1442695040888963407) & M
        want.append((s >> 11) * (1.0 / 9007199254740992.0))
    check(lcg_uniform, 2, 64, [12345, np.zeros(n)], {1: np.array(want)})


# ---- 6. shared-memory tree reduction (classic CUDA sample, sum per block + atomic) --------------
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


# ---- 7. warp-shuffle reduction (shfl_down) + shared across warps ---------------------------------
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


# ---- 8. warp inclusive scan with shfl_up, block scan via shared, ballot count --------------------
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


# ---- 9. tiled matrix multiply (numba docs fast_matmul) -------------------------------------------
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


# ---- 10. transpose through a padded shared tile, non-square, 2-D grid ----------------------------
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


# ---- 11. 2-D Jacobi 5-point stencil on strided (non-contiguous) views -------------------------
@zm.kernel
def jacobi_step(u, unew):
    i, j = zm.grid(2)
    n, m = u.shape
    if 0 < i < n - 1 and 0 < j < m - 1:
        unew[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])
    elif i < n and j < m:
        unew[i, j] = u[i, j]


def _jacobi_ref(u):
    out = u.copy()
    out[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return out


def test_jacobi_strided():
    big = RNG.standard_normal((20, 30)).astype(np.float32)
    u = big[::2, 1::3]  # (10, 10), non-contiguous
    outbig = np.zeros((10, 20), np.float32)
    for backend in BACKENDS:
        ob = outbig.copy()
        unew = ob[:, ::2]
        k = jacobi_step if backend == "cpu" else jacobi_step.on("interp")
        k[(2, 2), (8, 8)](u, unew)
        np.testing.assert_allclose(unew, _jacobi_ref(u), rtol=1e-6, err_msg=backend)
        assert np.all(ob[:, 1::2] == 0), backend


def test_jacobi_transposed_view():
    a = RNG.standard_normal((7, 12))
    u = a.T  # F-ordered view
    check(jacobi_step, (2, 1), (8, 8), [u, np.zeros((12, 7))], {1: _jacobi_ref(u)},
          rtol=1e-12)


# ---- 12. negative-step views and reverse loops ---------------------------------------------------
@zm.kernel
def reverse_copy(src, dst):
    i = zm.grid(1)
    if i < src.shape[0]:
        dst[i] = src[i]


@zm.kernel
def suffix_sum_serial(x, out):
    if zm.grid(1) == 0:
        acc = 0
        for i in range(x.shape[0] - 1, -1, -1):
            acc += x[i]
            out[i] = acc


def test_negative_strides():
    a = np.arange(50, dtype=np.int64)
    check(reverse_copy, 1, 64, [a[::-1], np.zeros(50, np.int64)], {1: a[::-1]})
    check(reverse_copy, 1, 64, [a[::-3], np.zeros(17, np.int64)], {1: a[::-3]})
    for backend in BACKENDS:
        dst = np.zeros(50, np.int64)
        (reverse_copy if backend == "cpu" else reverse_copy.on("interp"))[1, 64](a, dst[::-1])
        np.testing.assert_array_equal(dst, a[::-1], err_msg=backend)


@pytest.mark.parametrize("n", [0, 1, 9])
def test_suffix_sum(n):
    x = RNG.integers(-10, 10, n).astype(np.int32)
    check(suffix_sum_serial, 1, 32, [x, np.zeros(n, np.int32)],
          {1: np.cumsum(x[::-1])[::-1].astype(np.int32)})


# ---- 13. device functions: defaults, keywords, tuples, nesting, early returns --------------------
@zm.func
def clamp(v, lo=0.0, hi=1.0):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@zm.func
def polar(x, y):
    r = math.sqrt(x * x + y * y)
    return r, math.atan2(y, x)


@zm.func
def smoothstep(e0, e1, x):
    t = clamp((x - e0) / (e1 - e0))
    return t * t * (3.0 - 2.0 * t)


@zm.func
def sign_and_abs(v):
    if v < 0:
        return -1, -v
    elif v == 0:
        return 0, v
    return 1, v


@zm.kernel
def device_funcs(x, y, r, th, s, c, sg, ab):
    i = zm.grid(1)
    if i < x.shape[0]:
        r[i], th[i] = polar(x[i], y[i])
        s[i] = smoothstep(-0.5, 0.5, x[i])
        c[i] = clamp(y[i], 0.0, 0.25) + clamp(y[i], -0.3)
        g, a = sign_and_abs(y[i])
        sg[i] = g
        ab[i] = a


def test_device_funcs():
    n = 77
    x = RNG.standard_normal(n)
    y = RNG.standard_normal(n)
    y[3] = 0.0
    r = np.hypot(x, y)
    th = np.arctan2(y, x)
    t = np.clip((x + 0.5) / 1.0, 0, 1)
    s = t * t * (3 - 2 * t)
    c = np.clip(y, 0.0, 0.25) + np.clip(y, -0.3, 1.0)
    z = lambda: np.zeros(n)  # noqa: E731
    check(device_funcs, 2, 64, [x, y, z(), z(), z(), z(), np.zeros(n, np.int32), z()],
          {2: r, 3: th, 4: s, 5: c, 6: np.sign(y).astype(np.int32), 7: np.abs(y)},
          rtol=1e-12, atol=1e-14)


# ---- 14. break / continue / early return inside nested loops (collatz, prime sieve-ish) ----------
@zm.func
def collatz_steps(n, limit):
    steps = 0
    while n != 1:
        if steps >= limit:
            return -1
        if n % 2 == 0:
            n //= 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


@zm.func
def is_prime(n):
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True


@zm.kernel
def int_loops(x, steps, prime, firstdiv):
    i = zm.grid(1)
    if i >= x.shape[0]:
        return
    v = x[i]
    steps[i] = collatz_steps(v, 50)
    prime[i] = is_prime(v)
    fd = 0
    for d in range(2, v):
        if d % 2 == 0 and d > 2:
            continue
        if v % d == 0:
            fd = d
            break
    firstdiv[i] = fd


def _collatz(n, limit):
    s = 0
    while n != 1:
        if s >= limit:
            return -1
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        s += 1
    return s


def _firstdiv(v):
    for d in range(2, v):
        if d % 2 == 0 and d > 2:
            continue
        if v % d == 0:
            return d
    return 0


def test_int_loops():
    x = np.arange(1, 101, dtype=np.int64)
    steps = np.array([_collatz(int(v), 50) for v in x], np.int64)
    prime = np.array([all(v % d for d in range(2, int(v ** 0.5) + 1)) and v >= 2 for v in x])
    fd = np.array([_firstdiv(int(v)) for v in x], np.int64)
    check(int_loops, 2, 64, [x, np.zeros(100, np.int64), np.zeros(100, np.bool_),
                             np.zeros(100, np.int64)], {1: steps, 2: prime, 3: fd})


# ---- 15. bitonic sort of one block in shared memory (nested loops with barriers) -----------------
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


# ---- 16. values live across barriers: locals, local arrays, loop-carried, device-func barrier ----
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


# ---- 17. 1-D stencil with halo in shared memory, out-of-range threads kept alive -----------------
RADIUS = 3
ST_BS = 32


@zm.kernel
def stencil_1d(x, out):
    tmp = zm.shared.array(ST_BS + 2 * RADIUS, zm.f32)
    g = zm.grid(1)
    l = zm.threadIdx.x + RADIUS
    n = x.shape[0]
    tmp[l] = x[g] if g < n else 0.0
    if zm.threadIdx.x < RADIUS:
        left = g - RADIUS
        right = g + ST_BS
        tmp[l - RADIUS] = x[left] if left >= 0 else 0.0
        tmp[l + ST_BS] = x[right] if right < n else 0.0
    zm.syncthreads()
    if g < n:
        s = zm.f32(0)
        for off in range(-RADIUS, RADIUS + 1):
            s += tmp[l + off]
        out[g] = s


@pytest.mark.parametrize("n", [1, 40, 64])
def test_stencil_1d(n):
    x = RNG.integers(-4, 5, n).astype(np.float32)
    p = np.pad(x, RADIUS)
    want = sum(p[k:k + n] for k in range(2 * RADIUS + 1)).astype(np.float32)
    check(stencil_1d, cdiv(n, ST_BS), ST_BS, [x, np.zeros(n, np.float32)], {1: want})
