"""One time step of a SIMCoV-like lung-infection model, the way SIMCoV's early GPU port (the one
GEVO evolved, shared/research/gevo-and-tuners.md section 3) would write it, for the evolutionary
optimizer.

The tissue is an nx x ny grid of epithelial cells. Each point holds, array-of-structs style,
int32 `cells[point, field]` (the cell's status and its three timers, and the T cell on it, if
any: its id, remaining tissue time and binding time) and float32 `fields[point, field]`
(virions and chemokine); point (x, y) is `x * ny + y`. One step, for every point at once:

- Epithelial cells: a healthy cell is infected with probability INFECTIVITY x (its virions)
  and starts incubating; an incubating cell starts expressing when its timer runs out; an
  expressing cell dies when its timer runs out, or turns apoptotic when a T cell binds to it;
  an apoptotic cell dies when its timer runs out. Each new timer is its period plus a jitter
  of -8..7 steps.
- Virions and chemokine: each point keeps 1 - D of its amount and gets D/8 of each of its 8
  neighbours' (off the grid counts as empty: what diffuses off the edge is lost); then decay;
  then production: virions by expressing cells, chemokine by expressing and apoptotic ones
  (capped at 1); amounts below 1e-6 are cut to 0.
- T cells (no new ones arrive: SIMCoV runs circulation and extravasation in other kernels) age
  one step and die when their tissue time runs out. A T cell on an expressing cell binds to it
  and stays BINDING_PERIOD steps. Any other T cell tries to move to a random neighbour; if that
  is off the grid or has less chemokine than its own point, it tries a second random neighbour
  instead (a cheap bias up the gradient).

T-cell moves are gathered, so they have no data race and no order: the kernel reads the state
at t (`cells`, `fields`) and writes t + 1 (`cells_out`, `fields_out`). An empty point takes,
of the neighbours whose T cell chose it, the one with the smallest index; a T cell knows it
left by recomputing its target's choice, since every neighbour's choice is a function of the
state at t and the hash. So T cells are never duplicated or lost, except by dying of age.
SIMCoV's port resolves moves with atomicCAS claims in two kernels instead.

Random numbers are a counter-based hash of (seed, step, point, purpose): the same step gives
the same result on every backend and in the NumPy reference.

Per-step totals: `totals` (float32: virions, chemokine) and `counts` (int32: cells of each
status, then T cells), added to what the arrays hold. Each thread sums its points in registers;
it adds its counts to `counts` with global atomics (exact in any order), and its float sums go
through a shared-memory tree in its block, whose result one thread adds to `totals`. SIMCoV's
`device_reduce_values` adds every point's values with atomics instead, but then the
run-to-run spread of the float totals grows with the number of adds: with one float atomic
per thread (tried first) it was 4e-7 relative on the 100 x 100 fitness input and 8e-7 on the
2500 x 2500 held-out one on an H100, too close to a tolerance of 3 x the first. With one per
block, the hardware orders only BLOCKS adds per total at any grid size.

The launch is SIMCoV's: a grid-stride loop over the points with a fixed 8 blocks x 256 threads.

`reference` computes the step in NumPy with the kernel's float32 operations in the kernel's
order, so the new fields match the CPU backend's to the bit (the CUDA build fuses multiplies
and adds, as NVPTX does by default: within a few float32 roundings there). The float totals
follow the kernel's order down to the block sums, which the reference adds exactly: any order
of adding BLOCKS float32 block sums is within (BLOCKS + 1) x 2^-24 (about 5e-7) relative of
that (REFERENCE_TOTALS_RTOL). Integer outputs match exactly on every backend.
"""
from __future__ import annotations

import math

import numpy as np

import zymo as zm

from .workloads import Workload

BLOCKS, THREADS = 8, 256
launch = (BLOCKS, THREADS)

# epithelial cell status
HEALTHY, INCUBATING, EXPRESSING, APOPTOTIC, DEAD = range(5)
STATUSES = 5

