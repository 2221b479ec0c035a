"""Atomics on global memory: add, sub, max, min, exch and cas, with deterministic results."""
from __future__ import annotations

import numpy as np

import zymo as zm

from .case import Case, cdiv, f32, f64, ints, wide

N = 4000
BLOCK = 128
NBINS = 32
NKEYS = 97


# ---- histogram with zm.atomic.add on an int32 array ---------------------------------------------
@zm.kernel
def histogram(x, hist):
    i = zm.grid(1)
    if i < x.shape[0]:
        b = min(int(x[i] * NBINS), NBINS - 1)
        zm.atomic.add(hist, b, 1)


def _hist_args(rng):
    x = f32(rng, N, low=0.0, high=1.0)
    x[:2] = [0.0, 0.99999994]
    return [x, np.zeros(NBINS, np.int32)]


def _hist_ref(args):
    b = np.minimum(np.floor(wide(args[0]) * NBINS).astype(np.int64), NBINS - 1)
    return {1: np.bincount(b, minlength=NBINS).astype(np.int32)}


# ---- global max / min of int32, float32 and uint32 values ---------------------------------------
@zm.kernel
def minmax_atomic(xi, xf, xu, res_i, res_f, res_u):
    i = zm.grid(1)
    if i < xi.shape[0]:
        zm.atomic.max(res_i, 0, xi[i])
        zm.atomic.min(res_i, 1, xi[i])
        zm.atomic.max(res_f, 0, xf[i])
        zm.atomic.min(res_f, 1, xf[i])
        zm.atomic.max(res_u, 0, xu[i])
        zm.atomic.min(res_u, 1, xu[i])


def _minmax_args(rng):
    xu = ints(rng, np.uint32, N)
    xu[:2] = [2**31 + 5, 2**32 - 2]  # above the i32 range: compare as unsigned
    return [ints(rng, np.int32, N), f32(rng, N, low=-1e3, high=1e3), xu,
            np.array([np.iinfo(np.int32).min, np.iinfo(np.int32).max], np.int32),
            np.array([-np.inf, np.inf], np.float32),
            np.array([0, np.iinfo(np.uint32).max], np.uint32)]


def _minmax_ref(args):
    xi, xf, xu = args[:3]
    return {3: np.array([xi.max(), xi.min()], np.int32),
            4: np.array([xf.max(), xf.min()], np.float32),
            5: np.array([xu.max(), xu.min()], np.uint32)}


# ---- exch: count distinct keys ("seen" flags) --------------------------------------------------
@zm.kernel
def count_distinct(keys, seen, count):
    i = zm.grid(1)
    if i < keys.shape[0]:  # noqa: SIM102 (nested on purpose)
        if zm.atomic.exch(seen, keys[i], 1) == 0:
            zm.atomic.add(count, 0, 1)


def _distinct_args(rng):
    return [ints(rng, np.int32, 500, low=0, high=NKEYS), np.zeros(NKEYS, np.int32),
            np.zeros(1, np.int32)]


def _distinct_ref(args):
    present = np.bincount(args[0], minlength=NKEYS) > 0
    return {1: present.astype(np.int32), 2: np.array([present.sum()], np.int32)}


# ---- cas: first writer wins; the single winner per key writes that key's payload ---------------
@zm.kernel
def first_writer_wins(keys, claimed, winners, payload):
    i = zm.grid(1)
    if i < keys.shape[0]:
        k = keys[i]
        old = zm.atomic.cas(claimed, k, 0, 1)
        if old == 0:
            zm.atomic.add(winners, 0, 1)
            payload[k] = k * 3 + 1


def _cas_args(rng):
    return [ints(rng, np.int64, 600, low=0, high=NKEYS), np.zeros(NKEYS, np.int64),
            np.zeros(1, np.int32), np.full(NKEYS, -1, np.int64)]


def _cas_ref(args):
    keys = args[0]
    present = np.bincount(keys, minlength=NKEYS) > 0
    payload = np.where(present, np.arange(NKEYS) * 3 + 1, -1).astype(np.int64)
    return {1: present.astype(np.int64), 2: np.array([present.sum()], np.int32), 3: payload}


