"""The discontinuous-Galerkin volume right-hand side of the Enzyme paper's DG benchmark: the
compressible Euler equations with gravity on hexahedral elements of polynomial order N = 4
(Nq = 5 Legendre-Gauss-Lobatto points per direction), one block of Nq x Nq threads per element.

Written from the method's description (the strong-form DG volume term of Kopriva's book and the
paper's kernel features), not from the Julia code. Thread (i, j) walks the element's column
k = 0..Nq-1: it computes the Euler fluxes at node (i, j, k), turns them into contravariant
fluxes with the metric terms, and

- the xi and eta fluxes go to shared tiles `s_F`, `s_G` (Nq x Nq x 5) between two barriers;
  after the second barrier every thread applies the 1-D derivative matrix along xi and eta
  (`s_D[n, i] s_F[n, j, :]` and `s_D[n, j] s_G[i, n, :]`) to its node (i, j, k);
- the zeta flux stays in the thread: it is spread over the thread's own column, held in a 5 x 5
  register array `r_rhs[state, k]`, with row k of D;
- gravity adds its source to the vertical momentum;

and at the end `rhs += MJI * r_rhs`. Float32 (the paper's) for the timings, float64 for the
gate: the kernels are made per element type.

Layout (C order, i fastest): Q[e, state, node], vgeo[e, factor, node], rhs[e, state, node] with
node = (k Nq + j) Nq + i. The kernel takes them as 3-D arrays and reshapes each to its own
shape with the trailing extents written as constants, as the CUDA C version's #defines make
them: with extents that arrive with the launch, zymo kept a 64-bit pointer live per array and
factor (124 registers, ptxas sm_90); with constants, 80 (CUDA C: 72). The reverse sweep
differentiates through the reshapes (each shadow is reshaped alike).

The gradient is the paper's `all_dub`: rhs, Q, vgeo and D all Duplicated, rhs's shadow seeded
(ones for timing, random for the gate). D is read by every block: its cotangent goes through
the shared shadow of s_D, then to 25 hot global addresses.
"""
from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace

import numpy as np

import zymo as zm

from .case import GATE, PAPER, QUICK, Case
from .harness import (as_derivative, backend_of, gate_from_report, gradient_of, keep_seeds,
                      launched_specializations, launched_tape_bytes, on_device,
                      primal_and_cuda_c, reseed, zeros)

N = 4
NQ = N + 1
NODES = NQ ** 3
STATES = 5                     # rho, U, V, W, E (momenta U = rho u, ...)
RHO, MOM_U, MOM_V, MOM_W, ENERGY = range(STATES)
# vgeo's factors: the 9 metric terms d(xi, eta, zeta)/d(x, y, z), the Jacobian MJ (with the
# quadrature weight), its inverse MJI, and the node's coordinates
XIX, XIY, XIZ, ETAX, ETAY, ETAZ, ZETAX, ZETAY, ZETAZ, MJ, MJI, X, Y, Z = range(14)
FACTORS = 14
GRAV = 9.81
GDM1 = 0.4                      # gamma - 1
ELEMENTS = {GATE: 3, QUICK: 200, PAPER: 20_000}
PAPER_SCALING = tuple(range(20_000, 240_001, 20_000))


def lgl_derivative(n: int = N) -> np.ndarray:
    """The spectral derivative matrix on the n + 1 Legendre-Gauss-Lobatto points:
    D[a, b] = l_b'(x_a) (barycentric form)."""
    inner = np.polynomial.legendre.Legendre.basis(n).deriv().roots()
    x = np.concatenate([[-1.0], np.sort(inner.real), [1.0]])
    diff = x[:, None] - x[None, :]
    np.fill_diagonal(diff, 1.0)
    w = 1.0 / diff.prod(axis=1)
    d = (w[None, :] / w[:, None]) / diff
    np.fill_diagonal(d, 0.0)
    np.fill_diagonal(d, -d.sum(axis=1))
    return x, d


