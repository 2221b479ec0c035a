"""RSBench, event-based, with Doppler broadening: one macroscopic cross-section lookup per thread
in the multipole representation (the Enzyme suite's kernel and the functions it differentiates),
ported from the algorithm.

Each thread draws an energy and a material from its LCG stream; for every nuclide of the
material (a loop whose trip count is read from memory) it picks the energy's window, computes
four complex phase factors from the nuclide's pseudo-K0RS values (sqrt, atan, cos, sin) into a
thread-local complex array, starts from the window's background terms and adds, for every pole
of the window (bounds read from memory), the real parts of the pole's residues times the
Faddeeva function W at the pole, the total cross section's through the phase factor the pole's
`l_value` selects (dynamic indexing of the local array). W is RSBench's fast approximation: for
|z| < 6 the Abrarov-Quine series with tau = 12 and ten terms (constant tables of its
coefficients, signs and denominators, indexed in a loop; e^(i tau z) through an exponential of
twelve squarings times cos and sin), otherwise the three-term rational asymptotic form (the
four-point Gauss-Hermite quadrature). Complex numbers are complex128 in the kernel; the poles
are float64 arrays [nuclide, pole, 8] (the four complex parameters, real and imaginary) beside
an int32 array of l-values, since a derivative takes no complex arrays.

The gradient: d(sum over lookups of <seed, macro_xs>)/d(poles); the timed gradient seeds the
total cross section (channel 0) of every lookup, as the paper does. The reverse sweep adds into
the poles' shadow with contended float64 atomics.

Sizes: GATE is a small model (68 nuclides, about 12 poles and 3 windows per nuclide, 256
lookups); QUICK is RSBench's "small" (68 nuclides, 1,000 poles and 100 windows on average)
with 2,000 lookups; PAPER is "large" (355 nuclides) with 1,224,000 lookups, the largest size of
the paper's scaling runs (its ablation used 10,200).

`primal_as_derivative`: the primal compiled as `zm.grad` compiles its derivative (see
bench/enzyme/harness.py `AsDerivative`: `noalias` on distinct arrays, `.maxnreg 255`).
"""
from __future__ import annotations

import cmath
import math

import numpy as np

import zymo as zm
from bench.enzyme import harness
from bench.enzyme import montecarlo as mc
from bench.enzyme.case import GATE, PAPER, QUICK, Case, Gate

NUM_L = 4
SIZES = {GATE: (68, 12, 3, 256), QUICK: (68, 1000, 100, 2000),
         PAPER: (355, 1000, 100, 1_224_000)}
BLOCK = 32

TAU = 12.0
# Abrarov-Quine coefficients a_n = 2 sqrt(pi) / tau * exp(-(n pi / tau)^2), n = 1..10, the
# signs (-1)^n and the denominators' constant parts (n pi)^2
ABRAROV_A = np.array([2.0 * math.sqrt(math.pi) / TAU * math.exp(-(n * math.pi / TAU) ** 2)
                      for n in range(1, 11)])
ABRAROV_SIGN = np.array([(-1.0) ** n for n in range(1, 11)])
ABRAROV_DEN = np.array([(n * math.pi) ** 2 for n in range(1, 11)])
PREFACTOR = TAU * TAU / math.sqrt(math.pi)
# the asymptotic form W(z) ~ i z (A / (z^2 - B) + C / (z^2 - D)): B and D are the squared nodes
# of four-point Gauss-Hermite quadrature, A and C their weights times 2 / pi
ASYM_B = (3.0 - math.sqrt(6.0)) / 2.0
ASYM_D = (3.0 + math.sqrt(6.0)) / 2.0
ASYM_A = 1.0 / (2.0 * math.sqrt(math.pi) * (3.0 - math.sqrt(6.0)))
ASYM_C = 1.0 / (2.0 * math.sqrt(math.pi) * (3.0 + math.sqrt(6.0)))


@zm.func
def fast_exp(x):
    """e^x as (1 + x / 4096)^4096: twelve squarings (RSBench's fast exponential)."""
    y = 1.0 + x * (1.0 / 4096.0)
    for _ in range(12):
        y = y * y
    return y