# ---- add returning the old value: bounded slot allocation; sub on a 2-D index ---------------
CAPACITY = 1500


@zm.kernel
def ticket_counter(x, counter, accepted, budget):
    i = zm.grid(1)
    if i < x.shape[0]:
        ticket = zm.atomic.add(counter, 0, 1)
        if ticket < CAPACITY:
            zm.atomic.add(accepted, 0, 1)
        r = i % 4
        c = zm.i32(x[i] > 0.0)
        zm.atomic.sub(budget, (r, c), 2)


def _ticket_args(rng):
    return [f32(rng, N), np.zeros(1, np.int32), np.zeros(1, np.int32),
            np.full((4, 2), 10_000, np.int32)]


def _ticket_ref(args):
    x = args[0]
    n = x.size
    budget = np.full((4, 2), 10_000, np.int32)
    np.subtract.at(budget, (np.arange(n) % 4, (x > 0).astype(np.int64)), 2)
    return {1: np.array([n], np.int32), 2: np.array([min(n, CAPACITY)], np.int32), 3: budget}


# ---- 2-D joint histogram with a tuple index ------------------------------------------------
@zm.kernel
def joint_histogram(a, b, h):
    i = zm.grid(1)
    if i < a.shape[0]:
        zm.atomic.add(h, (a[i] >> 5, b[i] >> 5), 1)


def _joint_args(rng):
    return [ints(rng, np.uint8, N), ints(rng, np.uint8, N), np.zeros((8, 8), np.int32)]


def _joint_ref(args):
    h = np.zeros((8, 8), np.int32)
    np.add.at(h, (args[0] >> 5, args[1] >> 5), 1)
    return {2: h}


# ---- float atomics: segment sums (f64, order-dependent rounding) and exact f32 counts --------
@zm.kernel
def segment_sums(seg, x, sums, counts):
    i = zm.grid(1)
    if i < x.shape[0]:
        s = seg[i]
        zm.atomic.add(sums, s, x[i])
        zm.atomic.add(counts, s, 1.0)


def _seg_args(rng):
    return [ints(rng, np.int32, N, low=0, high=10), f64(rng, N), np.zeros(10),
            np.zeros(10, np.float32)]


def _seg_ref(args):
    seg, x = args[0], args[1]
    return {2: np.bincount(seg, weights=x, minlength=10),
            3: np.bincount(seg, minlength=10).astype(np.float64)}


CASES = [
    Case("histogram_atomic", histogram, cdiv(N, BLOCK), BLOCK, _hist_args, _hist_ref,
         features=("atomic", "atomic_add", "cast", "module_constant")),
    Case("minmax_atomic", minmax_atomic, cdiv(N, BLOCK), BLOCK, _minmax_args, _minmax_ref,
         features=("atomic", "atomic_max", "atomic_min", "u32")),
    Case("count_distinct_exch", count_distinct, cdiv(500, BLOCK), BLOCK, _distinct_args,
         _distinct_ref, features=("atomic", "atomic_exch", "atomic_result")),
    Case("first_writer_wins_cas", first_writer_wins, cdiv(600, BLOCK), BLOCK, _cas_args,
         _cas_ref, features=("atomic", "atomic_cas", "atomic_result", "i64")),
    Case("ticket_counter", ticket_counter, cdiv(N, BLOCK), BLOCK, _ticket_args, _ticket_ref,
         features=("atomic", "atomic_result", "atomic_sub", "tuple_index", "cast")),
    Case("joint_histogram", joint_histogram, cdiv(N, BLOCK), BLOCK, _joint_args, _joint_ref,
         features=("atomic", "tuple_index", "u8", "shift")),
    Case("segment_sums", segment_sums, cdiv(N, BLOCK), BLOCK, _seg_args, _seg_ref, rtol=1e-10,
         atol=1e-10, features=("atomic", "float_atomic", "f64")),
]