# int32 fields of `cells[point, field]`; TCELL is the T cell's id, -1 for none
EPI, INCUBATION, EXPRESSION, APOPTOSIS, TCELL, TISSUE_TIME, BINDING = range(7)
CELL_FIELDS = 7
# float32 fields of `fields[point, field]` and of `totals`
VIRIONS, CHEMOKINE = range(2)
# `counts`: cells of each status, then T cells
TCELLS = STATUSES
COUNTS = STATUSES + 1

# Model parameters, per step: rates of the order of SIMCoV's per-minute defaults, periods
# shortened from its hundreds of minutes to tens of steps so that a short warm-up reaches
# mid-infection
INFECTIVITY = 0.02           # infection probability per virion on a healthy cell
INCUBATION_PERIOD = 30
EXPRESSING_PERIOD = 60
APOPTOSIS_PERIOD = 20
JITTER = 8                   # new timers are the period + [-JITTER, JITTER)
VIRION_PRODUCTION = 1.0      # per expressing cell
VIRION_DIFFUSION = 0.15
VIRION_DECAY = 0.004
CHEMOKINE_PRODUCTION = 0.05  # per expressing or apoptotic cell
CHEMOKINE_DIFFUSION = 0.3
CHEMOKINE_DECAY = 0.01
MAX_CHEMOKINE = 1.0
MIN_CONCENTRATION = 1e-6     # less is cut to 0 (SIMCoV's min_chemokine; for virions too, which
                             # also keeps the far field out of float32 subnormals, slow on CPUs)
TISSUE_PERIOD = 200          # a T cell's life in the tissue
BINDING_PERIOD = 10

# the update's float32 coefficients, folded here (in double, rounded once to float32 in the
# kernel and in the reference alike)
KEEP_VIRIONS = 1.0 - VIRION_DIFFUSION
SHARE_VIRIONS = VIRION_DIFFUSION / 8
SURVIVE_VIRIONS = 1.0 - VIRION_DECAY
KEEP_CHEMOKINE = 1.0 - CHEMOKINE_DIFFUSION
SHARE_CHEMOKINE = CHEMOKINE_DIFFUSION / 8
SURVIVE_CHEMOKINE = 1.0 - CHEMOKINE_DECAY
UNIT = 1.0 / (1 << 24)       # 24 random bits -> [0, 1), exact in float32

# hash streams, one per purpose of random draws
INFECT = 0x1B873593
MOVE = 0x68E31DA4

# positions of the arguments
CELLS, FIELDS, NX, NY, SEED, STEP, CELLS_OUT, FIELDS_OUT, TOTALS, COUNTS_OUT = range(10)

REFERENCE_TOTALS_RTOL = (BLOCKS + 1) / (1 << 24)   # see the module's docstring
FLOOR = 1e-6                 # `check`: below this, errors of virions/chemokine are absolute


# ---- device code -------------------------------------------------------------------------------
@zm.func
def mix(h):
    """lowbias32 (C. Wellons): a bijective uint32 mixer with full avalanche."""
    h ^= h >> 16
    h *= 0x7FEB352D
    h ^= h >> 15
    h *= 0x846CA68B
    h ^= h >> 16
    return h


@zm.func
def stream(seed, step, purpose):
    """The hash state of one purpose's draws in one step, common to all points."""
    return mix(mix(zm.u32(seed) ^ purpose) ^ zm.u32(step))


@zm.func
def draw(base, point):
    """One point's draw from a stream."""
    return mix(base ^ zm.u32(point))


@zm.func
def neighbour(x, y, d, nx, ny):
    """The point in direction d of (x, y), or -1 off the grid. Directions 0..7 run over (dx, dy)
    in lexicographic order, so their points rise in index."""
    e = d if d < 4 else d + 1          # skip the centre of the 3 x 3 block
    u = x + e // 3 - 1
    v = y + e % 3 - 1
    if u < 0 or u >= nx or v < 0 or v >= ny:
        return -1
    return u * ny + v


