"""Atomic ops in kernels, each checked on the CPU backend and on the interpreter against NumPy:
stream compaction with an atomic ticket, a shared-memory histogram, atomic max/min/exch/cas,
k-means accumulation, a hash table by atomic.cas on uint64 keys, a cloud-in-cell deposit."""
from __future__ import annotations

import math

import numpy as np

import zymo as zm

from reference_check import BACKENDS, cdiv, check, run

RNG = np.random.default_rng(1234)


# ---- stream compaction with atomic ticket + sort of the output --------------------------------
@zm.kernel
def compact_positive(x, out, count):
    i = zm.grid(1)
    if i < x.shape[0] and x[i] > 0:
        slot = zm.atomic.add(count, 0, 1)
        out[slot] = x[i]


def test_compact_positive():
    n = 300
    x = RNG.standard_normal(n).astype(np.float32)
    for backend in BACKENDS:
        out, count = np.zeros(n, np.float32), np.zeros(1, np.int32)
        k = compact_positive if backend == "cpu" else compact_positive.on("interp")
        k[cdiv(n, 64), 64](x, out, count)
        c = int((x > 0).sum())
        assert count[0] == c, backend
        np.testing.assert_array_equal(np.sort(out[:c]), np.sort(x[x > 0]), err_msg=backend)


# ---- image histogram privatized in shared memory (uint8 pixels, 2-D image) --------------------
NBIN = 64


@zm.kernel
def image_hist(img, hist):
    sh = zm.shared.array(NBIN, zm.u32)
    t = zm.threadIdx.y * zm.blockDim.x + zm.threadIdx.x
    nt = zm.blockDim.x * zm.blockDim.y
    for b in range(t, NBIN, nt):
        sh[b] = 0
    zm.syncthreads()
    y, x = zm.grid(2)
    if y < img.shape[0] and x < img.shape[1]:
        zm.atomic.add(sh, img[y, x] >> 2, 1)
    zm.syncthreads()
    for b in range(t, NBIN, nt):
        if sh[b] != 0:
            zm.atomic.add(hist, b, sh[b])


def test_image_hist():
    img = RNG.integers(0, 256, (21, 30)).astype(np.uint8)
    want = np.bincount(img.ravel() >> 2, minlength=NBIN).astype(np.uint32)
    check(image_hist, (3, 4), (8, 8), [img, np.zeros(NBIN, np.uint32)], {1: want})


# ---- atomic max/min on floats and int64, 2-D atomic index, exch, cas spin-lock-free claim -----
@zm.kernel
def atomic_stats(x, keys, fmax, fmin, imax, grid2, owner):
    i = zm.grid(1)
    if i < x.shape[0]:
        zm.atomic.max(fmax, 0, x[i])
        zm.atomic.min(fmin, 0, x[i])
        zm.atomic.max(imax, keys[i] % 4, zm.i64(keys[i]) * 1000000007)
        zm.atomic.add(grid2, (keys[i] % 3, keys[i] % 5), 1.5)
        zm.atomic.cas(owner, keys[i] % 8, -1, keys[i])


def test_atomic_stats():
    n = 257
    x = RNG.standard_normal(n)
    keys = RNG.integers(0, 1000, n).astype(np.int32)
    imax = np.full(4, np.iinfo(np.int64).min, np.int64)
    want_imax = imax.copy()
    for k in keys:
        want_imax[k % 4] = max(want_imax[k % 4], int(k) * 1000000007)
    g2 = np.zeros((3, 5))
    np.add.at(g2, (keys % 3, keys % 5), 1.5)
    for backend in BACKENDS:
        args = run(atomic_stats, cdiv(n, 64), 64,
                   [x, keys, np.full(1, -np.inf), np.full(1, np.inf), imax, np.zeros((3, 5)),
                    np.full(8, -1, np.int32)], backend)
        assert args[2][0] == x.max() and args[3][0] == x.min(), backend
        np.testing.assert_array_equal(args[4], want_imax, err_msg=backend)
        np.testing.assert_array_equal(args[5], g2, err_msg=backend)
        for slot in range(8):  # the winner of each slot is one of the keys that map there
            cand = keys[keys % 8 == slot]
            assert (args[6][slot] == -1 and cand.size == 0) or args[6][slot] in cand, backend


