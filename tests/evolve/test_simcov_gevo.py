"""simcov_gevo, the SIMCoV step written as SIMCoV's early GPU port: it computes `simcov`'s step
(the NumPy reference, on the CPU backend and on the race-checking interpreter), and the waste
GEVO's evolved SIMCoV removed from the port's accumulate kernels is removable by edit lists the
genome expresses, each variant still valid."""
from __future__ import annotations

import numpy as np

from rodinia_helpers import on_cpu
from bench.evolve import simcov as sc
from bench.evolve import simcov_gevo as sg
from zymo.genome import replay
from zymo.ir.traits import WritesMemory
from zymo.runtime.evolution.screening import interpreted
from zymo.runtime.evolution.validation import Task
from zymo.runtime.evolution.variant import VariantKernel, base_ir
from zymo.runtime.kernel import param_of_arg

WORKLOAD = sg.WORKLOADS["simcov_gevo"]


def assert_matches_reference(got, want):
    """Integer outputs and fields to the bit, totals up to the order of the block adds, and the
    neighbour sums left at zero as the port leaves them."""
    for k in (sc.CELLS_OUT, sc.COUNTS_OUT, sc.FIELDS_OUT, sg.NEAR):
        np.testing.assert_array_equal(got[k], want[k])
    np.testing.assert_allclose(got[sc.TOTALS], want[sc.TOTALS], rtol=sc.REFERENCE_TOTALS_RTOL)


def base():
    args = sg.inputs(np.random.default_rng(0))
    return base_ir(sg.simcov_gevo_step, [param_of_arg(a) for a in args])


def near_stores(module) -> int:
    return sum(1 for op in module.walk() if op.has_trait(WritesMemory)
               and op.operands[0] is module.kernel.regions[0].block.args[sg.NEAR])


def stencil_passes(module) -> int:
    return sum(1 for op in module.walk() if op.loc.line in sg._lines(sg._PASS) and op.regions)


def test_matches_reference_and_simcov_on_cpu():
    args = sg.inputs(np.random.default_rng(1))
    got = on_cpu(WORKLOAD, args)
    assert_matches_reference(got, sg.reference(args))
    plain = on_cpu(sc.WORKLOADS["simcov"], args[:10])
    for k in (sc.CELLS_OUT, sc.COUNTS_OUT, sc.FIELDS_OUT):
        np.testing.assert_array_equal(got[k], plain[k])
    assert sg.check(sg.reference(args), got) <= WORKLOAD.tolerance_on("cpu")


def test_matches_reference_on_a_crowded_oblong_grid():
    args = sg.ported(sc.make_state(23, 41, np.random.default_rng(2), tcell_density=0.1))
    assert np.count_nonzero(args[sc.CELLS][:, sc.TCELL] >= 0) > 50
    assert_matches_reference(on_cpu(WORKLOAD, args), sg.reference(args))


def test_port_tables():
    args = sg.inputs(np.random.default_rng(3))
    n = args[sc.NX] * args[sc.NY]
    assert args[sg.NEIGHBORHOOD].shape == (n, sg.DIRECTIONS)
    assert len(sg.STENCIL_OFFSETS) == 26 and (sg.STENCIL_OFFSETS[:, 2] == 0).sum() == 8
    # the in-plane offsets come in `simcov`'s order of directions
    assert [tuple(o[:2]) for o in sg.STENCIL_OFFSETS if o[2] == 0] == sc.OFFSETS
    assert not args[sg.NEAR].any()


def test_race_free_on_interpreter():
    args = sg.small_inputs(np.random.default_rng(5))
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    sg.simcov_gevo_step.on("interp")[sg.launch](*got)
    assert_matches_reference(got, sg.reference(args))
    verdict = interpreted(Task(sg.simcov_gevo_step, (), sg.small_inputs, sg.check, sg.launch, 1,
                               "interp", 1, False))
    assert verdict.valid and verdict.error == 0.0 and not verdict.reason, verdict


def validate(edits, seeds=(11, 12)) -> list:
    """The variant `edits` on the CPU, checked against the reference on fresh inputs; the
    arguments after its last launch."""
    variant = VariantKernel(sg.simcov_gevo_step, edits, "cpu")
    for seed in seeds:
        args = sg.inputs(np.random.default_rng(seed))
        got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        variant[sg.launch](*got)
        want = sg.reference(args)
        assert sg.check(want, got) <= WORKLOAD.tolerance_on("cpu")
        for k in (sc.CELLS_OUT, sc.COUNTS_OUT, sc.FIELDS_OUT):
            np.testing.assert_array_equal(got[k], want[k])
    return got


def test_the_second_zeroing_of_the_sums_is_removable():
    module = base()
    edits = sg.gevo_edits(module)["resets"]
    replayed = replay(module, edits)
    assert replayed.skipped == 0
    assert near_stores(replayed.module) == near_stores(module) - 2
    got = validate(edits)
    assert got[sg.NEAR].any()        # the sums stay behind: nothing in the step reads them


def test_the_stencil_passes_fuse():
    module = base()
    edits = sg.gevo_edits(module)["fusion"]
    replayed = replay(module, edits)
    assert replayed.skipped == 0
    assert stencil_passes(module) == 2 and stencil_passes(replayed.module) == 1
    validate(edits)
    # with the resets gone too, as GEVO's variant has them
    both = sg.gevo_edits(module)["resets"] + edits
    assert replay(module, both).skipped == 0
    validate(both, seeds=(13,))