@zm.func
def target(fields, q, nx, ny, move):
    """Where the T cell at q tries to go (-1: it stays)."""
    h = draw(move, q)
    x = q // ny
    y = q % ny
    r = neighbour(x, y, zm.i32(h >> 29), nx, ny)
    if r < 0 or fields[r, CHEMOKINE] < fields[q, CHEMOKINE]:
        r = neighbour(x, y, zm.i32((h >> 26) & 7), nx, ny)
    return r


@zm.func
def wanders(cells, q):
    """Whether q holds a T cell that tries to move: it outlives this step, is not bound, and
    does not bind here now."""
    return (cells[q, TCELL] >= 0 and cells[q, TISSUE_TIME] > 1 and cells[q, BINDING] == 0
            and cells[q, EPI] != EXPRESSING)


@zm.func
def arrival(cells, fields, r, nx, ny, move):
    """The point whose T cell moves into r: the smallest of r's neighbours whose T cell chose
    r, if r is empty; else -1."""
    if cells[r, TCELL] >= 0:
        return -1
    x = r // ny
    y = r % ny
    for d in range(8):
        q = neighbour(x, y, d, nx, ny)
        if q >= 0 and wanders(cells, q) and target(fields, q, nx, ny, move) == r:
            return q
    return -1


@zm.func
def next_tcell(cells, fields, p, nx, ny, move):
    """(id, tissue time, binding time, binds) of the T cell on p at t + 1: this one, unless it
    dies or leaves, or one moving in (id -1: none). `binds`: it binds to p's cell now."""
    tcell = cells[p, TCELL]
    tissue = cells[p, TISSUE_TIME] - 1
    binding = cells[p, BINDING]
    binds = False
    if tcell >= 0:
        if tissue <= 0:
            tcell = -1
        elif binding > 0:
            binding -= 1
        elif cells[p, EPI] == EXPRESSING:
            binds = True
            binding = BINDING_PERIOD
        else:
            r = target(fields, p, nx, ny, move)
            if r >= 0 and arrival(cells, fields, r, nx, ny, move) == p:
                tcell = -1
    else:
        q = arrival(cells, fields, p, nx, ny, move)
        if q >= 0:
            tcell = cells[q, TCELL]
            tissue = cells[q, TISSUE_TIME] - 1
            binding = 0
    if tcell < 0:
        tissue = 0
        binding = 0
    return tcell, tissue, binding, binds


@zm.func
def next_epicell(cells, p, virions, binds, h):
    """(status, incubation, expression, apoptosis) of p's epithelial cell at t + 1; `h` is its
    draw of this step."""
    epi = cells[p, EPI]
    status = epi
    incubation = cells[p, INCUBATION]
    expression = cells[p, EXPRESSION]
    apoptosis = cells[p, APOPTOSIS]
    jitter = zm.i32(h & (2 * JITTER - 1)) - JITTER
    if epi == HEALTHY:
        if zm.f32(h >> 8) * UNIT < INFECTIVITY * virions:
            status = INCUBATING
            incubation = INCUBATION_PERIOD + jitter
    elif epi == INCUBATING:
        incubation -= 1
        if incubation <= 0:
            status = EXPRESSING
            expression = EXPRESSING_PERIOD + jitter
    elif epi == EXPRESSING:
        if binds:
            status = APOPTOTIC
            apoptosis = APOPTOSIS_PERIOD + jitter
        else:
            expression -= 1
            if expression <= 0:
                status = DEAD
    elif epi == APOPTOTIC:
        apoptosis -= 1
        if apoptosis <= 0:
            status = DEAD
    return status, incubation, expression, apoptosis


@zm.func
def next_fields(fields, p, epi, nx, ny):
    """(virions, chemokine) on p at t + 1: diffusion, decay, production, cut-offs."""
    near_v = 0.0
    near_c = 0.0
    x = p // ny
    y = p % ny
    for d in range(8):
        q = neighbour(x, y, d, nx, ny)
        if q >= 0:
            near_v += fields[q, VIRIONS]
            near_c += fields[q, CHEMOKINE]
    v = (KEEP_VIRIONS * fields[p, VIRIONS] + SHARE_VIRIONS * near_v) * SURVIVE_VIRIONS
    c = (KEEP_CHEMOKINE * fields[p, CHEMOKINE] + SHARE_CHEMOKINE * near_c) * SURVIVE_CHEMOKINE
    if epi == EXPRESSING:
        v += VIRION_PRODUCTION
    if epi == EXPRESSING or epi == APOPTOTIC:
        c += CHEMOKINE_PRODUCTION
    c = min(c, MAX_CHEMOKINE)
    v = v if v >= MIN_CONCENTRATION else 0.0
    c = c if c >= MIN_CONCENTRATION else 0.0
    return v, c


