"""Parboil's lattice Boltzmann (D3Q19, BGK, lid-driven cavity), the Enzyme paper's multi-step
LBM: 150 time steps on a 120 x 120 x 150 grid, the gradient of the whole program (every step's
launch recorded by `zm.Tape`, the tape's copies included in its time, then `tape.backward`)
with respect to the initial distributions.

The model, written from the lattice Boltzmann method's description (Parboil's LBM report), not
from Parboil's code: 19 distributions per cell in structure-of-arrays planes `f[q, z, y, x]`,
streaming by pulling each distribution from the neighbour it comes from, the BGK relaxation
towards the second-order equilibrium with omega = 1.95. The periodic step (`lbm_step`) is the
single-step benchmark of bench/grad_overhead.py; the cavity step adds Parboil's boundary cells
from its flag grid: obstacle cells (the walls and floor) bounce every distribution back (swap
opposite directions), accelerated cells (the two top layers, the lid) take a fixed velocity in
the equilibrium. Parboil reads the flags from the first byte of a float slot; here they are an
int32 array of their own.
"""
from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace

import numpy as np

import zymo as zm

from .case import GATE, PAPER, QUICK, Case, Gate
from . import harness
from .harness import as_derivative, backend_of, on_device, primal_and_cuda_c, to_host, zeros

_C = [(0, 0, 0), (1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1),
      (1, 1, 0), (-1, -1, 0), (1, -1, 0), (-1, 1, 0), (1, 0, 1), (-1, 0, -1), (1, 0, -1),
      (-1, 0, 1), (0, 1, 1), (0, -1, -1), (0, 1, -1), (0, -1, 1)]
CXI = np.array([c[0] for c in _C], np.int32)
CYI = np.array([c[1] for c in _C], np.int32)
CZI = np.array([c[2] for c in _C], np.int32)
CXF, CYF, CZF = (a.astype(np.float32) for a in (CXI, CYI, CZI))
WQ = np.array([1 / 3] + [1 / 18] * 6 + [1 / 36] * 12, np.float32)
OPPOSITE = np.array([_C.index(tuple(-v for v in c)) for c in _C], np.int32)

FLUID, OBSTACLE, ACCEL = 0, 1, 2
LID = (0.005, 0.002, 0.0)     # Parboil's velocity of the accelerated cells
OMEGA = 1.95
SHAPE = {GATE: (5, 6, 7), QUICK: (16, 16, 16), PAPER: (150, 120, 120)}   # (z, y, x)
STEPS = {GATE: 4, QUICK: 10, PAPER: 150}


@zm.func
def pull(src, f, x, y, z):
    """Stream: each distribution from the neighbour it travels from (periodic indices)."""
    nz, ny, nx = src.shape[1], src.shape[2], src.shape[3]
    cxi = zm.const.array_like(CXI)
    cyi = zm.const.array_like(CYI)
    czi = zm.const.array_like(CZI)
    for q in range(19):
        f[q] = src[q, (z - czi[q] + nz) % nz, (y - cyi[q] + ny) % ny, (x - cxi[q] + nx) % nx]


@zm.func
def moments(f):
    """Density and velocity of a cell's distributions."""
    cx = zm.const.array_like(CXF)
    cy = zm.const.array_like(CYF)
    cz = zm.const.array_like(CZF)
    rho = f[0]
    ux = f[1] - f[2]        # directions 1-6 are the axes, +/- in turn
    uy = f[3] - f[4]
    uz = f[5] - f[6]
    for q in range(1, 7):
        rho += f[q]
    for q in range(7, 19):
        rho += f[q]
        ux += cx[q] * f[q]
        uy += cy[q] * f[q]
        uz += cz[q] * f[q]
    return rho, ux / rho, uy / rho, uz / rho


@zm.func
def relax_into(dst, f, x, y, z, rho, ux, uy, uz, omega):
    """BGK: relax towards the equilibrium at (rho, u) and store the cell's distributions."""
    cx = zm.const.array_like(CXF)
    cy = zm.const.array_like(CYF)
    cz = zm.const.array_like(CZF)
    w = zm.const.array_like(WQ)
    usq = 1.5 * (ux * ux + uy * uy + uz * uz)
    for q in range(19):
        cu = 3.0 * (cx[q] * ux + cy[q] * uy + cz[q] * uz)
        feq = w[q] * rho * (1.0 + cu + 0.5 * cu * cu - usq)
        dst[q, z, y, x] = f[q] - omega * (f[q] - feq)