# ---- k-means assignment step (argmin over clusters) + centroid accumulation with atomics ------
@zm.kernel
def kmeans_assign(points, centroids, labels, sums, counts):
    i = zm.grid(1)
    if i >= points.shape[0]:
        return
    best = -1
    best_d = math.inf
    for c in range(centroids.shape[0]):
        d = 0.0
        for f in range(points.shape[1]):
            diff = points[i, f] - centroids[c, f]
            d += diff * diff
        if d < best_d:
            best_d = d
            best = c
    labels[i] = best
    for f in range(points.shape[1]):
        zm.atomic.add(sums, (best, f), points[i, f])
    zm.atomic.add(counts, best, 1)


def test_kmeans_assign():
    n, k, d = 150, 5, 3
    pts = RNG.integers(-20, 20, (n, d)).astype(np.float64)  # exact sums in any order
    cen = RNG.standard_normal((k, d)) * 10
    dist = ((pts[:, None, :] - cen[None]) ** 2).sum(-1)
    lab = dist.argmin(1).astype(np.int32)
    sums = np.zeros((k, d))
    np.add.at(sums, lab, pts)
    counts = np.bincount(lab, minlength=k).astype(np.int32)
    check(kmeans_assign, cdiv(n, 64), 64,
          [pts, cen, np.zeros(n, np.int32), np.zeros((k, d)), np.zeros(k, np.int32)],
          {2: lab, 3: sums, 4: counts})


# ---- GPU hash table: linear probing with atomic.cas on uint64 keys ----------------------------
@zm.kernel
def hash_insert(table, keys, slots):
    i = zm.grid(1)
    if i < keys.shape[0]:
        k = keys[i]
        slot = k % table.shape[0]
        while True:
            prev = zm.atomic.cas(table, slot, zm.u64(0), k)
            if prev == 0 or prev == k:
                slots[i] = slot
                break
            slot = (slot + 1) % table.shape[0]


def test_hash_insert():
    keys = np.array([2**63 + 5, 7, 15, 2**64 - 1, 23, 7, 31, 1], np.uint64)
    for backend in BACKENDS:
        table, _, slots = run(hash_insert, 1, 8, [np.zeros(8, np.uint64), keys,
                                                 np.zeros(8, np.int64)], backend)
        assert all(table[s] == k for s, k in zip(slots, keys)), backend
        assert sorted(table[table != 0].tolist()) == sorted(set(keys.tolist())), backend


# ---- particle-in-cell: cloud-in-cell deposit with float32 atomics on a 2-D grid ---------------
@zm.kernel
def cic_deposit(px, py, q, rho):
    p = zm.grid(1)
    if p >= px.shape[0]:
        return
    nx, ny = rho.shape
    gx = px[p]
    gy = py[p]
    ix = int(math.floor(gx))
    iy = int(math.floor(gy))
    fx = gx - ix
    fy = gy - iy
    for (ox, wx) in ((0, 1.0 - fx), (1, fx)):
        for (oy, wy) in ((0, 1.0 - fy), (1, fy)):
            zm.atomic.add(rho, ((ix + ox) % nx, (iy + oy) % ny), q[p] * wx * wy)


def test_cic_deposit():
    n = 200
    px = (RNG.integers(0, 64, n) / 8.0).astype(np.float32)  # multiples of 1/8: exact weights
    py = (RNG.integers(0, 48, n) / 8.0).astype(np.float32)
    q = RNG.integers(1, 4, n).astype(np.float32)
    rho = np.zeros((8, 6), np.float32)
    want = np.zeros((8, 6), np.float64)
    for x, y, c in zip(px, py, q):
        ix, iy = int(np.floor(x)), int(np.floor(y))
        fx, fy = x - ix, y - iy
        for ox, wx in ((0, 1 - fx), (1, fx)):
            for oy, wy in ((0, 1 - fy), (1, fy)):
                want[(ix + ox) % 8, (iy + oy) % 6] += c * wx * wy
    check(cic_deposit, cdiv(n, 64), 64, [px, py, q, rho], {3: want}, rtol=1e-6, atol=1e-5)