@zm.func
def fast_cexp(z):
    m = fast_exp(z.real)
    return complex(m * math.cos(z.imag), m * math.sin(z.imag))


@zm.func
def faddeeva(z):
    if abs(z) < 6.0:
        itz = complex(-TAU * z.imag, TAU * z.real)       # i tau z
        e = fast_cexp(itz)
        w = 1j * (1.0 - e) / (TAU * z)
        tz2 = TAU * TAU * z * z
        total = complex(0.0, 0.0)
        for n in range(10):
            total += ABRAROV_A[n] * (ABRAROV_SIGN[n] * e - 1.0) / (ABRAROV_DEN[n] - tz2)
        return w + 1j * PREFACTOR * z * total
    z2 = z * z
    return 1j * z * (ASYM_A / (z2 - ASYM_B) + ASYM_C / (z2 - ASYM_D))


@zm.func
def phase_factors(factors, nuc, energy, k0rs):
    """sigTfactors: exp(-2 i phi_l) with phi_l the hard-sphere phase shift of order l."""
    root = math.sqrt(energy)
    for l in range(NUM_L):
        phi = k0rs[nuc, l] * root
        if l == 1:
            phi -= math.atan(phi)
        elif l == 2:
            phi -= math.atan(3.0 * phi / (3.0 - phi * phi))
        elif l == 3:
            phi -= math.atan(phi * (15.0 - phi * phi) / (15.0 - 6.0 * phi * phi))
        phi *= 2.0
        factors[l] = complex(math.cos(phi), -math.sin(phi))


@zm.kernel
def rs_lookup(n_lookups, n_windows, k0rs, windows, bounds, poles, l_values, num_nucs, mats,
              concs, shares, out):
    i = zm.grid(1)
    if i >= n_lookups:
        return
    energy, mat = mc.sample(i, shares)
    macro = zm.local.array(4, zm.f64)
    factors = zm.local.array(NUM_L, zm.c128)
    for k in range(4):
        macro[k] = 0.0
    for j in range(num_nucs[mat]):
        nuc = mats[mat, j]
        count = n_windows[nuc]
        window = int(energy * count)
        if window >= count:
            window = count - 1
        phase_factors(factors, nuc, energy, k0rs)
        sig_t = energy * windows[nuc, window, 0]
        sig_a = energy * windows[nuc, window, 1]
        sig_f = energy * windows[nuc, window, 2]
        for p in range(bounds[nuc, window, 0], bounds[nuc, window, 1]):
            ea = complex(poles[nuc, p, 0], poles[nuc, p, 1])
            rt = complex(poles[nuc, p, 2], poles[nuc, p, 3])
            ra = complex(poles[nuc, p, 4], poles[nuc, p, 5])
            rf = complex(poles[nuc, p, 6], poles[nuc, p, 7])
            w = faddeeva(energy - ea)        # Doppler factor 1, as RSBench
            sig_t += (rt * w * factors[l_values[nuc, p]]).real
            sig_a += (ra * w).real
            sig_f += (rf * w).real
        conc = concs[mat, j]
        macro[0] += conc * sig_t
        macro[1] += conc * sig_a
        macro[2] += conc * sig_f
        macro[3] += conc * (sig_t - sig_a)
    for k in range(4):
        out[i, k] = macro[k]