@zm.func
def add_block_totals(totals, virions, chemokine):
    """The threads' float sums through the block's shared-memory tree, then one atomic per
    total and block, so that only BLOCKS adds per total are ordered by the hardware."""
    block_v = zm.shared.array(THREADS, zm.f32)
    block_c = zm.shared.array(THREADS, zm.f32)
    t = zm.threadIdx.x
    block_v[t] = virions
    block_c[t] = chemokine
    zm.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if t < stride:
            block_v[t] += block_v[t + stride]
            block_c[t] += block_c[t + stride]
        zm.syncthreads()
        stride //= 2
    if t == 0:
        zm.atomic.add(totals, VIRIONS, block_v[0])
        zm.atomic.add(totals, CHEMOKINE, block_c[0])


@zm.kernel
def simcov_step(cells, fields, nx, ny, seed, step, cells_out, fields_out, totals, counts):
    infect = stream(seed, step, INFECT)
    move = stream(seed, step, MOVE)
    # this thread's share of the totals, added to them once at the end
    tally = zm.local.array(COUNTS, zm.i32)
    for k in range(COUNTS):
        tally[k] = 0
    virions = 0.0
    chemokine = 0.0
    for p in range(zm.grid(1), nx * ny, zm.gridsize(1)):
        tcell, tissue, binding, binds = next_tcell(cells, fields, p, nx, ny, move)
        status, incubation, expression, apoptosis = next_epicell(
            cells, p, fields[p, VIRIONS], binds, draw(infect, p))
        v, c = next_fields(fields, p, cells[p, EPI], nx, ny)
        cells_out[p, EPI] = status
        cells_out[p, INCUBATION] = incubation
        cells_out[p, EXPRESSION] = expression
        cells_out[p, APOPTOSIS] = apoptosis
        cells_out[p, TCELL] = tcell
        cells_out[p, TISSUE_TIME] = tissue
        cells_out[p, BINDING] = binding
        fields_out[p, VIRIONS] = v
        fields_out[p, CHEMOKINE] = c
        tally[status] += 1
        if tcell >= 0:
            tally[TCELLS] += 1
        virions += v
        chemokine += c
    for k in range(COUNTS):
        zm.atomic.add(counts, k, tally[k])
    add_block_totals(totals, virions, chemokine)


# ---- reference ---------------------------------------------------------------------------------
OFFSETS = [(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1) if (dx, dy) != (0, 0)]
F32 = np.float32


def mix_np(h: np.ndarray) -> np.ndarray:
    """`mix` on a uint32 array."""
    h = h ^ (h >> 16)
    h = h * np.uint32(0x7FEB352D)
    h = h ^ (h >> 15)
    h = h * np.uint32(0x846CA68B)
    return h ^ (h >> 16)


def draws(seed: int, step: int, purpose: int, n: int) -> np.ndarray:
    """The hash of every point 0..n-1 for one purpose in one step (uint32)."""
    base = mix_np(mix_np(np.array([seed & 0xFFFFFFFF], np.uint32) ^ np.uint32(purpose))
                  ^ np.uint32(step & 0xFFFFFFFF))
    return mix_np(base ^ np.arange(n, dtype=np.uint32))


def neighbours(nx: int, ny: int) -> np.ndarray:
    """(8, points): the point in each direction, -1 off the grid."""
    x, y = np.divmod(np.arange(nx * ny), ny)
    table = np.empty((8, nx * ny), np.int64)
    for d, (dx, dy) in enumerate(OFFSETS):
        u, v = x + dx, y + dy
        table[d] = np.where((u >= 0) & (u < nx) & (v >= 0) & (v < ny), u * ny + v, -1)
    return table


