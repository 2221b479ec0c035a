"""Scratch CFD variants, registered beside bench/cfd/kernels.py's, then `run` or `probe`:
    python tools/cfd_extra.py run --no-peers --variants hand_1 dn1_10_warp ...
    CFD_PROBE="python3 tools/cfd_extra.py probe" bash tools/ncu_probe.sh cfd dn1_10_warp

dn1_10_warp (left columns merged by shuffles across a warp's 3 edges), dn1_10_noatomic and
dn1_10_nooff (timing only: what the Adiag atomics and Aoff stores cost), hand_1_runs (the hand
Jacobian over runs of 8 edges per thread, left blocks summed in registers, as dn1_10_runs).
Results: bench/results/cfd-h100.md, stop 23.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import zymo as zm  # noqa: E402
from bench.cfd import kernels as K  # noqa: E402

FULL = 0xFFFFFFFF
WARP_EDGES = 3


@zm.func
def merged_column(Adiag, Aoff, node, slot, column, c, scale, k, side, valid):
    previous = zm.shfl_up_sync(FULL, node, 10)
    next1 = zm.shfl_down_sync(FULL, node, 10)
    next2 = zm.shfl_down_sync(FULL, node, 20)
    first = side == 1 or k == 0 or previous != node
    take1 = side == 0 and k + 1 < WARP_EDGES and next1 == node
    take2 = take1 and k + 2 < WARP_EDGES and next2 == node
    r = 0
    for value in column:
        x = scale * value
        x1 = zm.shfl_down_sync(FULL, x, 10)
        x2 = zm.shfl_down_sync(FULL, x, 20)
        if valid:
            Aoff[slot, r, c] = zm.f32(-x)
            if first:
                total = x
                if take1:
                    total += x1
                if take2:
                    total += x2
                zm.atomic.add(Adiag, (node, r, c), total)
        r += 1


@zm.kernel
def dn1_10_warp(Q, edges, normals, off_ij, off_ji, Adiag, Aoff):
    lane = zm.threadIdx.x % 32
    k = lane // 10
    e = (zm.grid(1) // 32) * WARP_EDGES + k
    valid = k < WARP_EDGES and e < edges.shape[0]
    e = e if valid else 0
    side, c = lane % 10 // 5, lane % 5
    area, dF = K.column(Q, edges, normals, e, side, c)
    node, slot, sign = K.sides(edges, off_ij, off_ji, e, side)
    merged_column(Adiag, Aoff, node if valid else -1, slot, dF, c, sign * area, k, side, valid)


def dn1_10_without(name, atomics, off):
    """dn1_10 with plain stores in place of the Adiag atomics (`atomics=False`: wrong sums) or
    without the Aoff stores (`off=False`): timing only."""
    def kernel(Q, edges, normals, off_ij, off_ji, Adiag, Aoff):
        t = zm.grid(1)
        e, s = t // 10, t % 10
        if e < edges.shape[0]:
            side, c = s // 5, s % 5
            area, dF = K.column(Q, edges, normals, e, side, c)
            node, slot, sign = K.sides(edges, off_ij, off_ji, e, side)
            r = 0
            for value in dF:
                x = sign * area * value
                if atomics:
                    zm.atomic.add(Adiag, (node, r, c), x)
                else:
                    Adiag[node, r, c] = x
                if off:
                    Aoff[slot, r, c] = zm.f32(-x)
                r += 1
    return zm.kernel(K._named(name, kernel))


dn1_10_noatomic = dn1_10_without("dn1_10_noatomic", atomics=False, off=True)
dn1_10_nooff = dn1_10_without("dn1_10_nooff", atomics=True, off=False)


@zm.func
def add_block(Adiag, node, block):
    r = 0
    for row in block:
        c = 0
        for value in row:
            zm.atomic.add(Adiag, (node, r, c), value)
            c += 1
        r += 1


@zm.func
def store_off(Aoff, slot, block, scale):
    r = 0
    for row in block:
        c = 0
        for value in row:
            Aoff[slot, r, c] = zm.f32(-scale * value)
            c += 1
        r += 1


@zm.func
def scaled_block(b, s):
    return (K.scaled(b[0], s), K.scaled(b[1], s), K.scaled(b[2], s), K.scaled(b[3], s),
            K.scaled(b[4], s))


@zm.func
def summed_block(a, b):
    return (K.summed(a[0], b[0]), K.summed(a[1], b[1]), K.summed(a[2], b[2]),
            K.summed(a[3], b[3]), K.summed(a[4], b[4]))


@zm.kernel
def hand_1_runs(Q, edges, normals, off_ij, off_ji, Adiag, Aoff):
    """The hand Jacobian over runs of 8 edges per thread, the left blocks summed in registers."""
    start = zm.grid(1) * 8
    held = -1
    total = K.ZERO55
    for e in range(start, min(start + 8, edges.shape[0])):
        area, JL, JR = K.edge_blocks_hand(Q, edges, normals, e)
        left = scaled_block(JL, area)
        store_off(Aoff, off_ji[e], left, 1.0)
        store_off(Aoff, off_ij[e], JR, -area)
        add_block(Adiag, edges[e, 1], scaled_block(JR, -area))
        node = edges[e, 0]
        if node == held:
            total = summed_block(total, left)
        else:
            if held >= 0:
                add_block(Adiag, held, total)
            held, total = node, left
    if held >= 0:
        add_block(Adiag, held, total)


K.VARIANTS["hand_1_runs"] = (hand_1_runs, (1, 8), 32)
K.VARIANTS["hand_1_runs_b64"] = (hand_1_runs, (1, 8), 64)
K.VARIANTS["hand_1_runs_r168"] = (zm.kernel(max_registers=168)(hand_1_runs.py_func),
                                  (1, 8), 32)
K.VARIANTS["dn1_10_warp"] = (dn1_10_warp, (32, WARP_EDGES), 32)
K.VARIANTS["dn1_10_noatomic"] = (dn1_10_noatomic, 10, 32)
K.VARIANTS["dn1_10_nooff"] = (dn1_10_nooff, 10, 32)
if __name__ == "__main__":
    mode = sys.argv.pop(1)
    if mode == "run":
        from bench.cfd import run
        sys.exit(run.main())
    from bench.cfd import probe
    sys.exit(probe.main())
