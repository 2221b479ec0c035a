"""The genome: stable ids across processes, mutations that always verify, deterministic replay
and JSON round trips over the whole corpus, crossover, and NSGA-II on known fronts."""
import subprocess
import sys
import zlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from corpus import ALL_CASES
from zymo.genome import (Delete, Mutator, Operand, canonicalize_ids, crossover, dumps, loads,
                         nondominated_fronts, nsga2_select, replay)
from zymo.genome.edits import check_structure
from zymo.ir.verifier import verify
from zymo.runtime.kernel import param_of_arg

CASES = [c for c in ALL_CASES if hasattr(c.kernel, "specialization_for")]
_bases: dict = {}


def base_of(case):
    if case.name not in _bases:
        args = case.make_args(np.random.default_rng(0))
        spec = case.kernel.specialization(tuple(param_of_arg(a) for a in args))
        _bases[case.name] = canonicalize_ids(spec.optimized.clone())
    return _bases[case.name]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, len(CASES) - 1), st.integers(0, 2**32 - 1))
def test_random_mutations_of_the_corpus_verify_and_replay_identically(index, seed):
    base = base_of(CASES[index])
    mutator = Mutator(base)
    rng = np.random.default_rng(seed)
    edits = []
    for k in range(25):
        edit = mutator.mutate(edits, rng, f"e{k}")
        if edit is None:
            continue
        edits.append(edit)
        replayed = replay(base, edits)
        assert replayed.skipped == 0
        assert not verify(replayed.module)
        check_structure(replayed.module)
    again = replay(base, loads(dumps(edits)))
    assert str(again.module) == str(replay(base, edits).module)
    assert loads(dumps(edits)) == edits


def test_ids_are_the_same_in_another_process():
    script = ("import numpy as np, sys; sys.path.insert(0, 'tests');"
              "from evolve.evolve_kernels import wasteful_scale, scale_inputs;"
              "from zymo.runtime.evolution.variant import base_ir;"
              "from zymo.runtime.kernel import param_of_arg;"
              "args = scale_inputs(np.random.default_rng(0));"
              "print(sorted(op.id for op in base_ir(wasteful_scale, "
              "[param_of_arg(a) for a in args]).walk()))")
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True).stdout for _ in range(2)]
    assert runs[0] == runs[1] and "21:13" in runs[0]


def test_an_edit_whose_op_is_gone_is_skipped_deterministically():
    base = base_of(CASES[0])
    target = next(op for op in base.kernel.walk() if op.parent_op is not None
                  and not op.results and op.operands and not op.regions)
    edits = [Delete("e1", target.id), Operand("e2", target.id, 0, ("c", "i32", 0))]
    replayed = replay(base, edits)
    assert replayed.applied == [True, False]


def test_crossover_gives_shared_edits_to_both_children():
    rng = np.random.default_rng(3)
    edits = [Delete(f"e{k}", f"{k}:1") for k in range(8)]
    first, second = edits[:5], edits[2:5] + edits[5:]
    for _ in range(20):
        child1, child2 = crossover(first, second, rng)
        for shared in edits[2:5]:
            assert shared in child1 and shared in child2
        rest = [e for e in child1 + child2 if e not in edits[2:5]]
        assert sorted(rest, key=lambda e: e.tag) == edits[:2] + edits[5:]
    assert crossover(first, first, rng) is None


def test_nsga2_on_known_fronts():
    points = [(1, 5), (2, 4), (3, 3), (2, 6), (4, 4), (5, 5), (1, 9)]
    fronts = nondominated_fronts(points)
    assert fronts[0] == [0, 1, 2]
    assert fronts[1] == [3, 4, 6]
    assert fronts[2] == [5]
    chosen = nsga2_select(points, 4)
    assert set(chosen[:3]) == {0, 1, 2} and chosen[3] in (3, 4, 6)
    # the extremes of a cut front survive crowding
    assert set(nsga2_select(points, 5)) == {0, 1, 2, 4, 6}


def test_every_kind_of_edit_occurs():
    kinds = set()
    for index, case in enumerate(CASES[:30]):
        mutator = Mutator(base_of(case))
        rng = np.random.default_rng(zlib.crc32(case.name.encode()))
        edits = []
        for k in range(12):
            edit = mutator.mutate(edits, rng, f"e{k}")
            if edit is not None:
                edits.append(edit)
                kinds.add(edit.kind)
    assert kinds == {"delete", "copy", "move", "replace", "swap", "operand"}


def test_unknown_edit_kind_is_named():
    with pytest.raises(ValueError, match="unknown edit kinds"):
        Mutator(base_of(CASES[0]), kinds=("cut",))


class _HoistInner:
    """A guide that picks the innermost loop and always hoists it."""

    hoist_share = 1.0

    def target(self, rng, ops):
        import zymo as zm
        loops = [op for op in ops if op.has_trait(zm.ir.traits.Loop)]
        return loops[-1]


def test_a_hoisted_loop_takes_the_bound_it_reads_along():
    import zymo as zm
    from zymo.genome import Move
    from zymo.genome.mutate import propose
    from zymo.runtime.evolution.variant import VariantKernel, base_ir
    from evolve.evolve_kernels import norm_inputs, rescale_by_norm, scale_launch
    args = norm_inputs(np.random.default_rng(0))
    base = base_ir(rescale_by_norm, [param_of_arg(a) for a in args])
    outer = next(op for op in base.kernel.walk() if op.has_trait(zm.ir.traits.Loop))
    moves = [propose(base, "move", np.random.default_rng(seed), "e1", _HoistInner())
             for seed in range(24)]
    out_of_loop = [m for m in moves if m.before == outer.id]
    # about half of the hoists carry (mutate.CARRY_SHARE), the others repair at random
    carrying = [m for m in out_of_loop if m.carried]
    assert carrying and len(carrying) < len(out_of_loop), moves
    move = carrying[0]
    ops = {op.id: op for op in base.walk()}
    # w.shape[0], read inside the bounds check, goes along; the loop's results keep their use
    assert any(ops[id].name == "memory.dim" for id in move.carried), move
    assert move.fills and move.fills[0].value[1].endswith("@e1"), move
    replayed = replay(base, [move])
    assert replayed.applied == [True] and not verify(replayed.module)
    assert loads(dumps([move])) == [move]
    expected = [a.copy() for a in args]
    got = [a.copy() for a in args]
    rescale_by_norm[scale_launch(args)](*expected)
    VariantKernel(rescale_by_norm, (move,), "cpu")[scale_launch(args)](*got)
    assert np.array_equal(expected[2], got[2]) and np.abs(got[2]).max() > 0
    # a move that carries nothing keeps the JSON form of before the field
    plain = Move("e2", move.source, move.before)
    assert "carried" not in dumps([plain]) and loads(dumps([plain])) == [plain]
