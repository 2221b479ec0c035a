"""Per-edge test kernels around the device functions of bench/cfd/flux.py."""
from __future__ import annotations

import zymo as zm
from bench.cfd import flux


@zm.func
def load5(a, e):
    return a[e, 0], a[e, 1], a[e, 2], a[e, 3], a[e, 4]


@zm.func
def store5(a, e, value):
    a[e, 0] = value[0]
    a[e, 1] = value[1]
    a[e, 2] = value[2]
    a[e, 3] = value[3]
    a[e, 4] = value[4]


@zm.func
def store_block(a, e, rows):
    """a[e] = rows, a 5-tuple of 5-tuples (a tuple of tuples takes constant indices only)."""
    for r in range(5):
        a[e, 0, r] = rows[0][r]
        a[e, 1, r] = rows[1][r]
        a[e, 2, r] = rows[2][r]
        a[e, 3, r] = rows[3][r]
        a[e, 4, r] = rows[4][r]


@zm.kernel
def cons_to_prim(q, out):
    e = zm.grid(1)
    if e < out.shape[0]:
        store5(out, e, flux.cons_to_prim(load5(q, e)))


@zm.kernel
def roe_flux(wl, wr, n, out):
    e = zm.grid(1)
    if e < out.shape[0]:
        store5(out, e, flux.roe_flux(load5(wl, e), load5(wr, e), (n[e, 0], n[e, 1], n[e, 2])))


@zm.kernel
def roe_flux_cons(ql, qr, n, out):
    e = zm.grid(1)
    if e < out.shape[0]:
        store5(out, e, flux.roe_flux_cons(load5(ql, e), load5(qr, e),
                                          (n[e, 0], n[e, 1], n[e, 2])))


@zm.kernel
def roe_jacobian_hand(ql, qr, n, out, d_left, d_right):
    e = zm.grid(1)
    if e < out.shape[0]:
        value, left, right = flux.roe_jacobian_hand(load5(ql, e), load5(qr, e),
                                                    (n[e, 0], n[e, 1], n[e, 2]))
        store5(out, e, value)
        store_block(d_left, e, left)
        store_block(d_right, e, right)


@zm.kernel
def roe_flux_tangent(ql, qr, dql, dqr, n, out):
    e = zm.grid(1)
    if e < out.shape[0]:
        store5(out, e, flux.roe_flux_tangent(load5(ql, e), load5(qr, e), load5(dql, e),
                                             load5(dqr, e), (n[e, 0], n[e, 1], n[e, 2])))
