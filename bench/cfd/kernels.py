"""The flux-Jacobian kernels of the CFD benchmark (Zubair et al.'s Table II), each a zymo kernel.

Every kernel takes (Q, edges, normals, off_ij, off_ji, Adiag, Aoff) and, for every edge e = (i, j)
with area A = |normals[e]| and unit normal n, adds B_L = A dF/dQ_i to Adiag[i] and -B_R to
Adiag[j] (float64 atomics) and stores Aoff[off_ij] = B_R, Aoff[off_ji] = -B_L (float32).
Variants differ only in how dF/dQ is obtained and how the blocks reach memory:

  hand_1        the hand-differentiated Jacobian (flux.roe_jacobian_hand), 1 thread per edge
  dn10_1        zm.jacfwd over both states, width-10 duals, 1 thread per edge
  dn5_2         zm.jacfwd over one state, width-5 duals, 2 threads per edge (in two warps)
  dn5_2_prim    as dn5_2, seeding the hand-derived conservative->primitive map (Algorithm 3)
  dn5_2_own     as dn5_2, one code path for both sides (the flux's antisymmetry, see below)
  dn1_10/5/2    scalar tangents (width 1): 10, 5 or 2 threads per edge, 1, 2 or 5 passes each
  dn1_10_runs   dn1_10 over runs of 8 consecutive edges per group of 10 threads, the left
                columns summed in registers while the edges' first node repeats
  hand_10, hand_10_runs  dn1_10 and dn1_10_runs with each column's tangent derived by hand
                (flux.roe_flux_tangent): the same threads, edges and scatter, other derivative code
  *_staged      the blocks staged in shared memory, then written by the whole block: consecutive
                threads write consecutive entries of one block (coalesced stores and atomics)
  *_merged      staged, and the Adiag blocks of one node (the left sides of consecutive edges)
                summed in shared memory before one atomic per entry
  *_rN          the same kernel with a register cap of N (PTX .maxnreg)
  *32, *64, *_bN  blocks of 32, 64 or N threads (the default: 128; 64 for the staged one-thread
                kernels, whose two 5x5 float64 blocks per thread fill shared memory)
"""
from __future__ import annotations

import math

import zymo as zm

from . import flux

BLOCK = 128          # threads per block
SMALL = 64           # threads per block where each thread stages two float64 5x5 blocks
ZERO3 = ((0.0,) * 5,) * 3    # the normal carries no tangent (width 5)


def _named(name, function):
    function.__name__ = function.__qualname__ = name
    return function


@zm.func
def state(Q, node):
    return Q[node, 0], Q[node, 1], Q[node, 2], Q[node, 3], Q[node, 4]


@zm.func
def geometry(normals, e):
    nx, ny, nz = normals[e, 0], normals[e, 1], normals[e, 2]
    area = math.sqrt(nx * nx + ny * ny + nz * nz)
    inv = 1.0 / area
    return area, (nx * inv, ny * inv, nz * inv)


@zm.func
def scatter_block(Adiag, Aoff, node, slot, block, scale):
    """Adiag[node] += scale * block (float64 atomics); Aoff[slot] = -scale * block (float32)."""
    r = 0
    for row in block:            # loops over tuples are unrolled: r and c are constants
        c = 0
        for value in row:
            x = scale * value
            zm.atomic.add(Adiag, (node, r, c), x)
            Aoff[slot, r, c] = zm.f32(-x)
            c += 1
        r += 1


@zm.func
def scatter_column(Adiag, Aoff, node, slot, column, c, scale):
    r = 0
    for value in column:
        x = scale * value
        zm.atomic.add(Adiag, (node, r, c), x)
        Aoff[slot, r, c] = zm.f32(-x)
        r += 1


@zm.func
def sides(edges, off_ij, off_ji, e, side):
    """The node, Aoff slot and sign of side 0 (left, i) or 1 (right, j) of edge e."""
    if side == 0:
        return edges[e, 0], off_ji[e], 1.0
    return edges[e, 1], off_ij[e], -1.0


@zm.func
def unit_if(on, k, c):
    return 1.0 if on and k == c else 0.0


@zm.func
def column_seed(on, c):
    return (unit_if(on, 0, c), unit_if(on, 1, c), unit_if(on, 2, c), unit_if(on, 3, c),
            unit_if(on, 4, c))