def targets(cells, fields, table, seed, step):
    """(target, wanders): where each point's T cell tries to go (-1: nowhere), and whether it
    tries (a T cell that outlives this step, is not bound and does not bind now)."""
    points = np.arange(len(cells))
    h = draws(seed, step, MOVE, len(cells))
    chem = fields[:, CHEMOKINE]
    first = table[h >> 29, points]
    second = table[(h >> 26) & 7, points]
    target = np.where((first < 0) | (chem[first] < chem), second, first)
    wanders = ((cells[:, TCELL] >= 0) & (cells[:, TISSUE_TIME] > 1) & (cells[:, BINDING] == 0)
               & (cells[:, EPI] != EXPRESSING) & (target >= 0))
    return target, wanders


def _moves(cells, fields, table, seed, step):
    """(arrival, leaves): the point whose T cell moves into each point (-1: none), and whether
    each point's T cell moves out."""
    target, wanders = targets(cells, fields, table, seed, step)
    points = np.arange(len(cells))
    arrival = np.full(len(cells), -1)
    for q in table[::-1]:      # the smallest neighbour last, so it wins
        chose = (q >= 0) & wanders[q] & (target[q] == points)
        arrival = np.where(chose, q, arrival)
    arrival[cells[:, TCELL] >= 0] = -1
    leaves = wanders & (arrival[target] == points)
    return arrival, leaves


def _tcells(cells, arrival, leaves):
    """(tcell, tissue time, binding, binds) at t + 1."""
    tcell = cells[:, TCELL]
    tissue = cells[:, TISSUE_TIME] - 1
    binding = cells[:, BINDING]
    alive = (tcell >= 0) & (tissue > 0)
    bound = alive & (binding > 0)
    binds = alive & (binding == 0) & (cells[:, EPI] == EXPRESSING)
    stays = alive & ~leaves
    comes = arrival >= 0
    source = np.maximum(arrival, 0)
    new_tcell = np.where(stays, tcell, np.where(comes, tcell[source], -1))
    new_tissue = np.where(stays, tissue, np.where(comes, tissue[source], 0))
    new_binding = np.where(bound, binding - 1, np.where(binds, BINDING_PERIOD, 0))
    return new_tcell, new_tissue, new_binding, binds


def _epicells(cells, virions, binds, seed, step):
    """(status, incubation, expression, apoptosis) at t + 1."""
    epi = cells[:, EPI]
    h = draws(seed, step, INFECT, len(cells))
    jitter = (h & np.uint32(2 * JITTER - 1)).astype(np.int32) - JITTER
    incubation = cells[:, INCUBATION] - (epi == INCUBATING)
    expression = cells[:, EXPRESSION] - ((epi == EXPRESSING) & ~binds)
    apoptosis = cells[:, APOPTOSIS] - (epi == APOPTOTIC)
    infected = (epi == HEALTHY) & ((h >> 8).astype(F32) * F32(UNIT) < F32(INFECTIVITY) * virions)
    expressing = (epi == INCUBATING) & (incubation <= 0)
    apoptotic = (epi == EXPRESSING) & binds
    died = (((epi == EXPRESSING) & ~binds & (expression <= 0))
            | ((epi == APOPTOTIC) & (apoptosis <= 0)))
    status = epi.copy()
    status[infected] = INCUBATING
    status[expressing] = EXPRESSING
    status[apoptotic] = APOPTOTIC
    status[died] = DEAD
    incubation = np.where(infected, INCUBATION_PERIOD + jitter, incubation)
    expression = np.where(expressing, EXPRESSING_PERIOD + jitter, expression)
    apoptosis = np.where(apoptotic, APOPTOSIS_PERIOD + jitter, apoptosis)
    return status, incubation, expression, apoptosis


