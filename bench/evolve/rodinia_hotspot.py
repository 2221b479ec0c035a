"""Rodinia's 2-D hotspot with its pyramid (`calculate_temp`, the only kernel GEVO timed) as an
evolution workload: one launch advances the chip's temperatures by `iteration` steps.

The chip is rows x cols cells (flat arrays, row-major). A step of the heat equation, per cell:

    t' = t + step/Cap (p + (t[S] + t[N] - 2 t) / Ry + (t[E] + t[W] - 2 t) / Rx + (amb - t) / Rz)

where a neighbour past an edge of the chip is the cell itself. A 16 x 16 block loads its tile
of temperatures and powers into shared memory and takes `iteration` steps there, between
barriers: the ring of cells it can still update shrinks by one per step (a cell needs its
neighbours' previous values), so after the last step only the inner (16 - 2 iteration)^2
cells are right, and those are what it writes. Blocks overlap by `iteration` cells on each
side (the halo each recomputes) and their inner squares tile the chip: a launch of
(16 - 2 h)-cell strides with h = the pyramid height. Cap, Rx, Ry, Rz and the step follow from
the chip's size as Rodinia's host computes them (`coefficients`); the sum runs in float32
(Rodinia's `2.0` literal makes C compute it in double; the result is stored as float either
way).

GEVO's tests (its hotspot profile.json): a 512 x 512 chip, pyramid heights 1, 3 and 7 with
20000, 30000 and 7000 steps, fitness the three runs' summed kernel time. The height-7 run
does most of that time: 1000 launches of 256 x 256 blocks (a stride of 2 cells), 7 steps
each, 459M block-steps against 27M (height 1: 20000 launches of 37^2 blocks) and 81M
(height 3: 10000 launches of 52^2 blocks, 3 steps); so fitness here is one launch at height 7 on
512 x 512; held out: 1003 x 1301 (not square, not a multiple of the stride) at height 3, which
also catches a variant that took the height for a constant. Rodinia reads its maps from
temp_512 and power_512, which we do not have; here they are drawn fresh per evaluation: a
floorplan of rectangular units of uniform power, each moving its cells up to
half a kelvin per step, and temperatures of 323-343 K that vary smoothly, plus half a kelvin
of noise. Error: GEVO used its default per-element relative 1% on the temperatures after
thousands of steps; one launch is evolved here, so the check is 1% of the launch's largest
change (rodinia_common.step_error), which a variant that drops the power term, the ambient
term or a step fails (tests/evolve/test_rodinia_hotspot.py).
"""
from __future__ import annotations

import functools

import numpy as np

import zymo as zm

from .rodinia_common import GEVO_RELATIVE, cdiv, seeded_holdout, step_error
from .workloads import Workload

B = 16            # Rodinia's BLOCK_SIZE
AMB = 80.0        # ambient temperature, as the kernel has it

# argument positions
ITERATION, POWER, T_SRC, T_DST, COLS, ROWS = range(6)
CAP, RX, RY, RZ, STEP = range(8, 13)


@zm.kernel
def calculate_temp(iteration, power, temp_src, temp_dst, grid_cols, grid_rows, border_cols,
                   border_rows, cap, rx, ry, rz, step, time_elapsed):
    temp_on = zm.shared.array((B, B), zm.f32)
    power_on = zm.shared.array((B, B), zm.f32)
    temp_t = zm.shared.array((B, B), zm.f32)
    amb_temp = zm.f32(AMB)
    tx = zm.threadIdx.x
    ty = zm.threadIdx.y
    step_div_cap = step / cap
    rx_1 = zm.f32(1.0) / rx
    ry_1 = zm.f32(1.0) / ry
    rz_1 = zm.f32(1.0) / rz
    # each block ends with a small block of B - 2 iteration cells a side; its tile reaches
    # `border` cells past that on each side
    small_rows = B - iteration * 2
    small_cols = B - iteration * 2
    blk_y = small_rows * zm.blockIdx.y - border_rows
    blk_x = small_cols * zm.blockIdx.x - border_cols
    blk_ymax = blk_y + B - 1
    blk_xmax = blk_x + B - 1
    yidx = blk_y + ty
    xidx = blk_x + tx
    index = grid_cols * yidx + xidx
    if 0 <= yidx <= grid_rows - 1 and 0 <= xidx <= grid_cols - 1:
        temp_on[ty, tx] = temp_src[index]
        power_on[ty, tx] = power[index]
    zm.syncthreads()
    # the part of the tile on the chip; a neighbour past it is the cell itself
    valid_ymin = -blk_y if blk_y < 0 else 0
    valid_ymax = B - 1 - (blk_ymax - grid_rows + 1) if blk_ymax > grid_rows - 1 else B - 1
    valid_xmin = -blk_x if blk_x < 0 else 0
    valid_xmax = B - 1 - (blk_xmax - grid_cols + 1) if blk_xmax > grid_cols - 1 else B - 1
    n = max(ty - 1, valid_ymin)
    s = min(ty + 1, valid_ymax)
    w = max(tx - 1, valid_xmin)
    e = min(tx + 1, valid_xmax)
    computed = False
    for i in range(iteration):
        computed = False
        if (i + 1 <= tx <= B - i - 2 and i + 1 <= ty <= B - i - 2
                and valid_xmin <= tx <= valid_xmax and valid_ymin <= ty <= valid_ymax):
            computed = True
            here = temp_on[ty, tx]
            temp_t[ty, tx] = here + step_div_cap * (
                power_on[ty, tx]
                + (temp_on[s, tx] + temp_on[n, tx] - zm.f32(2.0) * here) * ry_1
                + (temp_on[ty, e] + temp_on[ty, w] - zm.f32(2.0) * here) * rx_1
                + (amb_temp - here) * rz_1)
        zm.syncthreads()
        if i == iteration - 1:
            break
        if computed:
            temp_on[ty, tx] = temp_t[ty, tx]
        zm.syncthreads()
    # after the last step only the small block's cells were computed
    if computed:
        temp_dst[index] = temp_t[ty, tx]