@lru_cache(maxsize=None)
def volumerhs(dtype):
    """The volume RHS kernel for distributions of `dtype` (zm.f32 or zm.f64)."""
    @zm.kernel
    def volume_rhs(rhs_, Q_, vgeo_, D):
        # the layout with its trailing extents as constants (CUDA C's #defines): addresses
        # are then one pointer per array plus immediate offsets (80 registers instead of 124)
        rhs = rhs_.reshape((rhs_.shape[0], STATES, NODES))
        Q = Q_.reshape((Q_.shape[0], STATES, NODES))
        vgeo = vgeo_.reshape((vgeo_.shape[0], FACTORS, NODES))
        i = zm.threadIdx.x
        j = zm.threadIdx.y
        e = zm.blockIdx.x
        s_D = zm.shared.array((NQ, NQ), dtype)
        s_F = zm.shared.array((NQ, NQ, STATES), dtype)
        s_G = zm.shared.array((NQ, NQ, STATES), dtype)
        r_rhs = zm.local.array((STATES, NQ), dtype)
        for s in range(STATES):
            for k in range(NQ):
                r_rhs[s, k] = 0.0
        s_D[j, i] = D[j, i]
        for k in range(NQ):
            zm.syncthreads()
            node = (k * NQ + j) * NQ + i
            mj = vgeo[e, MJ, node]
            z = vgeo[e, Z, node]
            rho = Q[e, RHO, node]
            U = Q[e, MOM_U, node]
            V = Q[e, MOM_V, node]
            W = Q[e, MOM_W, node]
            E = Q[e, ENERGY, node]
            rinv = 1.0 / rho
            P = GDM1 * (E - 0.5 * rinv * (U * U + V * V + W * W) - GRAV * rho * z)
            # the Euler fluxes of the five states along x, y and z
            fxs = (U, rinv * U * U + P, rinv * V * U, rinv * W * U, rinv * U * (E + P))
            fys = (V, rinv * U * V, rinv * V * V + P, rinv * W * V, rinv * V * (E + P))
            fzs = (W, rinv * U * W, rinv * V * W, rinv * W * W + P, rinv * W * (E + P))
            for s in range(STATES):
                fx = fxs[s]
                fy = fys[s]
                fz = fzs[s]
                s_F[j, i, s] = mj * (vgeo[e, XIX, node] * fx + vgeo[e, XIY, node] * fy
                                     + vgeo[e, XIZ, node] * fz)
                s_G[j, i, s] = mj * (vgeo[e, ETAX, node] * fx + vgeo[e, ETAY, node] * fy
                                     + vgeo[e, ETAZ, node] * fz)
                h = mj * (vgeo[e, ZETAX, node] * fx + vgeo[e, ZETAY, node] * fy
                          + vgeo[e, ZETAZ, node] * fz)
                for n in range(NQ):
                    r_rhs[s, n] += s_D[k, n] * h
            r_rhs[MOM_W, k] -= mj * rho * GRAV
            zm.syncthreads()
            for n in range(NQ):
                dni = s_D[n, i]
                dnj = s_D[n, j]
                for s in range(STATES):
                    r_rhs[s, k] += dni * s_F[j, n, s] + dnj * s_G[n, i, s]
        for k in range(NQ):
            node = (k * NQ + j) * NQ + i
            mji = vgeo[e, MJI, node]
            for s in range(STATES):
                rhs[e, s, node] += mji * r_rhs[s, k]
    return volume_rhs


