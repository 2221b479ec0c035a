"""The SIMCoV step of `simcov`, written the way SIMCoV's early GPU port (the code GEVO evolved
to +29%) wrote the kernels GEVO timed, with the port's waste, for the evolutionary optimizer.

The model, the inputs, the NumPy reference, the check and the launch (a grid-stride loop, 8
blocks x 256 threads) are `simcov`'s, imported from bench/evolve/simcov.py; the step's outputs
are the same to the bit. What differs is how the kernel gets them. Each pattern below is in
GEVO's copy of the port (lioujheyu/gevo, benchmark/simcovGPU/src/tissue_ptx.cu; see
bench/evolve/simcov.md for the sources and for which of them GEVO's edits removed):

- Neighbour sums through memory. `device_accumulate` sums each point's neighbours into fields
  of the point's record in global memory (`nb_virions`, `nb_chemokine`), one load and one store
  per neighbour, and `device_spread_chemokine` / `device_update_virions` read them back. Here
  the record's fields are the scratch array `near[point, field]` (launch argument NEAR).
- Two passes where one would do. `device_accumulate` walks the stencil twice, once for the
  virions and once for the chemokine, each time decomposing the point into coordinates inside
  the neighbour loop.
- A 3-D stencil on a 2-D tissue. The offsets are read from global tables (`loop_x`, `loop_y`,
  `loop_z`, 26 entries: the 3 x 3 x 3 block less its centre) for every neighbour, and checked
  against the bounds of all three dimensions, though the tissue is one layer deep: 18 of the 26
  fail the z test at every point. Here the table is the launch argument STENCIL, in the port's
  order, so the 8 in-plane neighbours are summed in `simcov`'s order.
- The accumulators zeroed twice. `device_accumulate` zeroes `nb_virions` and `nb_chemokine`
  before summing into them, and the kernels that consume them zero them again after use, for
  the next step. GEVO's evolved SIMCoV deletes the second zeroing of each (the cuts U1342 and
  U1375 that the authors marked in tissue_ptx_md.cu); its other accumulate edit fuses the two
  stencil passes into one.
- Neighbour lists stored per point and copied to scratch. Each point's record holds its list
  of neighbours (`neighborhood[27]`, built once at set-up); `device_set_move_tcells` copies it
  into a heap buffer (`malloc` per T cell per step) and picks entries of the copy at random.
  Here the list is NEIGHBORHOOD[point, direction] (-1 off the grid, so that a direction means
  what it means in `simcov`), copied into a local array by every T cell that tries to move,
  and the gathered arrivals read a point's neighbours from the list too.
- Per-point atomics for the counts. `device_reduce_values` does an atomicAdd per point into
  global counters for every cell status and T cell. The float totals keep `simcov`'s block
  tree: the port's float atomic per point makes the original's run-to-run spread larger than
  the check tolerates at the held-out size (`simcov`'s docstring has the measurement).

Integer outputs are exact on every backend and the fields match `simcov`'s bit for bit: the
neighbour sums start at 0 and add the same 8 values in the same order (a store to memory
between adds rounds nothing in float32), and the update is `simcov`'s arithmetic.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import zymo as zm

from . import simcov as sc
from .simcov import (APOPTOTIC, BINDING, BINDING_PERIOD, CELL_FIELDS, CHEMOKINE,
                     CHEMOKINE_PRODUCTION, EPI, EXPRESSING, INFECT, KEEP_CHEMOKINE,
                     KEEP_VIRIONS, MAX_CHEMOKINE, MIN_CONCENTRATION, MOVE, SHARE_CHEMOKINE,
                     SHARE_VIRIONS, SURVIVE_CHEMOKINE, SURVIVE_VIRIONS, TCELL, TCELLS,
                     TISSUE_TIME, VIRION_PRODUCTION, VIRIONS, draw, launch, next_epicell, stream,
                     wanders)
from .workloads import Workload
from zymo.genome import Delete, Move
from zymo.genome.edits import Rewire
from zymo.genome.ids import ref_of
from zymo.ir.traits import WritesMemory

# positions of the launch arguments after `simcov`'s ten
NEIGHBORHOOD, NEAR, STENCIL = range(10, 13)
DIRECTIONS = 8
LAYERS = 1            # the tissue's depth: SIMCoV's dim_z of a 2-D run
# SIMCoV's setup_stencil: the 3 x 3 x 3 block less its centre, x slowest, z fastest
STENCIL_OFFSETS = np.array([(dx, dy, dz) for dx in (-1, 0, 1) for dy in (-1, 0, 1)
                            for dz in (-1, 0, 1) if (dx, dy, dz) != (0, 0, 0)], np.int32)


# ---- device code -------------------------------------------------------------------------------
@zm.func
def target(fields, neighborhood, q, move):
    """Where the T cell at q tries to go (-1: it stays), from a scratch copy of q's stored
    neighbour list (the port's per-T-cell malloc and copy)."""
    listed = zm.local.array(DIRECTIONS, zm.i32)
    for j in range(DIRECTIONS):
        listed[j] = neighborhood[q, j]
    h = draw(move, q)
    r = listed[zm.i32(h >> 29)]
    if r < 0 or fields[r, CHEMOKINE] < fields[q, CHEMOKINE]:
        r = listed[zm.i32((h >> 26) & 7)]
    return r


@zm.func
def arrival(cells, fields, neighborhood, r, move):
    """The point whose T cell moves into r: the smallest of r's listed neighbours whose T cell
    chose r, if r is empty; else -1."""
    if cells[r, TCELL] >= 0:
        return -1
    for d in range(DIRECTIONS):
        q = neighborhood[r, d]
        if q >= 0 and wanders(cells, q) and target(fields, neighborhood, q, move) == r:
            return q
    return -1


@zm.func
def next_tcell(cells, fields, neighborhood, p, move):
    """(id, tissue time, binding time, binds) of the T cell on p at t + 1 (`simcov`'s rule)."""
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
            r = target(fields, neighborhood, p, move)
            if r >= 0 and arrival(cells, fields, neighborhood, r, move) == p:
                tcell = -1
    else:
        q = arrival(cells, fields, neighborhood, p, move)
        if q >= 0:
            tcell = cells[q, TCELL]
            tissue = cells[q, TISSUE_TIME] - 1
            binding = 0
    if tcell < 0:
        tissue = 0
        binding = 0
    return tcell, tissue, binding, binds


@zm.func
def in_bounds(u, v, w, nx, ny):
    return u >= 0 and u < nx and v >= 0 and v < ny and w >= 0 and w < LAYERS


@zm.kernel
def simcov_gevo_step(cells, fields, nx, ny, seed, step, cells_out, fields_out, totals, counts,
                     neighborhood, near, stencil):
    infect = stream(seed, step, INFECT)
    move = stream(seed, step, MOVE)
    virions = 0.0
    chemokine = 0.0
    for p in range(zm.grid(1), nx * ny, zm.gridsize(1)):
        # T cells and epithelial cells
        tcell, tissue, binding, binds = next_tcell(cells, fields, neighborhood, p, move)
        epi = cells[p, EPI]
        status, incubation, expression, apoptosis = next_epicell(
            cells, p, fields[p, VIRIONS], binds, draw(infect, p))
        # device_accumulate: the virions' pass, then the chemokine's
        near[p, VIRIONS] = 0.0
        for j in range(stencil.shape[0]):
            z = p // (nx * ny)
            x = p % (nx * ny) // ny
            y = p % ny
            u = x + stencil[j, 0]
            v = y + stencil[j, 1]
            w = z + stencil[j, 2]
            if in_bounds(u, v, w, nx, ny):
                near[p, VIRIONS] += fields[(w * nx + u) * ny + v, VIRIONS]
        near[p, CHEMOKINE] = 0.0
        for j in range(stencil.shape[0]):
            z = p // (nx * ny)
            x = p % (nx * ny) // ny
            y = p % ny
            u = x + stencil[j, 0]
            v = y + stencil[j, 1]
            w = z + stencil[j, 2]
            if in_bounds(u, v, w, nx, ny):
                near[p, CHEMOKINE] += fields[(w * nx + u) * ny + v, CHEMOKINE]
        # device_update_virions and device_spread_chemokine: read the sums, reset them
        nv = (KEEP_VIRIONS * fields[p, VIRIONS] + SHARE_VIRIONS * near[p, VIRIONS]) \
            * SURVIVE_VIRIONS
        nc = (KEEP_CHEMOKINE * fields[p, CHEMOKINE] + SHARE_CHEMOKINE * near[p, CHEMOKINE]) \
            * SURVIVE_CHEMOKINE
        near[p, VIRIONS] = 0.0
        near[p, CHEMOKINE] = 0.0
        if epi == EXPRESSING:
            nv += VIRION_PRODUCTION
        if epi == EXPRESSING or epi == APOPTOTIC:
            nc += CHEMOKINE_PRODUCTION
        nc = min(nc, MAX_CHEMOKINE)
        nv = nv if nv >= MIN_CONCENTRATION else 0.0
        nc = nc if nc >= MIN_CONCENTRATION else 0.0
        cells_out[p, EPI] = status
        cells_out[p, sc.INCUBATION] = incubation
        cells_out[p, sc.EXPRESSION] = expression
        cells_out[p, sc.APOPTOSIS] = apoptosis
        cells_out[p, TCELL] = tcell
        cells_out[p, TISSUE_TIME] = tissue
        cells_out[p, BINDING] = binding
        fields_out[p, VIRIONS] = nv
        fields_out[p, CHEMOKINE] = nc
        # device_reduce_values: an atomic per point and counter
        zm.atomic.add(counts, status, 1)
        if tcell >= 0:
            zm.atomic.add(counts, TCELLS, 1)
        virions += nv
        chemokine += nc
    sc.add_block_totals(totals, virions, chemokine)


# ---- inputs and reference: `simcov`'s, with the port's set-up tables ---------------------------
_tables: dict = {}


def neighborhood_of(nx: int, ny: int) -> np.ndarray:
    """(points, 8) int32: each point's neighbour in each direction, -1 off the grid (SIMCoV's
    setup_grid_points stores this list in every point's record); cached by grid."""
    if (nx, ny) not in _tables:
        _tables[nx, ny] = np.ascontiguousarray(sc.neighbours(nx, ny).T.astype(np.int32))
    return _tables[nx, ny]


def ported(args: list) -> list:
    """`simcov`'s launch arguments with the port's: the stored neighbour lists, the zeroed
    neighbour sums and the stencil table."""
    nx, ny = args[sc.NX], args[sc.NY]
    assert len(args[sc.CELLS]) == nx * ny * LAYERS and args[sc.CELLS].shape[1] == CELL_FIELDS
    return list(args[:10]) + [neighborhood_of(nx, ny).copy(),
                              np.zeros((nx * ny, 2), np.float32), STENCIL_OFFSETS.copy()]


def inputs(rng: np.random.Generator) -> list:
    return ported(sc.inputs(rng))


def holdout(rng: np.random.Generator | None = None) -> list:
    return ported(sc.holdout(rng))


def small_inputs(rng: np.random.Generator) -> list:
    return ported(sc.small_inputs(rng))


def reference(args) -> list:
    """The arguments after one step: `simcov`'s reference, the port's tables unchanged and the
    neighbour sums reset to zero, as the port leaves them."""
    out = sc.reference(args[:10])
    return out + [args[NEIGHBORHOOD].copy(), np.zeros_like(args[NEAR]), args[STENCIL].copy()]


check = sc.check     # the outputs are `simcov`'s; the scratch sums are not an output


def tolerance(backend: str) -> float:
    return sc.measured_tolerance(simcov_gevo_step, backend, inputs, small_inputs)


WORKLOADS = {
    "simcov_gevo": Workload(
        kernel=simcov_gevo_step, launch=launch, inputs=inputs, holdout=holdout, check=check,
        tolerance=tolerance, race_check=small_inputs,
        describe="the SIMCoV step of `simcov` written as SIMCoV's early GPU port (the one GEVO "
                 "evolved): neighbour sums through global memory in two 3-D stencil passes, "
                 "accumulators zeroed twice, stored neighbour lists copied to scratch, "
                 "per-point atomics for the counts; 100 x 100 (held out: 2500 x 2500), "
                 "8 x 256 grid-stride launch"),
}


# ---- GEVO's SIMCoV edits, as edit lists on this kernel --------------------------------------
def gevo_edits(base) -> dict[str, list]:
    """The edits GEVO's evolved SIMCoV made to device_accumulate and device_spread_chemokine
    (tissue_ptx_md.cu), as zymo edits on `base` (the kernel's optimized IR with stable ids,
    `zymo.runtime.evolution.variant.base_ir`): "resets", the second zeroing of each neighbour
    sum deleted (two Delete edits, GEVO's cuts U1342 and U1375); "fusion", the chemokine's
    stencil pass merged into the virions' (its zeroing and its accumulation moved into the
    first pass, their operands rewired to the first pass's values, the emptied second loop
    deleted: GEVO's cut U1528 with "many many more")."""
    zeroings = {field: _lines(f"near[p, {field}] = 0.0") for field in ("VIRIONS", "CHEMOKINE")}
    passes = [_op_at(base, line, regions=True) for line in _lines(_PASS)]
    resets = [Delete(f"reset{k}", _op_at(base, lines[1]).id)
              for k, lines in enumerate(zeroings.values())]
    first, second = (loop.regions[0].block for loop in passes)
    accumulate = next(op for op in second.ops if op.regions)
    rewires = []
    for op in accumulate.walk():
        for index, value in enumerate(op.operands):
            same = _counterpart(value, second, first)
            if same is not None:
                rewires.append(Rewire(f"{op.id}@fuse1", index, ref_of(same)))
    fusion = [Move("fuse0", _op_at(base, zeroings["CHEMOKINE"][0]).id, passes[0].id),
              Move("fuse1", accumulate.id, first.ops[-1].id, tuple(rewires)),
              Delete("fuse2", passes[1].id)]
    return {"resets": resets, "fusion": fusion}


_PASS = "for j in range(stencil.shape[0]):"


def _lines(text: str) -> list[int]:
    """The lines of this module's source that hold `text` alone."""
    source = Path(__file__).read_text().splitlines()
    return [k + 1 for k, line in enumerate(source) if line.strip() == text]


def _op_at(module, line: int, regions: bool = False):
    """The op of `module` made from source line `line`: the one with regions (a loop), or the
    one that writes memory (a store)."""
    return next(op for op in module.walk() if op.loc.line == line
                and (bool(op.regions) if regions else op.has_trait(WritesMemory)))


def _counterpart(value, block, twin):
    """The value of `twin` (a block made of the same ops as `block`) at `value`'s place in
    `block`, or None if `value` is not defined in `block` itself."""
    if value in block.args:
        return twin.args[block.args.index(value)]
    owner = getattr(value, "owner", None)
    if owner is None or owner.parent is not block:
        return None
    return twin.ops[block.ops.index(owner)].results[value.index]


def main(argv=None) -> None:
    """Times GEVO's edit lists (`gevo_edits`) against the original, side by side on the same
    inputs: `python -m bench.evolve.simcov_gevo --backend cuda`."""
    import argparse

    from zymo.runtime.evolution.timing import time_side_by_side
    from zymo.runtime.evolution.variant import base_ir
    from zymo.runtime.kernel import param_of_arg
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--backend", default="cpu")
    backend = parser.parse_args(argv).backend
    args = inputs(np.random.default_rng(0))
    edits = gevo_edits(base_ir(simcov_gevo_step, [param_of_arg(a) for a in args]))
    edits["both"] = edits["resets"] + edits["fusion"]
    for name, edit_list in edits.items():
        original, variant = time_side_by_side(simcov_gevo_step, tuple(edit_list), inputs,
                                              launch, 0, backend)
        print(f"{name}: original {original * 1e3:.4f} ms, variant {variant * 1e3:.4f} ms, "
              f"{original / variant:.2f}x")


if __name__ == "__main__":
    main()