def coefficients(rows: int, cols: int) -> dict:
    """Rodinia's chip (16 mm square, 0.5 mm thick) and silicon constants, as its host computes
    them (in double, stored as float)."""
    t_chip, chip_height, chip_width = 0.0005, 0.016, 0.016
    k_si, spec_heat_si, factor_chip, max_pd, precision = 100.0, 1.75e6, 0.5, 3.0e6, 0.001
    f = np.float32
    grid_height, grid_width = float(f(chip_height / rows)), float(f(chip_width / cols))
    cap = factor_chip * spec_heat_si * t_chip * grid_width * grid_height
    rx = grid_width / (2.0 * k_si * t_chip * grid_height)
    ry = grid_height / (2.0 * k_si * t_chip * grid_width)
    rz = t_chip / (k_si * grid_height * grid_width)
    step = precision / (max_pd / (factor_chip * t_chip * spec_heat_si))
    return dict(cap=f(cap), rx=f(rx), ry=f(ry), rz=f(rz), step=f(step))


def _floorplan(rng, rows: int, cols: int, top: float) -> np.ndarray:
    """Power: rectangular units (cuts at random rows and columns) of uniform density in
    [0, top), a few of them idle."""
    cut_r = np.sort(rng.choice(np.arange(1, rows), min(rows - 1, 6), replace=False))
    cut_c = np.sort(rng.choice(np.arange(1, cols), min(cols - 1, 6), replace=False))
    density = rng.random((cut_r.size + 1, cut_c.size + 1)) * top
    density[rng.random(density.shape) < 0.2] = 0.0
    unit_r = np.searchsorted(cut_r, np.arange(rows), side="right")
    unit_c = np.searchsorted(cut_c, np.arange(cols), side="right")
    return density[unit_r[:, None], unit_c[None, :]]


def _temperatures(rng, rows: int, cols: int) -> np.ndarray:
    y = np.linspace(0.0, 1.0, rows)[:, None]
    x = np.linspace(0.0, 1.0, cols)[None, :]
    fy, fx = rng.uniform(1.0, 3.0, 2)
    py, px = rng.uniform(0.0, 2 * np.pi, 2)
    smooth = 0.5 + 0.25 * (np.sin(2 * np.pi * fy * y + py) + np.cos(2 * np.pi * fx * x + px))
    return 323.0 + 20.0 * smooth + 0.5 * rng.random((rows, cols))


def inputs(rng, rows: int = 512, cols: int = 512, height: int = 7) -> list:
    k = coefficients(rows, cols)
    per_step = float(k["step"]) / float(k["cap"])
    # a unit moves its cells by up to half a kelvin a step
    power = _floorplan(rng, rows, cols, 0.5 / per_step).astype(np.float32).reshape(-1)
    temp = _temperatures(rng, rows, cols).astype(np.float32).reshape(-1)
    return [np.int32(height), power, temp, np.zeros(rows * cols, np.float32), np.int32(cols),
            np.int32(rows), np.int32(height), np.int32(height), *k.values(),
            np.float32(0.001)]


def launch(args):
    small = B - 2 * int(args[ITERATION])
    return (cdiv(int(args[COLS]), small), cdiv(int(args[ROWS]), small)), (B, B)


def step(t: np.ndarray, p: np.ndarray, sdc: float, rx: float, ry: float, rz: float,
         amb: float = AMB) -> np.ndarray:
    """One step of the whole chip in float64, the neighbours by padding with the edge."""
    q = np.pad(t, 1, mode="edge")
    return t + sdc * (p + (q[2:, 1:-1] + q[:-2, 1:-1] - 2.0 * t) / ry
                      + (q[1:-1, 2:] + q[1:-1, :-2] - 2.0 * t) / rx + (amb - t) / rz)


def reference(args, steps: int | None = None, power: bool = True, amb: bool = True):
    """The launch's output in float64: `iteration` steps (or `steps`); `power` and `amb` false
    drop those terms (the variants the check must reject)."""
    rows, cols = int(args[ROWS]), int(args[COLS])
    cap, rx, ry, rz, stp = (float(a) for a in args[CAP:STEP + 1])
    t = args[T_SRC].astype(np.float64).reshape(rows, cols)
    p = args[POWER].astype(np.float64).reshape(rows, cols) if power else np.zeros_like(t)
    rz = rz if amb else np.inf
    for _ in range(int(args[ITERATION]) if steps is None else steps):
        t = step(t, p, stp / cap, rx, ry, rz)
    return t.reshape(-1)


def check(expected, got) -> float:
    return step_error(expected[T_SRC], expected[T_DST], got[T_DST])


WORKLOADS = {
    "rodinia_hotspot": Workload(
        calculate_temp, launch, inputs,
        seeded_holdout(inputs, rows=1003, cols=1301, height=3), check, GEVO_RELATIVE,
        functools.partial(inputs, rows=20, cols=27, height=3),
        describe="Rodinia hotspot (calculate_temp), pyramid height 7 on 512x512 (held out: "
                 "1003x1301 at height 3); error: 1% of the launch's largest change"),
}