@zm.func
def prim_map(q):
    """The primitive state and, as width-5 tangents, d(rho, u, v, w, p)/dQ derived by hand:
    the paper's Algorithm 3 seeds these instead of differentiating the map."""
    w = flux.cons_to_prim(q)
    rho, u, v, ww = w[0], w[1], w[2], w[3]
    r = 1.0 / rho
    g = flux.GM1
    tangents = ((1.0, 0.0, 0.0, 0.0, 0.0),
                (-u * r, r, 0.0, 0.0, 0.0),
                (-v * r, 0.0, r, 0.0, 0.0),
                (-ww * r, 0.0, 0.0, r, 0.0),
                (0.5 * g * (u * u + v * v + ww * ww), -g * u, -g * v, -g * ww, g))
    return w, tangents


# ---- one thread per edge ------------------------------------------------------------------------
JAC_BOTH = zm.jacfwd(flux.roe_flux_cons, argnums=(0, 1), width=10)


@zm.func
def split_rows(J):
    """jacfwd over (ql, qr): J[r] = (row over ql, row over qr) -> (JL, JR)."""
    return ((J[0][0], J[1][0], J[2][0], J[3][0], J[4][0]),
            (J[0][1], J[1][1], J[2][1], J[3][1], J[4][1]))


@zm.func
def edge_blocks_hand(Q, edges, normals, e):
    area, n = geometry(normals, e)
    F, JL, JR = flux.roe_jacobian_hand(state(Q, edges[e, 0]), state(Q, edges[e, 1]), n)
    return area, JL, JR


@zm.func
def edge_blocks_dn10(Q, edges, normals, e):
    area, n = geometry(normals, e)
    JL, JR = split_rows(JAC_BOTH(state(Q, edges[e, 0]), state(Q, edges[e, 1]), n))
    return area, JL, JR


@zm.kernel
def hand_1(Q, edges, normals, off_ij, off_ji, Adiag, Aoff):
    e = zm.grid(1)
    if e < edges.shape[0]:
        area, JL, JR = edge_blocks_hand(Q, edges, normals, e)
        scatter_block(Adiag, Aoff, edges[e, 0], off_ji[e], JL, area)
        scatter_block(Adiag, Aoff, edges[e, 1], off_ij[e], JR, -area)


@zm.kernel
def dn10_1(Q, edges, normals, off_ij, off_ji, Adiag, Aoff):
    e = zm.grid(1)
    if e < edges.shape[0]:
        area, JL, JR = edge_blocks_dn10(Q, edges, normals, e)
        scatter_block(Adiag, Aoff, edges[e, 0], off_ji[e], JL, area)
        scatter_block(Adiag, Aoff, edges[e, 1], off_ij[e], JR, -area)


# ---- two threads per edge, width-5 duals --------------------------------------------------------
# The two sides of an edge go to different warps (threads 0-63 of a block take the left states
# of 64 edges, threads 64-127 the right ones), so every warp runs one side's code without
# divergence and the other side's tangents stay symbolic zeros.
JAC_LEFT = zm.jacfwd(flux.roe_flux_cons, argnums=0, width=5)
JAC_RIGHT = zm.jacfwd(flux.roe_flux_cons, argnums=1, width=5)
ZERO55 = ((0.0,) * 5,) * 5


@zm.func
def edge_and_side():
    half = BLOCK // 2
    return zm.blockIdx.x * half + zm.threadIdx.x % half, zm.threadIdx.x // half


@zm.func
def side_block(Q, edges, normals, e, side):
    area, n = geometry(normals, e)
    ql, qr = state(Q, edges[e, 0]), state(Q, edges[e, 1])
    if side == 0:
        J = JAC_LEFT(ql, qr, n)
    else:
        J = JAC_RIGHT(ql, qr, n)
    return area, J


@zm.func
def side_block_prim(Q, edges, normals, e, side):
    """Algorithm 3 of the paper: the flux in primitive variables, seeded with the hand-derived
    map d(rho, u, v, w, p)/dQ of the differentiated side."""
    area, n = geometry(normals, e)
    wl, tl = prim_map(state(Q, edges[e, 0]))
    wr, tr = prim_map(state(Q, edges[e, 1]))
    if side == 0:
        F, J = zm.jvp(flux.roe_flux, (wl, wr, n), (tl, ZERO55, ZERO3), width=5)
    else:
        F, J = zm.jvp(flux.roe_flux, (wl, wr, n), (ZERO55, tr, ZERO3), width=5)
    return area, J