def inputs(elements: int, dtype=np.float32, seed: int = 0) -> dict:
    """A seeded atmosphere-like state on affinely mapped elements: density near 1 decreasing
    with height, small momenta, energy for a positive pressure; metric terms of a mildly
    sheared element (the inverse of a random near-identity map), MJ its Jacobian."""
    rng = np.random.default_rng(seed)
    x1, d = lgl_derivative()
    k, j, i = np.meshgrid(*(np.arange(NQ),) * 3, indexing="ij")
    ref = np.stack([x1[i].ravel(), x1[j].ravel(), x1[k].ravel()])      # (3, nodes)
    vgeo = np.empty((elements, FACTORS, NODES))
    Q = np.empty((elements, STATES, NODES))
    for e in range(elements):
        A = np.eye(3) * 0.5 + 0.05 * rng.standard_normal((3, 3))        # d(x)/d(xi)
        origin = rng.uniform(0, 10, 3)
        xyz = origin[:, None] + A @ ref
        inv = np.linalg.inv(A)                                          # d(xi)/d(x)
        vgeo[e, XIX:ZETAZ + 1] = inv.reshape(9, 1)
        weight = 1.0 + 0.1 * rng.random(NODES)                          # quadrature weights
        vgeo[e, MJ] = np.linalg.det(A) * weight
        vgeo[e, MJI] = 1.0 / vgeo[e, MJ]
        vgeo[e, X:Z + 1] = xyz
        rho = np.exp(-0.01 * xyz[2]) * (1.0 + 0.05 * rng.standard_normal(NODES))
        mom = rho * 0.1 * rng.standard_normal((3, NODES))
        pressure = 2.0 + 0.1 * rng.random(NODES)
        Q[e, RHO] = rho
        Q[e, MOM_U:MOM_W + 1] = mom
        Q[e, ENERGY] = pressure / GDM1 + 0.5 * (mom ** 2).sum(0) / rho + GRAV * rho * xyz[2]
    rhs = 0.1 * rng.standard_normal((elements, STATES, NODES))
    return dict(rhs=rhs.astype(dtype), Q=Q.astype(dtype), vgeo=vgeo.astype(dtype),
                D=d.astype(dtype))


ORDER = ("rhs", "Q", "vgeo", "D")
BLOCK = (NQ, NQ)


def setup(scale: str, device: str):
    host = inputs(ELEMENTS[scale])
    arrays = {k: on_device(a, device) for k, a in host.items()}
    # the paper's all_dub: rhs's shadow seeded with ones, the others zero
    shadows = {k: zeros(device, a.shape, a.dtype) for k, a in arrays.items()}
    shadows["rhs"][...] = 1
    backend = backend_of(device)
    kernel = volumerhs(zm.f32)
    state = SimpleNamespace(arrays=arrays, shadows=shadows, elements=ELEMENTS[scale],
                            config=((ELEMENTS[scale],), BLOCK), device=device,
                            kernel=kernel.on(backend),
                            derivative_kernel=as_derivative(kernel).on(backend),
                            grad_kernel=gradient_of(kernel, backend))
    keep_seeds(state, [shadows["rhs"]])
    return state


def _args(state):
    return [state.arrays[k] for k in ORDER]


def primal(state) -> None:
    state.kernel[state.config](*_args(state))


def primal_as_derivative(state) -> None:
    state.derivative_kernel[state.config](*_args(state))


def gradient(state) -> None:
    """Forward and reverse sweep with the shadows as they stand (setup seeded them)."""
    state.grad_kernel[state.config](*[zm.Duplicated(state.arrays[k], state.shadows[k])
                                      for k in ORDER])


def gate(device: str):
    host = inputs(ELEMENTS[GATE], np.float64, seed=5)
    args = [zm.Duplicated(host[k], np.zeros_like(host[k])) for k in ORDER]
    report = zm.check_grad(volumerhs(zm.f64), (ELEMENTS[GATE],), BLOCK, *args,
                           backend=backend_of(device), directions=2, step=1e-6, rtol=1e-6)
    return gate_from_report(report, 1e-6)


def tape_bytes(state) -> int:
    return launched_tape_bytes(state.grad_kernel, _args(state), state.elements * NQ * NQ)


def specializations(state) -> dict:
    return launched_specializations(state.kernel, state.derivative_kernel, state.grad_kernel,
                                    _args(state))


