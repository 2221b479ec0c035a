"""What XSBench and RSBench share: the 64-bit LCG with skip-ahead, the material sampler and the
materials' nuclide lists (the Hoogenboom-Martin reactor model of both benchmarks).

Each lookup thread starts its own stream of the generator 2 * lookup steps ahead of the common
seed, draws an energy and a material, then sums cross sections over the material's nuclides."""
from __future__ import annotations

import numpy as np

import zymo as zm
from bench.enzyme.harness import keep_seeds, on_device, zeros

LCG_A = 2806196910506780709
LCG_C = 1
MASK63 = (1 << 63) - 1          # the generator is modulo 2**63
INV_2_63 = 1.0 / float(1 << 63)
STARTING_SEED = 1070

# the share of lookups that land in each of the 12 materials (fuel first)
MATERIAL_SHARES = np.array([0.140, 0.052, 0.275, 0.134, 0.154, 0.064, 0.066, 0.055, 0.008,
                            0.015, 0.025, 0.013])
# nuclides per material: the fuel's count depends on the model's size
OTHER_NUCLIDES = [5, 4, 4, 27, 21, 21, 21, 21, 21, 9, 9]


@zm.func
def lcg_skip(seed, n):
    """The generator's state n steps after `seed` (u64 arithmetic wraps; O(log n) steps)."""
    a = zm.u64(LCG_A)
    c = zm.u64(LCG_C)
    a_new = zm.u64(1)
    c_new = zm.u64(0)
    k = zm.u64(n) & zm.u64(MASK63)
    while k > zm.u64(0):
        if k & zm.u64(1):
            a_new = a_new * a
            c_new = c_new * a + c
        c = c * (a + zm.u64(1))
        a = a * a
        k = k >> zm.u64(1)
    return (a_new * seed + c_new) & zm.u64(MASK63)


@zm.func
def lcg_next(seed):
    """(the next state, a double in [0, 1) drawn from it)."""
    s = (zm.u64(LCG_A) * seed + zm.u64(LCG_C)) & zm.u64(MASK63)
    return s, zm.f64(s) * INV_2_63


@zm.func
def pick_material(roll, shares):
    """The material whose cumulative share (from the second material on, fuel last) first
    exceeds `roll`; as both benchmarks do, material 0 takes what is left."""
    dist = zm.local.array(12, zm.f64)    # the original's thread-local probability table
    for m in range(12):
        dist[m] = shares[m]
    running = 0.0
    for m in range(12):
        if m > 0:
            running += dist[m]
        if roll < running:
            return m
    return 0


@zm.func
def sample(i, shares):
    """Lookup `i`'s (energy, material): the first two draws of its stream, 2 * i steps
    ahead of the common seed."""
    seed = lcg_skip(zm.u64(STARTING_SEED), 2 * i)
    seed, energy = lcg_next(seed)
    seed, roll = lcg_next(seed)
    return energy, pick_material(roll, shares)


def materials(n_nuclides: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(nuclides per material [12] i32, nuclide ids [12, max] i32, concentrations [12, max]
    f64): the fuel holds the first nuclides, the other materials a seeded random choice."""
    counts = [min(n_nuclides - 34, 321) if n_nuclides >= 68 else n_nuclides // 2]
    counts += [min(c, n_nuclides) for c in OTHER_NUCLIDES]
    width = max(counts)
    ids = np.zeros((12, width), np.int32)
    concs = np.zeros((12, width), np.float64)
    for m, count in enumerate(counts):
        ids[m, :count] = np.arange(count) if m == 0 else \
            rng.choice(n_nuclides, size=count, replace=False)
        concs[m, :count] = rng.random(count)
    return np.array(counts, np.int32), ids, concs


def lookup_streams(n_lookups: int) -> tuple[np.ndarray, np.ndarray]:
    """(energy, material) of every lookup, drawn on the host exactly as the kernels do: for the
    tests and the CUDA C check."""
    energies = np.empty(n_lookups)
    mats = np.empty(n_lookups, np.int64)
    cumulative = np.concatenate([[0.0], np.cumsum(MATERIAL_SHARES[1:])])
    for i in range(n_lookups):
        seed = _skip_host(STARTING_SEED, 2 * i)
        seed = (LCG_A * seed + LCG_C) & MASK63
        energies[i] = seed * INV_2_63
        seed = (LCG_A * seed + LCG_C) & MASK63
        roll = seed * INV_2_63
        hits = np.nonzero(roll < cumulative)[0]
        mats[i] = hits[0] if len(hits) else 0
    return energies, mats


def _skip_host(seed: int, n: int) -> int:
    a, c, a_new, c_new = LCG_A, LCG_C, 1, 0
    mask = (1 << 64) - 1
    n &= MASK63
    while n > 0:
        if n & 1:
            a_new = (a_new * a) & mask
            c_new = (c_new * a + c) & mask
        c = (c * (a + 1)) & mask
        a = (a * a) & mask
        n >>= 1
    return (a_new * seed + c_new) & MASK63


# the CUDA C of the same scaffolding (our own), shared by both benchmarks' CUDA C primals
CUDA_C = r"""
typedef unsigned long long u64;
#define LCG_A 2806196910506780709ULL
#define MASK63 0x7fffffffffffffffULL
__device__ __forceinline__ u64 lcg_skip(u64 seed, u64 n) {
    u64 a = LCG_A, c = 1ULL, a_new = 1ULL, c_new = 0ULL;
    n &= MASK63;
    while (n > 0ULL) {
        if (n & 1ULL) { a_new *= a; c_new = c_new * a + c; }
        c *= (a + 1ULL); a *= a; n >>= 1;
    }
    return (a_new * seed + c_new) & MASK63;
}
__device__ __forceinline__ double lcg_next(u64 *seed) {
    *seed = (LCG_A * *seed + 1ULL) & MASK63;
    return (double)*seed * (1.0 / 9223372036854775808.0);
}
__device__ __forceinline__ int pick_material(double roll, const double *shares) {
    double running = 0.0;
    for (int m = 0; m < 12; m++) {
        if (m > 0) running += shares[m];
        if (roll < running) return m;
    }
    return 0;
}
"""


def add_outputs(state, device: str, channels: int) -> None:
    """The lookups' outputs on `state` (which has `n_lookups`): `out` (lookups x channels),
    its seed `d_out` (the paper's: channel 0 of every lookup; `seed_host` on the host) and,
    on the GPU, `c_out` for the CUDA C version's results."""
    state.out = zeros(device, (state.n_lookups, channels))
    seed = np.zeros((state.n_lookups, channels))
    seed[:, 0] = 1.0
    state.seed_host = seed
    state.d_out = on_device(seed, device)
    keep_seeds(state, [state.d_out])
    if device == "cuda":
        state.c_out = zeros(device, (state.n_lookups, channels))