def _fields(fields, epi, table):
    """(virions, chemokine) at t + 1, each float32 operation in the kernel's order."""
    v, c = fields[:, VIRIONS], fields[:, CHEMOKINE]
    near_v = np.zeros_like(v)
    near_c = np.zeros_like(c)
    for q in table:
        near_v = near_v + np.where(q >= 0, v[q], F32(0))
        near_c = near_c + np.where(q >= 0, c[q], F32(0))
    new_v = (F32(KEEP_VIRIONS) * v + F32(SHARE_VIRIONS) * near_v) * F32(SURVIVE_VIRIONS)
    new_c = (F32(KEEP_CHEMOKINE) * c + F32(SHARE_CHEMOKINE) * near_c) * F32(SURVIVE_CHEMOKINE)
    new_v = new_v + np.where(epi == EXPRESSING, F32(VIRION_PRODUCTION), F32(0))
    new_c = new_c + np.where((epi == EXPRESSING) | (epi == APOPTOTIC), F32(CHEMOKINE_PRODUCTION),
                             F32(0))
    new_c = np.minimum(new_c, F32(MAX_CHEMOKINE))
    return tuple(np.where(a >= F32(MIN_CONCENTRATION), a, F32(0)) for a in (new_v, new_c))


def _block_sums(values: np.ndarray) -> np.ndarray:
    """Each block's float32 sum of `values` by the kernel's order: each thread sums its points
    in grid-stride order, then the block halves its threads' sums until one is left."""
    threads = BLOCKS * THREADS
    padded = np.zeros(-(-len(values) // threads) * threads, F32)
    padded[:len(values)] = values
    sums = np.zeros(threads, F32)
    for row in padded.reshape(-1, threads):
        sums = sums + row
    sums = sums.reshape(BLOCKS, THREADS)
    stride = THREADS // 2
    while stride > 0:
        sums[:, :stride] = sums[:, :stride] + sums[:, stride:2 * stride]
        stride //= 2
    return sums[:, 0]


def reference(args) -> list:
    """The arguments after one step, in NumPy."""
    cells, fields, nx, ny, seed, step = args[:6]
    table = neighbours(nx, ny)
    arrival, leaves = _moves(cells, fields, table, seed, step)
    tcell, tissue, binding, binds = _tcells(cells, arrival, leaves)
    status, incubation, expression, apoptosis = _epicells(cells, fields[:, VIRIONS], binds,
                                                          seed, step)
    virions, chemokine = _fields(fields, cells[:, EPI], table)
    cells_out = np.stack([status, incubation, expression, apoptosis, tcell, tissue, binding],
                         axis=1).astype(np.int32)
    fields_out = np.stack([virions, chemokine], axis=1)
    sums = [_block_sums(virions).sum(dtype=np.float64),
            _block_sums(chemokine).sum(dtype=np.float64)]
    totals = (args[TOTALS].astype(np.float64) + sums).astype(F32)
    tally = np.append(np.bincount(status, minlength=STATUSES), np.count_nonzero(tcell >= 0))
    counts = (args[COUNTS_OUT] + tally).astype(np.int32)
    return [cells.copy(), fields.copy(), nx, ny, seed, step, cells_out, fields_out, totals,
            counts]


# ---- states ------------------------------------------------------------------------------------
WARMUP = 60
FOCUS_AREA = 2000       # points per infection focus
TCELL_DENSITY = 0.02    # T cells per point


def _seeded(nx: int, ny: int, rng: np.random.Generator, tcell_density: float):
    """(cells, fields) at the start of an infection: foci of expressing cells ringed by
    incubating ones in a cloud of virions, and T cells scattered with random tissue times."""
    n = nx * ny
    cells = np.zeros((n, CELL_FIELDS), np.int32)
    cells[:, TCELL] = -1
    fields = np.zeros((n, 2), F32)
    x, y = np.divmod(np.arange(n), ny)
    for _ in range(max(1, n // FOCUS_AREA)):
        cx, cy, radius = rng.integers(nx), rng.integers(ny), rng.integers(1, 4)
        d2 = (x - cx) ** 2 + (y - cy) ** 2
        inner = d2 <= radius ** 2
        ring = ~inner & (d2 <= (radius + 2) ** 2) & (cells[:, EPI] == HEALTHY)
        cells[inner, EPI] = EXPRESSING
        cells[inner, EXPRESSION] = rng.integers(1, EXPRESSING_PERIOD, inner.sum())
        cells[ring, EPI] = INCUBATING
        cells[ring, INCUBATION] = rng.integers(1, INCUBATION_PERIOD, ring.sum())
        fields[:, VIRIONS] += (5 * np.exp(-d2 / (2.0 * (radius + 2) ** 2))).astype(F32)
    where = rng.choice(n, int(round(tcell_density * n)), replace=False)
    cells[where, TCELL] = np.arange(len(where))
    cells[where, TISSUE_TIME] = rng.integers(1, TISSUE_PERIOD + 1, len(where))
    return cells, fields


def step_args(cells, fields, nx: int, ny: int, seed: int, step: int) -> list:
    """Launch arguments for one step from (cells, fields), outputs and totals zeroed."""
    return [cells, fields, nx, ny, seed, step, np.zeros_like(cells), np.zeros_like(fields),
            np.zeros(2, F32), np.zeros(COUNTS, np.int32)]


def make_state(nx: int, ny: int, rng: np.random.Generator, warmup_steps: int = WARMUP,
               tcell_density: float = TCELL_DENSITY) -> list:
    """Launch arguments for a step in mid-infection: a seeded infection run `warmup_steps`
    steps by the reference, then a fresh seed."""
    cells, fields = _seeded(nx, ny, rng, tcell_density)
    seed = int(rng.integers(1 << 31))
    for step in range(warmup_steps):
        out = reference(step_args(cells, fields, nx, ny, seed, step))
        cells, fields = out[CELLS_OUT], out[FIELDS_OUT]
    return step_args(cells, fields, nx, ny, int(rng.integers(1 << 31)), warmup_steps)


def _symmetric(args: list, rng: np.random.Generator) -> list:
    """`args` with the grid under a random symmetry of the square (flips and a transpose; the
    transpose only on a square grid), T cells and fields moving with their points."""
    cells, fields, nx, ny = args[:4]
    grids = [a.reshape(nx, ny, -1) for a in (cells, fields)]
    for axis in (0, 1):
        if rng.integers(2):
            grids = [np.flip(g, axis) for g in grids]
    if nx == ny and rng.integers(2):
        grids = [g.transpose(1, 0, 2) for g in grids]
    cells, fields = (np.array(g).reshape(nx * ny, -1) for g in grids)
    return step_args(cells, fields, nx, ny, *args[4:6])


# ---- workload interface ------------------------------------------------------------------------
SIZE = 100            # the fitness grid, GEVO's SIMCoV profile
POOL = 4              # warmed-up fitness states per process
HOLDOUT = 2500
TILE = 250            # the held-out grid is tiled from warmed-up states of this size
TILES = 4
_cache: dict = {}


def inputs(rng: np.random.Generator) -> list:
    """A 100 x 100 state for one fitness evaluation: one of POOL warmed-up states (built once
    per process, a warm-up costs ~0.1 s) under a random symmetry, with a fresh seed and step,
    so every draw of the step is new."""
    if "pool" not in _cache:
        _cache["pool"] = [make_state(SIZE, SIZE, np.random.default_rng([k, 2020]))
                          for k in range(POOL)]
    args = _symmetric(_cache["pool"][rng.integers(POOL)], rng)
    args[SEED] = int(rng.integers(1 << 31))
    args[STEP] = int(rng.integers(WARMUP, 10 * WARMUP))
    return args


def _joined(rows: list, k: int) -> np.ndarray:
    """Argument k of rows of TILE x TILE states, joined into one HOLDOUT x HOLDOUT array."""
    grid = np.concatenate([np.concatenate([a[k].reshape(TILE, TILE, -1) for a in row], axis=1)
                           for row in rows])
    return grid.reshape(HOLDOUT * HOLDOUT, -1)


def _tiled(rng: np.random.Generator) -> list:
    """A HOLDOUT x HOLDOUT state tiled from TILES warmed-up TILE x TILE states, each tile under
    a random symmetry, T cells renumbered. A warm-up at full size would take minutes (the
    reference takes ~5 s per step there); the tile edges are seams the model never made, but
    every point is a legal state."""
    tiles = [make_state(TILE, TILE, rng) for _ in range(TILES)]
    per_side = HOLDOUT // TILE
    rows = [[_symmetric(tiles[rng.integers(TILES)], rng) for _ in range(per_side)]
            for _ in range(per_side)]
    cells, fields = _joined(rows, CELLS), _joined(rows, FIELDS)
    present = cells[:, TCELL] >= 0
    cells[present, TCELL] = np.arange(np.count_nonzero(present))
    return step_args(cells, fields, HOLDOUT, HOLDOUT, int(rng.integers(1 << 31)), WARMUP)


def holdout(rng: np.random.Generator | None = None) -> list:
    """The held-out 2500 x 2500 state, from a fixed seed (built once per process; `rng` is
    unused), the same for every check. Copies: a caller may write into them."""
    if "holdout" not in _cache:
        _cache["holdout"] = _tiled(np.random.default_rng(2500))
    return [a.copy() if isinstance(a, np.ndarray) else a for a in _cache["holdout"]]


def small_inputs(rng: np.random.Generator) -> list:
    """A 12 x 16 state crowded with T cells (moves compete for points), for the reference
    interpreter's race check: it runs the whole 8 x 256 launch, most threads without a point."""
    return make_state(12, 16, rng, warmup_steps=20, tcell_density=0.3)


def check(expected: list, got: list) -> float:
    """The largest relative error of the float outputs (fields and totals; below FLOOR, the
    absolute error), inf if an integer output differs or a float one is not finite."""
    for k in (CELLS_OUT, COUNTS_OUT):
        if not np.array_equal(expected[k], got[k]):
            return math.inf
    error = 0.0
    for k in (FIELDS_OUT, TOTALS):
        want = np.asarray(expected[k], np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(np.asarray(got[k], np.float64) - want) / np.maximum(np.abs(want), FLOOR)
        if not np.isfinite(diff).all():
            return math.inf
        error = max(error, float(diff.max(initial=0.0)))
    return error


RUNS = 10
MARGIN = 3.0
MIN_TOLERANCE = 1e-6      # a few float32 roundings
_tolerances: dict = {}


def tolerance(backend: str) -> float:
    """MARGIN times the largest error between RUNS runs of the original on one input on
    `backend` (the order of the float atomic adds varies from run to run), at least
    MIN_TOLERANCE; measured once per process and backend. The interpreter is measured on the
    small inputs it checks."""
    return measured_tolerance(simcov_step, backend, inputs, small_inputs)


def measured_tolerance(kernel, backend: str, make_inputs, make_small_inputs) -> float:
    """`tolerance` for any kernel of this step and its inputs (simcov_gevo's too)."""
    key = (kernel.__name__, backend)
    if key not in _tolerances:
        from zymo.runtime.evolution.worker import run
        make = make_small_inputs if backend == "interp" else make_inputs
        args = make(np.random.default_rng(17))
        on = kernel.on(backend)
        runs = [run(on, launch, args, backend) for _ in range(RUNS)]
        spread = max(check(runs[0], other) for other in runs[1:])
        if not math.isfinite(spread):
            raise RuntimeError(f"{key[0]}'s integer outputs differ between runs on {backend}")
        _tolerances[key] = max(MARGIN * spread, MIN_TOLERANCE)
    return _tolerances[key]


WORKLOADS = {
    "simcov": Workload(
        kernel=simcov_step, launch=launch, inputs=inputs, holdout=holdout, check=check,
        tolerance=tolerance, race_check=small_inputs,
        describe="SIMCoV-like lung infection, one step on a 100 x 100 grid (held out: "
                 "2500 x 2500), 8 x 256 grid-stride launch: T-cell moves gathered from "
                 "double buffers, virion and chemokine diffusion, epithelial cell states, "
                 "totals by atomics"),
}