@zm.kernel
def dn5_2(Q, edges, normals, off_ij, off_ji, Adiag, Aoff):
    e, side = edge_and_side()
    if e < edges.shape[0]:
        area, J = side_block(Q, edges, normals, e, side)
        node, slot, sign = sides(edges, off_ij, off_ji, e, side)
        scatter_block(Adiag, Aoff, node, slot, J, sign * area)


@zm.kernel
def dn5_2_prim(Q, edges, normals, off_ij, off_ji, Adiag, Aoff):
    e, side = edge_and_side()
    if e < edges.shape[0]:
        area, J = side_block_prim(Q, edges, normals, e, side)
        node, slot, sign = sides(edges, off_ij, off_ji, e, side)
        scatter_block(Adiag, Aoff, node, slot, J, sign * area)


# ---- scalar tangents ----------------------------------------------------------------------------
@zm.func
def column(Q, edges, normals, e, side, c):
    area, n = geometry(normals, e)
    ql, qr = state(Q, edges[e, 0]), state(Q, edges[e, 1])
    F, dF = zm.jvp(flux.roe_flux_cons, (ql, qr, n),
                   (column_seed(side == 0, c), column_seed(side == 1, c), (0.0, 0.0, 0.0)))
    return area, dF


@zm.func
def hand_column(Q, edges, normals, e, side, c):
    """column(), with the tangent derived by hand (flux.roe_flux_tangent) instead of zm.jvp."""
    area, n = geometry(normals, e)
    ql, qr = state(Q, edges[e, 0]), state(Q, edges[e, 1])
    return area, flux.roe_flux_tangent(ql, qr, column_seed(side == 0, c),
                                       column_seed(side == 1, c), n)


def ten_threads(name, columns):
    """10 threads per edge, thread s computing column s % 5 of side s // 5 with `columns`."""
    def kernel(Q, edges, normals, off_ij, off_ji, Adiag, Aoff):
        t = zm.grid(1)
        e, s = t // 10, t % 10
        if e < edges.shape[0]:
            side, c = s // 5, s % 5
            area, dF = columns(Q, edges, normals, e, side, c)
            node, slot, sign = sides(edges, off_ij, off_ji, e, side)
            scatter_column(Adiag, Aoff, node, slot, dF, c, sign * area)
    return zm.kernel(_named(name, kernel))


dn1_10 = ten_threads("dn1_10", column)
hand_10 = ten_threads("hand_10", hand_column)


@zm.kernel
def dn1_5(Q, edges, normals, off_ij, off_ji, Adiag, Aoff):
    t = zm.grid(1)
    e, c = t // 5, t % 5
    if e < edges.shape[0]:
        for side in (0, 1):
            area, dF = column(Q, edges, normals, e, side, c)
            node, slot, sign = sides(edges, off_ij, off_ji, e, side)
            scatter_column(Adiag, Aoff, node, slot, dF, c, sign * area)


@zm.kernel
def dn1_2(Q, edges, normals, off_ij, off_ji, Adiag, Aoff):
    t = zm.grid(1)
    e, side = t // 2, t % 2
    if e < edges.shape[0]:
        node, slot, sign = sides(edges, off_ij, off_ji, e, side)
        for c in (0, 1, 2, 3, 4):
            area, dF = column(Q, edges, normals, e, side, c)
            scatter_column(Adiag, Aoff, node, slot, dF, c, sign * area)


# ---- scalar tangents along runs of edges ---------------------------------------------------------
# dn1_10 with the left columns merged in registers: the 10 threads of a group take RUN
# consecutive edges one after the other; edges are sorted by their first node, which repeats ~7
# times, so a left-side thread adds its column to Adiag once per run of equal nodes instead of
# once per edge (~31 float64 atomics per edge instead of 50). Right sides are added per edge.
RUN = 8


@zm.func
def add_column(Adiag, node, c, column):
    r = 0
    for value in column:
        zm.atomic.add(Adiag, (node, r, c), value)
        r += 1


@zm.func
def scaled(column, scale):
    return (scale * column[0], scale * column[1], scale * column[2], scale * column[3],
            scale * column[4])