def make_inputs(n_nuclides: int, avg_poles: int, avg_windows: int, seed: int = 42) -> dict:
    """Poles and windows as RSBench generates them (seeded): per nuclide a pole count and a
    window count drawn around the averages, the poles split evenly among the windows, pole
    parameters, window backgrounds and pseudo-K0RS uniform in (0, 1), l-values in [0, 4)."""
    rng = np.random.default_rng(seed)
    n_poles = rng.integers(avg_poles // 2 + 1, avg_poles + avg_poles // 2 + 2, n_nuclides)
    n_win = rng.integers(max(1, avg_windows // 2), avg_windows + avg_windows // 2 + 1,
                         n_nuclides)
    max_p, max_w = int(n_poles.max()), int(n_win.max())
    poles = rng.random((n_nuclides, max_p, 8))
    l_values = rng.integers(0, NUM_L, (n_nuclides, max_p)).astype(np.int32)
    windows = rng.random((n_nuclides, max_w, 3))
    bounds = np.zeros((n_nuclides, max_w, 2), np.int32)
    for nuc in range(n_nuclides):
        space = n_poles[nuc] // n_win[nuc]
        for w in range(n_win[nuc]):
            bounds[nuc, w] = (space * w, space * (w + 1))
        bounds[nuc, n_win[nuc] - 1, 1] = n_poles[nuc]
    k0rs = rng.random((n_nuclides, NUM_L))
    num_nucs, mats, concs = mc.materials(n_nuclides, rng)
    return {"n_windows": n_win.astype(np.int32), "k0rs": k0rs, "windows": windows,
            "bounds": bounds, "poles": poles, "l_values": l_values, "num_nucs": num_nucs,
            "mats": mats, "concs": concs, "shares": mc.MATERIAL_SHARES.copy()}


def faddeeva_reference(z: complex) -> complex:
    """The same approximation in Python complex arithmetic."""
    if abs(z) < 6.0:
        itz = 1j * TAU * z
        y = 1.0 + itz.real / 4096.0
        for _ in range(12):
            y *= y
        e = y * complex(math.cos(itz.imag), math.sin(itz.imag))
        total = sum(ABRAROV_A[n] * (ABRAROV_SIGN[n] * e - 1.0) / (ABRAROV_DEN[n] - (TAU * z) ** 2)
                    for n in range(10))
        return 1j * (1.0 - e) / (TAU * z) + 1j * PREFACTOR * z * total
    return 1j * z * (ASYM_A / (z * z - ASYM_B) + ASYM_C / (z * z - ASYM_D))


def reference(inputs: dict, n_lookups: int) -> np.ndarray:
    """The macroscopic cross sections in Python, for the tests."""
    energies, mats = mc.lookup_streams(n_lookups)
    out = np.zeros((n_lookups, 4))
    h = inputs
    for i in range(n_lookups):
        m, e = mats[i], energies[i]
        for j in range(h["num_nucs"][m]):
            nuc = h["mats"][m, j]
            window = min(int(e * h["n_windows"][nuc]), h["n_windows"][nuc] - 1)
            factors = []
            for l in range(NUM_L):
                phi = h["k0rs"][nuc, l] * math.sqrt(e)
                phi -= [0.0, math.atan(phi), math.atan(3 * phi / (3 - phi * phi)),
                        math.atan(phi * (15 - phi * phi) / (15 - 6 * phi * phi))][l]
                factors.append(cmath.exp(-2j * phi))
            sig = e * h["windows"][nuc, window]
            for p in range(*h["bounds"][nuc, window]):
                q = h["poles"][nuc, p]
                w = faddeeva_reference(e - complex(q[0], q[1]))
                sig = sig + np.array([(complex(q[2], q[3]) * w
                                       * factors[h["l_values"][nuc, p]]).real,
                                      (complex(q[4], q[5]) * w).real,
                                      (complex(q[6], q[7]) * w).real])
            out[i, :3] += h["concs"][m, j] * sig
            out[i, 3] += h["concs"][m, j] * (sig[0] - sig[1])
    return out


class State:
    """One instance on one device: inputs, output, shadows, compiled launches."""


CONSTS = ("n_windows", "k0rs", "windows", "bounds")
TAIL = ("l_values", "num_nucs", "mats", "concs", "shares")


def setup(scale: str, device: str, build: bool = True) -> State:
    n_nuc, avg_poles, avg_windows, n_lookups = SIZES[scale]
    host = make_inputs(n_nuc, avg_poles, avg_windows)
    s = State()
    s.device, s.scale, s.n_lookups, s.host = device, scale, n_lookups, host
    s.blocks, s.block = (n_lookups + BLOCK - 1) // BLOCK, BLOCK
    s.consts = [harness.on_device(host[k], device) for k in CONSTS]
    s.poles = harness.on_device(host["poles"], device)
    s.tail = [harness.on_device(host[k], device) for k in TAIL]
    mc.add_outputs(s, device, 4)            # the seed: the total cross section
    s.d_poles = harness.zeros(device, host["poles"].shape)
    s.primal_args = [np.int64(n_lookups), *s.consts, s.poles, *s.tail, s.out]
    s.grad_args = [np.int64(n_lookups), *s.consts, zm.Duplicated(s.poles, s.d_poles), *s.tail,
                   zm.Duplicated(s.out, s.d_out)]
    if build:
        s.programs = harness.Programs(rs_lookup, (s.blocks,), (BLOCK,), s.primal_args,
                                      s.grad_args, device)
    return s


def gate(device: str) -> Gate:
    """check_grad (float64, central differences, dot-product row) on the GATE instance."""
    return harness.check(rs_lookup, setup(GATE, "cpu", build=False), device, "poles")


CUDA_C = mc.CUDA_C + r"""
struct cplx { double re, im; };
__device__ __forceinline__ cplx cx(double re, double im) { cplx z = {re, im}; return z; }
__device__ __forceinline__ cplx operator+(cplx a, cplx b) { return cx(a.re + b.re, a.im + b.im); }
__device__ __forceinline__ cplx operator-(cplx a, cplx b) { return cx(a.re - b.re, a.im - b.im); }
__device__ __forceinline__ cplx operator*(cplx a, cplx b) {
    return cx(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re); }
__device__ __forceinline__ cplx operator*(double s, cplx a) { return cx(s * a.re, s * a.im); }
__device__ __forceinline__ cplx operator/(cplx a, cplx b) {
    // Smith's algorithm, as complex division in C and in zymo
    if (fabs(b.re) >= fabs(b.im)) {
        double r = b.im / b.re, d = b.re + b.im * r;
        return cx((a.re + a.im * r) / d, (a.im - a.re * r) / d);
    }
    double r = b.re / b.im, d = b.re * r + b.im;
    return cx((a.re * r + a.im) / d, (a.im * r - a.re) / d);
}
__device__ __forceinline__ double cabs_(cplx z) { return hypot(z.re, z.im); }
__constant__ double ABRAROV_A[10] = {%(a)s};
__constant__ double ABRAROV_SIGN[10] = {%(sign)s};
__constant__ double ABRAROV_DEN[10] = {%(den)s};
__device__ __forceinline__ double fast_exp(double x) {
    double y = 1.0 + x * (1.0 / 4096.0);
    #pragma unroll
    for (int k = 0; k < 12; k++) y *= y;
    return y;
}
__device__ __forceinline__ cplx faddeeva(cplx z) {
    const double tau = 12.0;
    if (cabs_(z) < 6.0) {
        double m = fast_exp(-tau * z.im), s, c;
        sincos(tau * z.re, &s, &c);
        cplx e = cx(m * c, m * s);
        cplx w = cx(0.0, 1.0) * (cx(1.0 - e.re, -e.im) / (tau * z));
        cplx tz2 = (tau * tau) * (z * z);
        cplx total = cx(0.0, 0.0);
        #pragma unroll
        for (int n = 0; n < 10; n++)
            total = total + ABRAROV_A[n] * ((ABRAROV_SIGN[n] * e - cx(1.0, 0.0))
                                            / (cx(ABRAROV_DEN[n], 0.0) - tz2));
        return w + cx(0.0, %(pre)s) * (z * total);
    }
    cplx z2 = z * z;
    return cx(0.0, 1.0) * (z * (cx(%(A)s, 0.0) / (z2 - cx(%(B)s, 0.0))
                               + cx(%(C)s, 0.0) / (z2 - cx(%(D)s, 0.0))));
}
extern "C" __global__ void rs_lookup(long n_lookups, const int *__restrict__ n_windows,
        const double *__restrict__ k0rs, const double *__restrict__ windows, long max_w,
        const int *__restrict__ bounds, const double *__restrict__ poles, long max_p,
        const int *__restrict__ l_values, const int *__restrict__ num_nucs,
        const int *__restrict__ mats, long max_nucs, const double *__restrict__ concs,
        const double *__restrict__ shares, double *__restrict__ out) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n_lookups) return;
    u64 seed = lcg_skip(1070ULL, 2 * i);
    double energy = lcg_next(&seed);
    double roll = lcg_next(&seed);
    int mat = pick_material(roll, shares);
    double macro[4] = {0.0, 0.0, 0.0, 0.0};
    cplx factors[4];
    for (int j = 0; j < num_nucs[mat]; j++) {
        long nuc = mats[mat * max_nucs + j];
        int count = n_windows[nuc];
        int window = (int)(energy * count);
        if (window >= count) window = count - 1;
        double root = sqrt(energy);
        #pragma unroll
        for (int l = 0; l < 4; l++) {
            double phi = k0rs[nuc * 4 + l] * root;
            if (l == 1) phi -= atan(phi);
            else if (l == 2) phi -= atan(3.0 * phi / (3.0 - phi * phi));
            else if (l == 3) phi -= atan(phi * (15.0 - phi * phi) / (15.0 - 6.0 * phi * phi));
            phi *= 2.0;
            factors[l] = cx(cos(phi), -sin(phi));
        }
        const double *win = windows + (nuc * max_w + window) * 3;
        double sig_t = energy * win[0], sig_a = energy * win[1], sig_f = energy * win[2];
        const int *b = bounds + (nuc * max_w + window) * 2;
        for (int p = b[0]; p < b[1]; p++) {
            const double *q = poles + (nuc * max_p + p) * 8;
            cplx w = faddeeva(cx(energy - q[0], -q[1]));
            sig_t += (cx(q[2], q[3]) * w * factors[l_values[nuc * max_p + p]]).re;
            sig_a += (cx(q[4], q[5]) * w).re;
            sig_f += (cx(q[6], q[7]) * w).re;
        }
        double conc = concs[mat * max_nucs + j];
        macro[0] += conc * sig_t; macro[1] += conc * sig_a; macro[2] += conc * sig_f;
        macro[3] += conc * (sig_t - sig_a);
    }
    #pragma unroll
    for (int k = 0; k < 4; k++) out[i * 4 + k] = macro[k];
}
""" % {"a": ", ".join(repr(float(v)) for v in ABRAROV_A),
       "sign": ", ".join(repr(float(v)) for v in ABRAROV_SIGN),
       "den": ", ".join(repr(float(v)) for v in ABRAROV_DEN),
       "pre": repr(PREFACTOR), "A": repr(ASYM_A), "B": repr(ASYM_B), "C": repr(ASYM_C),
       "D": repr(ASYM_D)}


def cuda_c_launch(s: State, module) -> None:
    import cupy as cp
    h = s.host
    n_windows, k0rs, windows, bounds = s.consts
    l_values, num_nucs, mats, concs, shares = s.tail
    args = (np.int64(s.n_lookups), n_windows, k0rs, windows, h["windows"].shape[1], bounds,
            s.poles, h["poles"].shape[1], l_values, num_nucs, mats, h["mats"].shape[1], concs,
            shares, s.c_out)
    module.get_function("rs_lookup")((s.blocks,), (BLOCK,), harness.cupy_args(cp, args))


CASE = Case(
    name="RSBench",
    paper_ratio=3.5,
    features="f64 and complex128, sqrt/atan/cos/sin, Faddeeva series with constant tables, "
             "dynamically indexed local complex array, pole loop bounds read from memory, "
             "contended f64 atomics in reverse",
    setup=setup,
    gate=gate,
    cuda_c=CUDA_C,
    cuda_c_launch=cuda_c_launch,
    **harness.program_closures("out", "c_out"),
    reseed=harness.reseed,
    notes=["Enzyme's ratio: the paper gives 3-4x for RSBench; 3.5 is its midpoint."],
)