@lru_cache(maxsize=None)
def periodic_step(dtype):
    """One stream-collide step in a periodic box, distributions held in `dtype`."""
    @zm.kernel
    def lbm_step(src, dst, omega):
        x, y, z = zm.grid(3)
        f = zm.local.array(19, dtype)
        pull(src, f, x, y, z)
        rho, ux, uy, uz = moments(f)
        relax_into(dst, f, x, y, z, rho, ux, uy, uz, omega)
    return lbm_step


@lru_cache(maxsize=None)
def cavity_step(dtype):
    """One stream-collide step of the lid-driven cavity (flags: fluid, obstacle, lid)."""
    @zm.kernel
    def lbm_cavity(src, dst, flags, omega):
        x, y, z = zm.grid(3)
        f = zm.local.array(19, dtype)
        pull(src, f, x, y, z)
        flag = flags[z, y, x]
        if flag == OBSTACLE:
            opposite = zm.const.array_like(OPPOSITE)
            for q in range(19):
                dst[q, z, y, x] = f[opposite[q]]
        else:
            rho, ux, uy, uz = moments(f)
            if flag == ACCEL:
                ux = LID[0]
                uy = LID[1]
                uz = LID[2]
            relax_into(dst, f, x, y, z, rho, ux, uy, uz, omega)
    return lbm_cavity


lbm_step = periodic_step(zm.f32)      # bench/grad_overhead.py's single step


def cavity_flags(shape) -> np.ndarray:
    """Parboil's lid-driven cavity: walls on the four sides and the floor, the two top layers
    accelerated, fluid inside."""
    nz, ny, nx = shape
    flags = np.full(shape, FLUID, np.int32)
    flags[:, :, 0] = flags[:, :, -1] = OBSTACLE
    flags[:, 0, :] = flags[:, -1, :] = OBSTACLE
    flags[0] = OBSTACLE
    flags[-2:][flags[-2:] == FLUID] = ACCEL
    return flags


def initial(shape, dtype=np.float32, seed: int = 0) -> np.ndarray:
    """The fluid at rest (the equilibrium at density 1, as Parboil starts), with a seeded
    1% perturbation so that the gradient is not that of a symmetric state."""
    rng = np.random.default_rng(seed)
    f = WQ[:, None, None, None].astype(np.float64) * (1.0 + 0.01 * rng.standard_normal(
        (19, *shape)))
    return f.astype(dtype)


def _config(shape) -> tuple:
    nz, ny, nx = shape
    return (1, ny, nz), (nx, 1, 1)   # Parboil's launch: a block of nx threads per x row


def run_steps(kernel, f, g, flags, steps: int, config, omega=OMEGA):
    """`steps` launches ping-ponging between f and g; the array holding the result."""
    grid, block = config
    for _ in range(steps):
        kernel[grid, block](f, g, flags, omega)
        f, g = g, f
    return f


def setup(scale: str, device: str):
    shape = SHAPE[scale]
    backend = backend_of(device)
    f = on_device(initial(shape), device)
    kernel = cavity_step(zm.f32)
    rng = np.random.default_rng(1)
    return SimpleNamespace(
        shape=shape, steps=STEPS[scale], config=_config(shape), device=device,
        f=f, g=zeros(device, f.shape, f.dtype),
        flags=on_device(cavity_flags(shape), device),
        seed=on_device(rng.standard_normal((19, *shape)).astype(np.float32), device),
        kernel=kernel.on(backend), derivative_kernel=as_derivative(kernel).on(backend),
        gradient_of_f=None, tape_bytes=0, last_tape=None, derivative=None,
        # registered for the tuning report: the tapes' derivatives share its tuner
        tuned=harness.gradient_of(kernel, backend))


def primal(state) -> None:
    run_steps(state.kernel, state.f, state.g, state.flags, state.steps, state.config)


def primal_as_derivative(state) -> None:
    run_steps(state.derivative_kernel, state.f, state.g, state.flags, state.steps, state.config)