@zm.func
def summed(a, b):
    return a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4]


def ten_threads_runs(name, columns):
    """ten_threads over runs of RUN edges per group of 10 threads (see above)."""
    def kernel(Q, edges, normals, off_ij, off_ji, Adiag, Aoff):
        t = zm.grid(1)
        group, s = t // 10, t % 10
        side, c = s // 5, s % 5
        start = group * RUN
        held = -1                      # the node whose left column `total` holds
        total = (0.0, 0.0, 0.0, 0.0, 0.0)
        for e in range(start, min(start + RUN, edges.shape[0])):
            area, dF = columns(Q, edges, normals, e, side, c)
            node, slot, sign = sides(edges, off_ij, off_ji, e, side)
            x = scaled(dF, sign * area)
            r = 0
            for value in x:
                Aoff[slot, r, c] = zm.f32(-value)
                r += 1
            if side == 1:
                add_column(Adiag, node, c, x)
            elif node == held:
                total = summed(total, x)
            else:
                if held >= 0:
                    add_column(Adiag, held, c, total)
                held, total = node, x
        if held >= 0:
            add_column(Adiag, held, c, total)
    return zm.kernel(_named(name, kernel))


dn1_10_runs = ten_threads_runs("dn1_10_runs", column)
hand_10_runs = ten_threads_runs("hand_10_runs", hand_column)


# ---- shared-memory staging and coalesced scatter ------------------------------------------------
# A block of threads stages the 5x5 blocks of its edges in shared memory (slot b: block b of the
# CTA, with its Adiag node and Aoff slot), then writes them all: consecutive threads take
# consecutive entries of one block (one 100-byte run of Aoff, 25 neighbouring Adiag atomics).
@zm.func
def stage_block(stage, nodes, slots, b, node, slot, block, scale):
    nodes[b] = node
    slots[b] = slot
    m = 0
    for row in block:
        for value in row:
            stage[b, m] = scale * value
            m += 1


@zm.func
def stage_column(stage, b, column, c, scale):
    r = 0
    for value in column:
        stage[b, r * 5 + c] = scale * value
        r += 1


@zm.func
def clear_stage(nodes):
    for b in range(zm.threadIdx.x, nodes.shape[0], zm.blockDim.x):
        nodes[b] = -1
    zm.syncthreads()


