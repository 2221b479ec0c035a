"""Rodinia's hotspot3D as an evolution workload: one step of the heat equation on a stacked
chip, the kernel GEVO evolved (`hotspotOpt1`).

The chip is nx x ny cells in the plane and nz layers, flat arrays indexed x + nx (y + ny z).
A step is a 7-point stencil with a power source and a pull to the ambient temperature:

    out = cc t + cw t[W] + ce t[E] + cn t[N] + cs t[S] + cb t[B] + ct t[T]
          + (dt / Cap) p + ct amb

where a neighbour past an edge of the chip is the cell itself. Each thread owns one (x, y)
column and walks it bottom to top, keeping the cells below, at and above it in registers
(Rodinia's opt1); blocks of 64 x 4 threads. The coefficients follow from the chip's size and
silicon's constants as Rodinia's do (`coefficients`).

GEVO's test (its hotspot3D evolve.sh): a 512 x 512 x 8 chip; here the temperatures and powers
are drawn fresh per evaluation in the ranges of Rodinia's input files (a few hundred kelvin;
powers that move a cell a fraction of a kelvin per step). Held out: 1000 x 700 x 11, not a
multiple of the block. Error: GEVO used its default per-element relative error 1% on the
temperatures after 5000-50000 steps; one step is evolved here, so the check is 1% of the
step's largest change (rodinia_common.step_error).
"""
from __future__ import annotations

import functools

import numpy as np

import zymo as zm

from .rodinia_common import GEVO_RELATIVE, cdiv, seeded_holdout, step_error
from .workloads import Workload

BLOCK = (64, 4)
AMB = 80.0

# argument positions
P, T_IN, T_OUT = 0, 1, 2


@zm.kernel
def hotspot3d(p, t_in, t_out, nx, ny, nz, ce, cw, cn, cs, ct, cb, cc, step_div_cap, amb):
    i = zm.blockDim.x * zm.blockIdx.x + zm.threadIdx.x
    j = zm.blockDim.y * zm.blockIdx.y + zm.threadIdx.y
    if i < nx and j < ny:
        xy = nx * ny
        c = i + j * nx
        w = c if i == 0 else c - 1
        e = c if i == nx - 1 else c + 1
        n = c if j == 0 else c - nx
        s = c if j == ny - 1 else c + nx
        below = t_in[c]
        here = below
        above = t_in[c + xy] if nz > 1 else here
        for k in range(nz):
            t_out[c] = (cc * here + cw * t_in[w] + ce * t_in[e] + cs * t_in[s] + cn * t_in[n]
                        + cb * below + ct * above + step_div_cap * p[c] + ct * amb)
            c += xy
            w += xy
            e += xy
            n += xy
            s += xy
            below = here
            here = above
            if k + 2 < nz:
                above = t_in[c + xy]


def coefficients(nx: int, ny: int, nz: int) -> dict:
    """Rodinia's chip (16 mm square, 0.5 mm thick) and silicon constants, as float32."""
    t_chip, height, width = 0.0005, 0.016, 0.016
    k_si, spec_heat_si, factor_chip, max_pd, precision = 100.0, 1.75e6, 0.5, 3.0e6, 0.001
    dx, dy, dz = height / nx, width / ny, t_chip / nz
    cap = factor_chip * spec_heat_si * t_chip * dx * dy
    rx = dy / (2.0 * k_si * t_chip * dx)
    ry = dx / (2.0 * k_si * t_chip * dy)
    rz = dz / (k_si * dx * dy)
    dt = precision / (max_pd / (factor_chip * t_chip * spec_heat_si))
    sdc = dt / cap
    ce = cw = sdc / rx
    cn = cs = sdc / ry
    ct = cb = sdc / rz
    cc = 1.0 - (2.0 * ce + 2.0 * cn + 3.0 * ct)
    f = np.float32
    return dict(ce=f(ce), cw=f(cw), cn=f(cn), cs=f(cs), ct=f(ct), cb=f(cb), cc=f(cc),
                step_div_cap=f(sdc), amb=f(AMB))


def inputs(rng, nx: int = 512, ny: int = 512, nz: int = 8) -> list:
    n = nx * ny * nz
    temp = (320.0 + 20.0 * rng.random(n)).astype(np.float32)
    # the power term moves a cell by up to ~0.5 K a step, as Rodinia's power files do
    k = coefficients(nx, ny, nz)
    power = (rng.random(n) * (0.5 / float(k["step_div_cap"]))).astype(np.float32)
    return [power, temp, np.zeros(n, np.float32), np.int32(nx), np.int32(ny), np.int32(nz),
            *k.values()]


def launch(args):
    return (cdiv(int(args[3]), BLOCK[0]), cdiv(int(args[4]), BLOCK[1])), BLOCK


def reference(args) -> np.ndarray:
    """One step in float64, the neighbours by padding each axis with its edge."""
    p, t = args[P], args[T_IN]
    nx, ny, nz = (int(a) for a in args[3:6])
    ce, cw, cn, cs, ct, cb, cc, sdc, amb = (float(a) for a in args[6:])
    t3 = t.astype(np.float64).reshape(nz, ny, nx)
    q = np.pad(t3, 1, mode="edge")
    out = (cc * t3 + cw * q[1:-1, 1:-1, :-2] + ce * q[1:-1, 1:-1, 2:]
           + cn * q[1:-1, :-2, 1:-1] + cs * q[1:-1, 2:, 1:-1]
           + cb * q[:-2, 1:-1, 1:-1] + ct * q[2:, 1:-1, 1:-1]
           + sdc * p.astype(np.float64).reshape(nz, ny, nx) + ct * amb)
    return out.reshape(-1)


def check(expected, got) -> float:
    return step_error(expected[T_IN], expected[T_OUT], got[T_OUT])


WORKLOADS = {
    "rodinia_hotspot3d": Workload(
        hotspot3d, launch, inputs, seeded_holdout(inputs, nx=1000, ny=700, nz=11), check,
        GEVO_RELATIVE, functools.partial(inputs, nx=20, ny=9, nz=3),
        describe="Rodinia hotspot3D (hotspotOpt1), one step on 512x512x8 (held out: "
                 "1000x700x11); error: 1% of the step's largest change"),
}