def gradient(state) -> None:
    """The whole program's gradient: the steps recorded (each launch's outputs copied first:
    the tape), then their derivatives in reverse; d<seed, final f>/d(initial f)."""
    state.last_tape = None
    with zm.Tape(max_registers=harness.GRAD_REGISTERS) as tape:
        final = run_steps(state.kernel, state.f, state.g, state.flags, state.steps,
                          state.config)
    tape.backward(final, state.seed)
    state.gradient_of_f = tape.gradient(state.f)
    state.derivative = tape.derivative(state.kernel)
    state.tape_bytes = sum(int(copy.nbytes) for entry in tape.launches
                           for copy in entry.before.values())


def tape_bytes(state) -> int:
    return state.tape_bytes


def specializations(state) -> dict:
    args = (state.f, state.g, state.flags, OMEGA)
    out = {"primal": state.kernel.specialization_for(args),
           "primal as derivative": state.derivative_kernel.specialization_for(args)}
    # the derivative the tape launched for each step (every float array Duplicated), once
    # it ran: under max_registers="auto" the build of the cap chosen
    last = getattr(state.derivative, "last", None)
    out["gradient (one step)"] = last if last is not None else zm.grad(state.kernel).specialize(
        zm.Duplicated(state.f, state.f), zm.Duplicated(state.g, state.g), state.flags, OMEGA)
    return out


def gate(device: str, scale: str = GATE, directions: int = 3) -> Gate:
    """float64 on a small cavity: the taped program's <J^T w, v> against central finite
    differences of the program along random v, and against <w, J v> from zm.jvp chained
    through the steps (the dot-product test)."""
    backend = backend_of(device)
    shape, steps = SHAPE[scale], STEPS[scale]
    kernel = cavity_step(zm.f64).on(backend)
    config = _config(shape)
    rng = np.random.default_rng(7)
    f0 = initial(shape, np.float64, seed=3)
    flags = on_device(cavity_flags(shape), device)
    w = rng.standard_normal(f0.shape)

    def program(f):
        f, g = on_device(f.copy(), device), on_device(np.zeros_like(f), device)
        return to_host(run_steps(kernel, f, g, flags, steps, config))

    f, g = on_device(f0.copy(), device), on_device(np.zeros_like(f0), device)
    with zm.Tape() as tape:
        final = run_steps(kernel, f, g, flags, steps, config)
    tape.backward(final, on_device(w, device))
    adjoint = to_host(tape.gradient(f))
    rows, fd_error = [], 0.0
    for _ in range(directions):
        v = rng.standard_normal(f0.shape)
        h = 1e-6
        fd = (np.vdot(w, program(f0 + h * v)) - np.vdot(w, program(f0 - h * v))) / (2 * h)
        ad = float(np.vdot(adjoint, v))
        error = abs(ad - fd) / max(abs(ad), abs(fd), 1.0)
        fd_error = max(fd_error, error)
        rows.append(f"<J^T w, v> {ad:.12g}  finite difference {fd:.12g}  error {error:.2e}")
    v = rng.standard_normal(f0.shape)
    jvp = zm.jvp(kernel)
    f, g = on_device(f0.copy(), device), on_device(np.zeros_like(f0), device)
    tf, tg = on_device(v.copy(), device), on_device(np.zeros_like(v), device)
    grid, block = config
    for _ in range(steps):
        jvp[grid, block](zm.Duplicated(f, tf), zm.Duplicated(g, tg), flags, OMEGA)
        f, g, tf, tg = g, f, tg, tf
    forward = float(np.vdot(w, to_host(tf)))
    backward = float(np.vdot(adjoint, v))
    dot_error = abs(forward - backward) / max(abs(forward), abs(backward), 1.0)
    rows.append(f"<w, J v> (zm.jvp) {forward:.15g}  <J^T w, v> (tape) {backward:.15g}")
    return Gate(fd_error=fd_error, dot_error=dot_error, tolerance=1e-6,
                detail=f"LBM cavity {shape}, {steps} steps, float64\n" + "\n".join(rows))