@zm.func
def flush_stage(stage, nodes, slots, Adiag, Aoff):
    zm.syncthreads()
    for index in range(zm.threadIdx.x, nodes.shape[0] * 25, zm.blockDim.x):
        b = index // 25
        m = index % 25
        node = nodes[b]
        if node >= 0:
            x = stage[b, m]
            zm.atomic.add(Adiag, (node, m // 5, m % 5), x)
            Aoff[slots[b], m // 5, m % 5] = zm.f32(-x)


@zm.func
def flush_merged(stage, nodes, slots, Adiag, Aoff):
    """flush_stage, but a run of staged blocks with one node (the left blocks of consecutive
    edges, which share their first node: edges are sorted by it) is summed in shared memory
    first, then added with one atomic per entry: ~29 atomics per edge instead of 50."""
    zm.syncthreads()
    count = nodes.shape[0]
    for index in range(zm.threadIdx.x, count * 25, zm.blockDim.x):
        b = index // 25
        m = index % 25
        node = nodes[b]
        if node >= 0:
            x = stage[b, m]
            Aoff[slots[b], m // 5, m % 5] = zm.f32(-x)
            if b == 0 or nodes[b - 1] != node:      # the run's first block adds the run
                k = b + 1
                while k < count and nodes[k] == node:
                    x += stage[k, m]
                    k += 1
                zm.atomic.add(Adiag, (node, m // 5, m % 5), x)


# The staged kernels, built for a flush: with `merged`, a block's left sides are staged in
# slots 0.. and its right sides after them, so that equal left nodes are neighbours.
def one_thread_staged(name, edge_blocks, merged, block=SMALL):
    flush = flush_merged if merged else flush_stage

    def kernel(Q, edges, normals, off_ij, off_ji, Adiag, Aoff):
        stage = zm.shared.array((2 * block, 25), zm.f64)
        nodes = zm.shared.array(2 * block, zm.i32)
        slots = zm.shared.array(2 * block, zm.i32)
        clear_stage(nodes)
        e = zm.grid(1)
        left = zm.threadIdx.x if merged else 2 * zm.threadIdx.x
        right = block + zm.threadIdx.x if merged else left + 1
        if e < edges.shape[0]:
            area, JL, JR = edge_blocks(Q, edges, normals, e)
            stage_block(stage, nodes, slots, left, edges[e, 0], off_ji[e], JL, area)
            stage_block(stage, nodes, slots, right, edges[e, 1], off_ij[e], JR, -area)
        flush(stage, nodes, slots, Adiag, Aoff)
    return zm.kernel(_named(name, kernel))


# One code path for both sides: a conservative flux is antisymmetric, F(qL, qR, n) =
# -F(qR, qL, -n), so dF/dqR(qL, qR, n) = -dF/dq1(qR, qL, -n), and the thread of side s
# differentiates F(q_s, q_other, +-n) in its first state. Its block enters Adiag[node] with +area
# either way. One path instead of two (JAC_LEFT, JAC_RIGHT) let ptxas fit it in 164 registers
# without spills where the two-path kernel needs 242.
@zm.func
def own_side_block(Q, edges, normals, e, side):
    area, n = geometry(normals, e)
    flip = 1.0 - 2.0 * side
    J = JAC_LEFT(state(Q, edges[e, side]), state(Q, edges[e, 1 - side]),
                 (flip * n[0], flip * n[1], flip * n[2]))
    return area, J


def dn5_2_staged_kernel(name, merged, block=BLOCK, own=False):
    """`own`: each side's thread differentiates in its own state (own_side_block)."""
    flush = flush_merged if merged else flush_stage
    blocks = own_side_block if own else side_block
    half = block // 2

    def kernel(Q, edges, normals, off_ij, off_ji, Adiag, Aoff):
        stage = zm.shared.array((block, 25), zm.f64)
        nodes = zm.shared.array(block, zm.i32)
        slots = zm.shared.array(block, zm.i32)
        clear_stage(nodes)
        # as edge_and_side, for this block size; slot threadIdx.x: the left sides first
        e = zm.blockIdx.x * half + zm.threadIdx.x % half
        side = zm.threadIdx.x // half
        if e < edges.shape[0]:
            area, J = blocks(Q, edges, normals, e, side)
            node, slot, sign = sides(edges, off_ij, off_ji, e, side)
            stage_block(stage, nodes, slots, zm.threadIdx.x, node, slot, J,
                        area if own else sign * area)
        flush(stage, nodes, slots, Adiag, Aoff)
    return zm.kernel(_named(name, kernel))


COLUMNS = 120     # threads per block of dn1_10_staged: 12 edges x 10 columns


@zm.kernel
def dn1_10_staged(Q, edges, normals, off_ij, off_ji, Adiag, Aoff):
    stage = zm.shared.array((COLUMNS // 5, 25), zm.f64)
    nodes = zm.shared.array(COLUMNS // 5, zm.i32)
    slots = zm.shared.array(COLUMNS // 5, zm.i32)
    clear_stage(nodes)
    t = zm.grid(1)
    e, s = t // 10, t % 10
    if e < edges.shape[0]:
        side, c = s // 5, s % 5
        b = zm.threadIdx.x // 5        # the block of (edge, side) within the CTA
        area, dF = column(Q, edges, normals, e, side, c)
        node, slot, sign = sides(edges, off_ij, off_ji, e, side)
        if c == 0:
            nodes[b] = node
            slots[b] = slot
        stage_column(stage, b, dF, c, sign * area)
    flush_stage(stage, nodes, slots, Adiag, Aoff)


hand_1_staged = one_thread_staged("hand_1_staged", edge_blocks_hand, merged=False)
hand_1_merged = one_thread_staged("hand_1_merged", edge_blocks_hand, merged=True)
hand_1_merged32 = one_thread_staged("hand_1_merged32", edge_blocks_hand, merged=True, block=32)
dn10_1_staged = one_thread_staged("dn10_1_staged", edge_blocks_dn10, merged=False)
dn5_2_staged = dn5_2_staged_kernel("dn5_2_staged", merged=False)
dn5_2_merged64 = dn5_2_staged_kernel("dn5_2_merged64", merged=True, block=SMALL)
dn5_2_own64 = dn5_2_staged_kernel("dn5_2_own64", merged=True, block=SMALL, own=True)


# ---- the blocks alone, per edge, as the array frameworks compute them (for the peer rows) -------
@zm.func
def store_block(out, e, block):
    r = 0
    for row in block:
        c = 0
        for value in row:
            out[e, r, c] = value
            c += 1
        r += 1


@zm.kernel
def dn5_2_blocks(Q, edges, normals, JL, JR):
    """dF/dQL and dF/dQR of every edge (unit normals, not scaled by area), nothing else."""
    e, side = edge_and_side()
    if e < edges.shape[0]:
        area, J = side_block(Q, edges, normals, e, side)
        if side == 0:
            store_block(JL, e, J)
        else:
            store_block(JR, e, J)


# name -> (kernel, threads per edge or (threads, edges) per group, threads per block)
VARIANTS = {
    "hand_1": (hand_1, 1, BLOCK),
    "hand_1_staged": (hand_1_staged, 1, SMALL),
    "dn10_1": (dn10_1, 1, BLOCK),
    "dn10_1_staged": (dn10_1_staged, 1, SMALL),
    "dn5_2": (dn5_2, 2, BLOCK),
    "dn5_2_staged": (dn5_2_staged, 2, BLOCK),
    "dn5_2_prim": (dn5_2_prim, 2, BLOCK),
    "dn1_10": (dn1_10, 10, BLOCK),
    "dn1_10_staged": (dn1_10_staged, 10, COLUMNS),
    "dn1_5": (dn1_5, 5, BLOCK),
    "dn1_2": (dn1_2, 2, BLOCK),
    "hand_1_merged": (hand_1_merged, 1, SMALL),
    "dn5_2_merged64": (dn5_2_merged64, 2, SMALL),
    "dn5_2_own64": (dn5_2_own64, 2, SMALL),
    "hand_1_merged32": (hand_1_merged32, 1, 32),
    "dn1_10_b32": (dn1_10, 10, 32),
    "dn1_10_runs": (dn1_10_runs, (10, RUN), 32),
    "hand_10": (hand_10, 10, BLOCK),
    "hand_10_b32": (hand_10, 10, 32),
    "hand_10_runs": (hand_10_runs, (10, RUN), 32),
}

# The same kernels with a register cap (`max_registers`, PTX .maxnreg): more resident warps
# for the 150-255-register variants, at the price of spills.
for _name, _cap in (("hand_1_staged", 128), ("hand_1_staged", 96), ("hand_1_staged", 168),
                    ("dn10_1_staged", 128), ("dn5_2_staged", 128), ("dn5_2_staged", 96),
                    ("dn5_2_staged", 168), ("dn1_10", 96), ("dn1_5", 128),
                    ("hand_1_merged", 168), ("dn5_2_merged64", 168), ("hand_1_merged32", 168)):
    _kernel, _per_edge, _block = VARIANTS[_name]
    VARIANTS[f"{_name}_r{_cap}"] = (zm.kernel(max_registers=_cap)(_kernel.py_func), _per_edge,
                                   _block)


# automatic variant -> the hand-differentiated variant with the same threads per edge, edges per
# thread and scatter (issue 28 item 5: compare derivative code, not decomposition); a register
# cap pairs with the same cap.
HAND_TWIN = {"dn10_1": "hand_1", "dn10_1_staged": "hand_1_staged", "dn1_10": "hand_10",
             "dn1_10_b32": "hand_10_b32", "dn1_10_runs": "hand_10_runs"}
HAND_TWIN.update({f"{auto}_r{cap}": f"{hand}_r{cap}"
                  for auto, hand in list(HAND_TWIN.items())
                  for cap in (96, 128, 168) if f"{auto}_r{cap}" in VARIANTS
                  and f"{hand}_r{cap}" in VARIANTS})


def is_hand(name: str) -> bool:
    return name.startswith("hand")


def launch_config(name: str, edges: int) -> tuple[int, int]:
    """(grid, block) covering `edges` edges with the variant's threads per edge, or with whole
    groups of (threads, edges)."""
    _, per_edge, block = VARIANTS[name]
    threads, per_group = per_edge if isinstance(per_edge, tuple) else (per_edge, 1)
    return -(-(-(-edges // per_group) * threads) // block), block
