"""LULESH 2.0's material update (EvalEOSForElems on the GPU), the kernel the Enzyme paper
differentiates: per element of a region's list, clamp the new relative volume, evaluate the
energy/pressure/artificial-viscosity predictor-corrector (CalcEnergyForElems with its three
CalcPressureForElems), the sound speed, and update the volume.

Written from the algorithm's description (LULESH 2.0 report, LLNL-TR-641973, section on the
equation of state), not from the CUDA source. One thread per position of the concatenated region
lists: `zidx = reg_elem[i]` is the element (indirection through a permutation), the region is
found by a linear scan of the region ends (early return), and the EOS is evaluated `reps[region]`
times (1, 2 or 20, read from memory: a data-dependent trip count whose iterations each restart
from the loaded state, as LULESH's cost model does). e, p, q are updated in place; float64.

Gradient: d(<w_e, e_out> + <w_p, p_out> + <w_q, q_out> + <w_ss, ss>) with respect to the element
state e, p, q, qq, ql, delv (the paper's build differentiates e only; the full state is the
stronger test). The inputs are a seeded Sedov-like state: s^3 elements, 11 regions whose element
runs are drawn as LULESH's CreateRegionIndexSets draws them (cost 1, balance 1: regions 0-4 rep
1, 5-9 rep 2, region 10 rep 20).
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

import zymo as zm

from .case import GATE, PAPER, QUICK, Case
from .harness import (as_derivative, backend_of, gate_from_report, gradient_of, keep_seeds,
                      launched_specializations, launched_tape_bytes, on_device, primal_and_cuda_c,
                      reseed)

BLOCK = 128
REGIONS = 11
SIDE = {GATE: 6, QUICK: 30, PAPER: 90}

# the EOS constants of LULESH's Sedov problem
PMIN, P_CUT, E_CUT, Q_CUT, V_CUT = 0.0, 1e-7, 1e-7, 1e-7, 1e-10
EMIN, RHO0, EOSVMIN, EOSVMAX = -1e15, 1.0, 1e-9, 1e9
SS_FLOOR = 0.3333333e-18      # the sound speed a non-positive square gives
SS_THRESHOLD = 1.111111e-36   # below it the square of the sound speed counts as zero


@zm.func
def pressure(e, compression, vnewc, pmin, p_cut, eosvmax):
    """CalcPressureForElems for one element: (bvc, pbvc, p)."""
    bvc = (2.0 / 3.0) * (compression + 1.0)
    pbvc = 2.0 / 3.0
    p = bvc * e
    if math.fabs(p) < p_cut:
        p = 0.0
    if vnewc >= eosvmax:
        p = 0.0
    if p < pmin:
        p = pmin
    return bvc, pbvc, p


@zm.func
def viscosity_speed(pbvc, e, vv, bvc, p, rho0):
    """The square root of the sound speed's square (pbvc e + v^2 bvc p) / rho0, with LULESH's
    floor for a non-positive square."""
    ssc = (pbvc * e + vv * bvc * p) / rho0
    if ssc <= SS_THRESHOLD:
        ssc = SS_FLOOR
    else:
        ssc = math.sqrt(ssc)
    return ssc


@zm.func
def energy(p_old, e_old, q_old, compression, comp_half, vnewc, work, delvc, qq_old, ql_old,
           pmin, p_cut, e_cut, q_cut, emin, rho0, eosvmax):
    """CalcEnergyForElems for one element: a half-step predictor, a full-step corrector with
    a viscosity estimate, then the final pressure and viscosity. (p, e, q, bvc, pbvc)."""
    e_new = e_old - 0.5 * delvc * (p_old + q_old) + 0.5 * work
    if e_new < emin:
        e_new = emin
    bvc, pbvc, p_half = pressure(e_new, comp_half, vnewc, pmin, p_cut, eosvmax)
    vhalf = 1.0 / (1.0 + comp_half)
    q_new = 0.0
    if delvc <= 0.0:
        q_new = viscosity_speed(pbvc, e_new, vhalf * vhalf, bvc, p_half, rho0) * ql_old + qq_old
    e_new = e_new + 0.5 * delvc * (3.0 * (p_old + q_old) - 4.0 * (p_half + q_new))
    e_new += 0.5 * work
    if math.fabs(e_new) < e_cut:
        e_new = 0.0
    if e_new < emin:
        e_new = emin
    bvc, pbvc, p_new = pressure(e_new, compression, vnewc, pmin, p_cut, eosvmax)
    q_tilde = 0.0
    if delvc <= 0.0:
        q_tilde = viscosity_speed(pbvc, e_new, vnewc * vnewc, bvc, p_new, rho0) * ql_old \
            + qq_old
    e_new = e_new - (7.0 * (p_old + q_old) - 8.0 * (p_half + q_new) + (p_new + q_tilde)) \
        * delvc * (1.0 / 6.0)
    if math.fabs(e_new) < e_cut:
        e_new = 0.0
    if e_new < emin:
        e_new = emin
    bvc, pbvc, p_new = pressure(e_new, compression, vnewc, pmin, p_cut, eosvmax)
    if delvc <= 0.0:
        q_new = viscosity_speed(pbvc, e_new, vnewc * vnewc, bvc, p_new, rho0) * ql_old + qq_old
        if math.fabs(q_new) < q_cut:
            q_new = 0.0
    return p_new, e_new, q_new, bvc, pbvc


@zm.func
def region_of(i, reg_end, regions):
    """The region whose run of the concatenated lists holds position i (LULESH's
    giveMyRegion: a scan with an early return)."""
    for r in range(regions - 1):
        if i < reg_end[r]:
            return r
    return regions - 1


@zm.kernel
def eos(reg_elem, reg_end, reps, vnew, v, e, p, q, qq, ql, delv, ss, bad_vol,
        pmin, p_cut, e_cut, q_cut, v_cut, emin, rho0, eosvmin, eosvmax):
    i = zm.grid(1)
    if i < reg_elem.shape[0]:
        z = reg_elem[i]
        vnewc = vnew[z]
        if vnewc < eosvmin:
            vnewc = eosvmin
        if vnewc > eosvmax:
            vnewc = eosvmax
        vc = v[z]
        if vc < eosvmin:
            vc = eosvmin
        if vc > eosvmax:
            vc = eosvmax
        if vc <= 0.0:
            bad_vol[0] = z
        rep = reps[region_of(i, reg_end, reg_end.shape[0])]
        e_old = e[z]
        delvc = delv[z]
        p_old = p[z]
        q_old = q[z]
        qq_old = qq[z]
        ql_old = ql[z]
        compression = 1.0 / vnewc - 1.0
        comp_half = 1.0 / (vnewc - delvc * 0.5) - 1.0
        if eosvmin != 0.0 and vnewc <= eosvmin:
            comp_half = compression
        if eosvmax != 0.0 and vnewc >= eosvmax:
            p_old = 0.0
            compression = 0.0
            comp_half = 0.0
        p_new = 0.0
        e_new = 0.0
        q_new = 0.0
        bvc = 0.0
        pbvc = 0.0
        for _ in range(rep):
            p_new, e_new, q_new, bvc, pbvc = energy(
                p_old, e_old, q_old, compression, comp_half, vnewc, 0.0, delvc, qq_old,
                ql_old, pmin, p_cut, e_cut, q_cut, emin, rho0, eosvmax)
        p[z] = p_new
        e[z] = e_new
        q[z] = q_new
        ss[z] = viscosity_speed(pbvc, e_new, vnewc * vnewc, bvc, p_new, rho0)
        vt = vnew[z]
        if math.fabs(vt - 1.0) < v_cut:
            vt = 1.0
        v[z] = vt


CONSTANTS = (PMIN, P_CUT, E_CUT, Q_CUT, V_CUT, EMIN, RHO0, EOSVMIN, EOSVMAX)
DUPLICATED = ("e", "p", "q", "qq", "ql", "delv", "ss")   # every float the gradient reaches
SEEDED = ("e", "p", "q", "ss")                           # the outputs
# The paper's build duplicates e alone and seeds d e_out. zymo refuses p and q as constants:
# they are stored with values that depend on e and read back, and nothing proves reg_elem a
# permutation (another thread could read what this one stored), so their derivatives could be
# lost; they are duplicated with zero seeds. qq, ql, delv and ss stay constant, as there.
PAPER_ACTIVE, PAPER_SEEDED = ("e", "p", "q"), ("e",)


def regions(count: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """LULESH's region sets with cost 1, balance 1: elements in runs of a random length (1 to
    15) each given a region drawn uniformly (never the previous run's); the concatenated lists
    (elements region by region) and each region's end in them."""
    region = np.empty(count, np.int32)
    start, last = 0, -1
    while start < count:
        r = int(rng.integers(REGIONS - 1))
        r = r if r < last else r + 1          # uniform over the regions other than `last`
        run = int(rng.integers(1, 16))
        region[start:start + run] = r
        start += run
        last = r
    order = np.argsort(region, kind="stable").astype(np.int32)
    ends = np.cumsum(np.bincount(region, minlength=REGIONS)).astype(np.int32)
    return order, ends


def inputs(side: int, seed: int = 0) -> dict:
    """The state the material update sees some steps into a Sedov blast: relative volumes near
    1 (compressing and expanding elements: both branches of the viscosity), positive energies
    with a hot spot near the origin, pressure and viscosity terms of matching size."""
    rng = np.random.default_rng(seed)
    n = side ** 3
    x, y, z = np.meshgrid(*(np.arange(side),) * 3, indexing="ij")
    r = np.sqrt(x ** 2 + y ** 2 + z ** 2).ravel() / side
    reg_elem, reg_end = regions(n, rng)
    reps = np.array([1] * 5 + [2] * 5 + [20], np.int32)
    v = rng.uniform(0.85, 1.15, n)
    delv = rng.uniform(-0.05, 0.05, n)
    vnew = v + delv
    e = 0.5 + 10.0 * np.exp(-8.0 * r) + 0.1 * rng.random(n)
    p = (2.0 / 3.0) * e / v
    q = 0.05 * rng.random(n)
    qq = 0.02 * rng.random(n)
    ql = 0.3 * rng.random(n)
    return dict(reg_elem=reg_elem, reg_end=reg_end, reps=reps, vnew=vnew, v=v, e=e, p=p, q=q,
                qq=qq, ql=ql, delv=delv, ss=np.zeros(n), bad_vol=np.full(1, -1, np.int32))


ORDER = ("reg_elem", "reg_end", "reps", "vnew", "v", "e", "p", "q", "qq", "ql", "delv", "ss",
         "bad_vol")


def _config(n: int) -> tuple:
    return (-(-n // BLOCK),), (BLOCK,)


def setup(scale: str, device: str, active: tuple = DUPLICATED, seeded: tuple = SEEDED):
    """The state at a scale, `active` the arrays duplicated; the shadows of `seeded` hold the
    seeds (random, fixed), the others zeros."""
    host = inputs(SIDE[scale])
    arrays = {k: on_device(a, device) for k, a in host.items()}
    rng = np.random.default_rng(1)
    shadows = {k: on_device(rng.standard_normal(host[k].shape) if k in seeded
                            else np.zeros_like(host[k]), device) for k in active}
    n = host["e"].size
    backend = backend_of(device)
    state = SimpleNamespace(arrays=arrays, shadows=shadows, n=n, config=_config(n),
                            device=device, backend=backend, primal_kernel=eos.on(backend),
                            derivative_kernel=as_derivative(eos).on(backend),
                            grad_kernel=gradient_of(eos, backend))
    keep_seeds(state, [shadows[k] for k in seeded])
    return state


def _args(state, wrap=None):
    out = []
    for name in ORDER:
        array = state.arrays[name]
        out.append(wrap(name, array) if wrap else array)
    return [*out, *CONSTANTS]


def primal(state) -> None:
    state.primal_kernel[state.config](*_args(state))


def primal_as_derivative(state) -> None:
    state.derivative_kernel[state.config](*_args(state))


def gradient(state) -> None:
    """Forward and reverse sweep with the shadows as they stand (the runner puts the seeds
    back before each call: the sweep consumes ss's and leaves e's, p's and q's the
    cotangents of the values read)."""
    state.grad_kernel[state.config](*_args(
        state, lambda name, a: zm.Duplicated(a, state.shadows[name]) if name in state.shadows
        else a))


def gate(device: str, active: tuple = DUPLICATED):
    host = inputs(SIDE[GATE], seed=3)
    args = [zm.Duplicated(host[k], np.zeros_like(host[k])) if k in active else host[k]
            for k in ORDER]
    grid, block = _config(host["e"].size)
    report = zm.check_grad(eos, grid, block, *args, *CONSTANTS, backend=backend_of(device),
                           directions=3, step=1e-6, rtol=1e-6)
    return gate_from_report(report, 1e-6)


def tape_bytes(state) -> int:
    return launched_tape_bytes(state.grad_kernel, _args(state), state.config[0][0] * BLOCK)


def specializations(state) -> dict:
    return launched_specializations(state.primal_kernel, state.derivative_kernel,
                                    state.grad_kernel, _args(state))


CUDA_C = r"""
#define SS_FLOOR 0.3333333e-18
#define SS_THRESHOLD 1.111111e-36
__device__ __forceinline__ void pressure(double e, double compression, double vnewc, double pmin,
        double p_cut, double eosvmax, double& bvc, double& pbvc, double& p) {
    bvc = (2.0 / 3.0) * (compression + 1.0);
    pbvc = 2.0 / 3.0;
    p = bvc * e;
    if (fabs(p) < p_cut) p = 0.0;
    if (vnewc >= eosvmax) p = 0.0;
    if (p < pmin) p = pmin;
}
__device__ __forceinline__ double speed(double pbvc, double e, double vv, double bvc, double p,
                                        double rho0) {
    double s = (pbvc * e + vv * bvc * p) / rho0;
    return s <= SS_THRESHOLD ? SS_FLOOR : sqrt(s);
}
extern "C" __global__ void eos(int n, const int* __restrict__ reg_elem,
        const int* __restrict__ reg_end, int regions, const int* __restrict__ reps,
        const double* __restrict__ vnew, double* __restrict__ v, double* __restrict__ e,
        double* __restrict__ p, double* __restrict__ q, const double* __restrict__ qq,
        const double* __restrict__ ql, const double* __restrict__ delv,
        double* __restrict__ ss, int* bad_vol,
        double pmin, double p_cut, double e_cut, double q_cut, double v_cut, double emin,
        double rho0, double eosvmin, double eosvmax) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int z = reg_elem[i];
    double vnewc = fmin(fmax(vnew[z], eosvmin), eosvmax);
    double vc = v[z];
    if (vc < eosvmin) vc = eosvmin;
    if (vc > eosvmax) vc = eosvmax;
    if (vc <= 0.0) *bad_vol = z;
    int r = regions - 1;
    for (int k = 0; k < regions - 1; k++) if (i < reg_end[k]) { r = k; break; }
    int rep = reps[r];
    double e_old = e[z], delvc = delv[z], p_old = p[z], q_old = q[z];
    double qq_old = qq[z], ql_old = ql[z];
    double compression = 1.0 / vnewc - 1.0;
    double comp_half = 1.0 / (vnewc - delvc * 0.5) - 1.0;
    if (eosvmin != 0.0 && vnewc <= eosvmin) comp_half = compression;
    if (eosvmax != 0.0 && vnewc >= eosvmax) { p_old = 0.0; compression = 0.0; comp_half = 0.0; }
    double p_new = 0.0, e_new = 0.0, q_new = 0.0, bvc = 0.0, pbvc = 0.0;
    for (int j = 0; j < rep; j++) {
        double p_half, q_tilde;
        e_new = e_old - 0.5 * delvc * (p_old + q_old);
        if (e_new < emin) e_new = emin;
        pressure(e_new, comp_half, vnewc, pmin, p_cut, eosvmax, bvc, pbvc, p_half);
        double vhalf = 1.0 / (1.0 + comp_half);
        q_new = delvc <= 0.0 ? speed(pbvc, e_new, vhalf * vhalf, bvc, p_half, rho0) * ql_old
                               + qq_old : 0.0;
        e_new = e_new + 0.5 * delvc * (3.0 * (p_old + q_old) - 4.0 * (p_half + q_new));
        if (fabs(e_new) < e_cut) e_new = 0.0;
        if (e_new < emin) e_new = emin;
        pressure(e_new, compression, vnewc, pmin, p_cut, eosvmax, bvc, pbvc, p_new);
        q_tilde = delvc <= 0.0 ? speed(pbvc, e_new, vnewc * vnewc, bvc, p_new, rho0) * ql_old
                                 + qq_old : 0.0;
        e_new = e_new - (7.0 * (p_old + q_old) - 8.0 * (p_half + q_new) + (p_new + q_tilde))
                        * delvc * (1.0 / 6.0);
        if (fabs(e_new) < e_cut) e_new = 0.0;
        if (e_new < emin) e_new = emin;
        pressure(e_new, compression, vnewc, pmin, p_cut, eosvmax, bvc, pbvc, p_new);
        if (delvc <= 0.0) {
            q_new = speed(pbvc, e_new, vnewc * vnewc, bvc, p_new, rho0) * ql_old + qq_old;
            if (fabs(q_new) < q_cut) q_new = 0.0;
        }
    }
    p[z] = p_new;
    e[z] = e_new;
    q[z] = q_new;
    ss[z] = speed(pbvc, e_new, vnewc * vnewc, bvc, p_new, rho0);
    double vt = vnew[z];
    if (fabs(vt - 1.0) < v_cut) vt = 1.0;
    v[z] = vt;
}
"""


def cuda_c_launch(state, module) -> None:
    a = state.arrays
    grid, block = state.config
    module.get_function("eos")(
        grid, block,
        (np.int32(state.n), a["reg_elem"], a["reg_end"], np.int32(REGIONS), a["reps"],
         a["vnew"], a["v"], a["e"], a["p"], a["q"], a["qq"], a["ql"], a["delv"], a["ss"],
         a["bad_vol"], *(np.float64(c) for c in CONSTANTS)))


def cuda_c_check(state) -> float:
    """One launch of each from the same state: the worst relative difference of e, p, q, ss."""
    ours, theirs = primal_and_cuda_c(
        state, primal, cuda_c_launch, CUDA_C, state.arrays.values(),
        lambda s: [s.arrays[k] for k in ("e", "p", "q", "ss", "v")])
    return max(float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))
               for a, b in zip(ours, theirs))


FEATURES = ("f64 EOS: branches and clamps, sqrt/fabs, rep loop with a trip count read from "
            "memory, region scan with early return, indirection, in-place e/p/q")
INPUTS = ("inputs: a seeded Sedov-like state (not dumped from a LULESH run); regions and rep "
          "counts as LULESH's CreateRegionIndexSets with cost 1, balance 1")
CASE = Case(
    name="LULESH",
    paper_ratio=2.01,
    features=FEATURES,
    setup=setup, primal=primal, primal_as_derivative=primal_as_derivative, gradient=gradient,
    gate=gate, tape_bytes=tape_bytes, specializations=specializations, cuda_c=CUDA_C,
    reseed=reseed,
    cuda_c_launch=cuda_c_launch, cuda_c_check=cuda_c_check,
    notes=["the paper differentiates e only (the next row); here e, p, q, qq, ql, delv (and "
           "ss's seed) are all active: three more f64 shadows read and written per element, "
           "and the cotangents of qq, ql and delv added atomically (the permutation reg_elem is "
           "not known to be one)", INPUTS])
# The paper's activity (its build duplicates e alone): the like-for-like row for its ratio
PAPER_CASE = Case(
    name="LULESH (the paper's activity)",
    paper_ratio=2.01,
    features=FEATURES,
    setup=lambda scale, device: setup(scale, device, PAPER_ACTIVE, PAPER_SEEDED),
    primal=primal, primal_as_derivative=primal_as_derivative, gradient=gradient,
    gate=lambda device: gate(device, PAPER_ACTIVE), tape_bytes=tape_bytes,
    specializations=specializations, reseed=reseed,
    notes=["d e_out seeded, qq, ql, delv and ss constant, as the paper's build (`enzyme_dup` "
           "on e alone); p and q duplicated with zero seeds, since zymo cannot prove that "
           "dropping their derivatives is right (PAPER_ACTIVE); its CUDA C primal is the "
           "previous row's", INPUTS])
CASES = (CASE, PAPER_CASE)