CUDA_C = r"""
__constant__ int CX[19] = {0,1,-1,0,0,0,0,1,-1,1,-1,1,-1,1,-1,0,0,0,0};
__constant__ int CY[19] = {0,0,0,1,-1,0,0,1,-1,-1,1,0,0,0,0,1,-1,1,-1};
__constant__ int CZ[19] = {0,0,0,0,0,1,-1,0,0,0,0,1,-1,-1,1,1,-1,-1,1};
__constant__ int OPP[19] = {0,2,1,4,3,6,5,8,7,10,9,12,11,14,13,16,15,18,17};
__constant__ float W[19] = {1.f/3, 1.f/18, 1.f/18, 1.f/18, 1.f/18, 1.f/18, 1.f/18,
    1.f/36, 1.f/36, 1.f/36, 1.f/36, 1.f/36, 1.f/36, 1.f/36, 1.f/36, 1.f/36, 1.f/36,
    1.f/36, 1.f/36};
#define CELL(q, z, y, x) ((((long)(q) * nz + (z)) * ny + (y)) * nx + (x))
extern "C" __global__ void cavity(const float* __restrict__ src, float* __restrict__ dst,
                                  const int* __restrict__ flags, float omega,
                                  int nz, int ny, int nx) {
    int x = threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    float f[19];
    #pragma unroll
    for (int q = 0; q < 19; q++)
        f[q] = src[CELL(q, (z - CZ[q] + nz) % nz, (y - CY[q] + ny) % ny, (x - CX[q] + nx) % nx)];
    int flag = flags[((long)z * ny + y) * nx + x];
    if (flag == 1) {
        #pragma unroll
        for (int q = 0; q < 19; q++) dst[CELL(q, z, y, x)] = f[OPP[q]];
        return;
    }
    float rho = 0.f, ux = 0.f, uy = 0.f, uz = 0.f;
    #pragma unroll
    for (int q = 0; q < 19; q++) {
        rho += f[q]; ux += CX[q] * f[q]; uy += CY[q] * f[q]; uz += CZ[q] * f[q];
    }
    ux /= rho; uy /= rho; uz /= rho;
    if (flag == 2) { ux = 0.005f; uy = 0.002f; uz = 0.f; }
    float usq = 1.5f * (ux * ux + uy * uy + uz * uz);
    #pragma unroll
    for (int q = 0; q < 19; q++) {
        float cu = 3.f * (CX[q] * ux + CY[q] * uy + CZ[q] * uz);
        float feq = W[q] * rho * (1.f + cu + 0.5f * cu * cu - usq);
        dst[CELL(q, z, y, x)] = f[q] - omega * (f[q] - feq);
    }
}
"""


def cuda_c_launch(state, module) -> None:
    nz, ny, nx = state.shape
    grid, block = state.config
    kernel = module.get_function("cavity")
    f, g = state.f, state.g
    dims = (np.int32(nz), np.int32(ny), np.int32(nx))
    for _ in range(state.steps):
        kernel((1, ny, nz), block, (f, g, state.flags, np.float32(OMEGA), *dims))
        f, g = g, f


def cuda_c_check(state) -> float:
    """The same steps from the same state, zymo and CUDA C: the worst difference relative to
    the largest distribution."""
    (ours,), (theirs,) = primal_and_cuda_c(
        state, primal, cuda_c_launch, CUDA_C, [state.f],
        lambda s: [s.f if s.steps % 2 == 0 else s.g])
    return float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))


CASE = Case(
    name="LBM",
    paper_ratio=6.3,
    features="D3Q19 BGK lid-driven cavity, f32, 2-D grid of x rows; 150 steps through zm.Tape "
             "(per-launch copies), bounce-back and lid cells from a flag grid",
    setup=setup, primal=primal, primal_as_derivative=primal_as_derivative, gradient=gradient,
    gate=gate, tape_bytes=tape_bytes, specializations=specializations, cuda_c=CUDA_C,
    cuda_c_launch=cuda_c_launch, cuda_c_check=cuda_c_check,
    notes=["pull streaming with bounce-back by swapping at obstacle cells (Parboil pushes); the "
           "walls make the periodic indices those of a closed box",
           "zm.Tape keeps a copy of each launch's output grid (164 MB per step at 120x120x150; "
           "24.6 GB for 150 steps), where Enzyme's split mode keeps 20 B per cell"])