CUDA_C = r"""
#define NQ 5
#define NODES 125
#define FACTORS 14
#define GRAV 9.81f
#define GDM1 0.4f
extern "C" __global__ void __launch_bounds__(NQ * NQ)
volume_rhs(float* __restrict__ rhs, const float* __restrict__ Q,
           const float* __restrict__ vgeo, const float* __restrict__ D) {
    int i = threadIdx.x, j = threadIdx.y;
    long e = blockIdx.x;
    __shared__ float s_D[NQ][NQ], s_F[NQ][NQ][5], s_G[NQ][NQ][5];
    float r[5][NQ];
    #pragma unroll
    for (int s = 0; s < 5; s++)
        #pragma unroll
        for (int k = 0; k < NQ; k++) r[s][k] = 0.f;
    s_D[j][i] = D[j * NQ + i];
    const float* q = Q + e * 5 * NODES;
    const float* g = vgeo + e * FACTORS * NODES;
    #pragma unroll
    for (int k = 0; k < NQ; k++) {
        __syncthreads();
        int node = (k * NQ + j) * NQ + i;
        float mj = g[9 * NODES + node], z = g[13 * NODES + node];
        float rho = q[node], U = q[NODES + node], V = q[2 * NODES + node];
        float W = q[3 * NODES + node], E = q[4 * NODES + node];
        float rinv = 1.f / rho;
        float P = GDM1 * (E - 0.5f * rinv * (U * U + V * V + W * W) - GRAV * rho * z);
        float fx[5] = {U, rinv * U * U + P, rinv * V * U, rinv * W * U, rinv * U * (E + P)};
        float fy[5] = {V, rinv * U * V, rinv * V * V + P, rinv * W * V, rinv * V * (E + P)};
        float fz[5] = {W, rinv * U * W, rinv * V * W, rinv * W * W + P, rinv * W * (E + P)};
        float xix = g[node], xiy = g[NODES + node], xiz = g[2 * NODES + node];
        float etx = g[3 * NODES + node], ety = g[4 * NODES + node], etz = g[5 * NODES + node];
        float zex = g[6 * NODES + node], zey = g[7 * NODES + node], zez = g[8 * NODES + node];
        #pragma unroll
        for (int s = 0; s < 5; s++) {
            s_F[j][i][s] = mj * (xix * fx[s] + xiy * fy[s] + xiz * fz[s]);
            s_G[j][i][s] = mj * (etx * fx[s] + ety * fy[s] + etz * fz[s]);
            float h = mj * (zex * fx[s] + zey * fy[s] + zez * fz[s]);
            #pragma unroll
            for (int n = 0; n < NQ; n++) r[s][n] += s_D[k][n] * h;
        }
        r[3][k] -= mj * rho * GRAV;
        __syncthreads();
        #pragma unroll
        for (int n = 0; n < NQ; n++) {
            float dni = s_D[n][i], dnj = s_D[n][j];
            #pragma unroll
            for (int s = 0; s < 5; s++) r[s][k] += dni * s_F[j][n][s] + dnj * s_G[n][i][s];
        }
    }
    #pragma unroll
    for (int k = 0; k < NQ; k++) {
        int node = (k * NQ + j) * NQ + i;
        float mji = g[10 * NODES + node];
        #pragma unroll
        for (int s = 0; s < 5; s++) rhs[(e * 5 + s) * NODES + node] += mji * r[s][k];
    }
}
"""


def cuda_c_launch(state, module) -> None:
    a = state.arrays
    module.get_function("volume_rhs")((state.elements,), BLOCK,
                                      (a["rhs"], a["Q"], a["vgeo"], a["D"]))


def cuda_c_check(state) -> float:
    """One launch of each on the same rhs: the worst difference relative to rhs's scale."""
    rhs = state.arrays["rhs"]
    (ours,), (theirs,) = primal_and_cuda_c(state, primal, cuda_c_launch, CUDA_C, [rhs],
                                           lambda s: [rhs])
    ours, theirs = ours.astype(np.float64), theirs.astype(np.float64)
    return float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))


CASE = Case(
    name="DG",
    paper_ratio=5.4,
    features="f32 DG volume RHS, N=4: 5x5 blocks, 3 shared tiles, 10 barriers, 5x5 register "
             "array; reverse: shared shadows, 25 hot global addresses (dD)",
    setup=setup, primal=primal, primal_as_derivative=primal_as_derivative, gradient=gradient,
    gate=gate, tape_bytes=tape_bytes, specializations=specializations, cuda_c=CUDA_C,
    cuda_c_launch=cuda_c_launch, cuda_c_check=cuda_c_check, reseed=reseed,
    notes=["Enzyme's DG ratio is 5.4x on AMD; its CUDA figure (18x) is doubtful "
           "(research note, section 10)",
           f"paper scaling sizes {PAPER_SCALING[0]}..{PAPER_SCALING[-1]} elements; "
           "PAPER is the first"])
