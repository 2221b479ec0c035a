"""The Smith-Waterman workload of the evolutionary optimizer: the NumPy reference against a plain
dynamic program, and both ADEPT-style kernels (V0 naive, V1 tuned) against the reference on the
CPU backend and on the race-checking interpreter."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.evolve import smith_waterman as sw  # noqa: E402
from bench.evolve.sw_data import (  # noqa: E402
    MAX_QUERY_LEN, QUERY_LEN, REF_LEN, make_pairs, pack_pairs, subset,
)

# pairs a random generator rarely makes: no positive cell, a one-base query, a query longer
# than its reference, gaps of one and two bases, a run of equal-scoring cells
EDGE_PAIRS = [
    ("AAAAAAAA", "CCCCCCCCCCCC"),
    ("G", "TTGTT"),
    ("ACGTTGCAACGTACGGTACA", "CGTTGCA"),
    ("A" * 10 + "C" * 10, "TT" + "A" * 10 + "G" + "C" * 10 + "TT"),
    ("A" * 10 + "C" * 10, "A" * 10 + "GT" + "C" * 10),
    ("ACACACACAC", "ACACACACACACACACACACAC"),
]


def python_dp(q, r):
    """Score, q_end, r_end by the textbook O(n*m) recurrence over the whole matrix."""
    n, m = len(q), len(r)
    neg = -10**9
    H = [[0] * (m + 1) for _ in range(n + 1)]
    E = [[neg] * (m + 1) for _ in range(n + 1)]
    F = [[neg] * (m + 1) for _ in range(n + 1)]
    best = (0, -1, -1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            E[i][j] = max(E[i][j - 1] + sw.GAP_EXTEND, H[i][j - 1] + sw.GAP_OPEN)
            F[i][j] = max(F[i - 1][j] + sw.GAP_EXTEND, H[i - 1][j] + sw.GAP_OPEN)
            s = sw.MATCH if q[i - 1] == r[j - 1] else sw.MISMATCH
            H[i][j] = max(0, H[i - 1][j - 1] + s, E[i][j], F[i][j])
            score, r_end, q_end = best
            h = H[i][j]
            if h > score or (h == score and h > 0 and (j - 1, i - 1) < (r_end, q_end)):
                best = (h, j - 1, i - 1)
    score, r_end, q_end = best
    return score, q_end, r_end


def outputs(args):
    return np.stack([args[k] for k in sw.OUTPUTS], axis=1)


def test_generator_is_seeded_and_in_range():
    a = make_pairs(50, np.random.default_rng(7))
    b = make_pairs(50, np.random.default_rng(7))
    for name in ("q_seq", "q_off", "q_len", "r_seq", "r_off", "r_len"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.q_seq.dtype == np.uint8 and a.q_seq.max() <= 3 and a.r_seq.max() <= 3
    assert a.q_off.dtype == a.q_len.dtype == a.r_off.dtype == a.r_len.dtype == np.int32
    assert REF_LEN[0] <= a.r_len.min() and a.r_len.max() <= REF_LEN[1]
    assert 1 <= a.q_len.min() and a.q_len.max() <= min(QUERY_LEN[1], MAX_QUERY_LEN)
    assert a.q_off[-1] + a.q_len[-1] == len(a.q_seq) and a.r_off[-1] + a.r_len[-1] == len(a.r_seq)


def test_reference_matches_python_dp():
    rng = np.random.default_rng(11)
    pairs = make_pairs(6, rng, ref_len=(20, 120), query_len=(10, 60), unrelated=0.3)
    qs = [pairs.query(p) for p in range(len(pairs))] + [q for q, _ in EDGE_PAIRS]
    rs = [pairs.ref(p) for p in range(len(pairs))] + [r for _, r in EDGE_PAIRS]
    pairs = pack_pairs(qs, rs)
    got = np.stack(sw.reference(pairs), axis=1)
    want = [python_dp(pairs.query(p).tolist(), pairs.ref(p).tolist()) for p in range(len(pairs))]
    np.testing.assert_array_equal(got, np.array(want))


def test_gap_convention():
    # 20 matches around a gap: one base costs the opening alone, a second base one extension
    pairs = pack_pairs([q for q, _ in EDGE_PAIRS[3:5]], [r for _, r in EDGE_PAIRS[3:5]])
    scores, _, _ = sw.reference(pairs)
    assert scores.tolist() == [20 * sw.MATCH + sw.GAP_OPEN,
                               20 * sw.MATCH + sw.GAP_OPEN + sw.GAP_EXTEND]


def test_check_counts_disagreeing_pairs():
    args = sw.expected(sw.inputs(np.random.default_rng(3), n_pairs=8, ref_len=(20, 40),
                                 query_len=(10, 20)))
    assert sw.check(args, [a.copy() for a in args]) == 0.0
    got = [a.copy() for a in args]
    got[sw.R_END][2] += 1
    got[sw.SCORES][5] -= 1
    assert sw.check(args, got) == pytest.approx(2 / 8)


@pytest.fixture(scope="module")
def cpu_case():
    args = sw.inputs(np.random.default_rng(2024), n_pairs=40)
    edge = sw.pair_args(pack_pairs([q for q, _ in EDGE_PAIRS], [r for _, r in EDGE_PAIRS]))
    return args, edge


@pytest.fixture(scope="module")
def cpu_results(cpu_case):
    results = {}
    for name, kernel in sw.KERNELS.items():
        results[name] = []
        for args in cpu_case:
            got = [a.copy() for a in args]
            kernel[sw.launch_config(got)](*got)
            results[name].append(got)
    return results


@pytest.mark.parametrize("name", list(sw.KERNELS))
def test_kernel_matches_reference_on_cpu(cpu_case, cpu_results, name):
    for args, got in zip(cpu_case, cpu_results[name]):
        want = sw.expected(args)
        np.testing.assert_array_equal(outputs(got), outputs(want))
        assert sw.check(want, got) == 0.0


def test_v0_and_v1_agree(cpu_results):
    for v0, v1 in zip(cpu_results["v0"], cpu_results["v1"]):
        assert sw.check(v0, v1) == 0.0


@pytest.mark.parametrize("name", list(sw.KERNELS))
def test_kernel_is_race_free_on_interpreter(name):
    # queries of 33-70 bases span two or three warps, so the per-warp hand-over is exercised
    pairs = make_pairs(3, np.random.default_rng(5), ref_len=(40, 90), query_len=(33, 70))
    qs = [pairs.query(p) for p in range(len(pairs))] + [EDGE_PAIRS[0][0], EDGE_PAIRS[2][0]]
    rs = [pairs.ref(p) for p in range(len(pairs))] + [EDGE_PAIRS[0][1], EDGE_PAIRS[2][1]]
    args = sw.pair_args(pack_pairs(qs, rs))
    sw.KERNELS[name].on("interp")[sw.launch_config(args)](*args)
    np.testing.assert_array_equal(outputs(args), outputs(sw.expected(args)))


def test_cached_pairs_are_the_generated_pairs(tmp_path, monkeypatch):
    from bench.evolve.sw_data import cached_pairs
    monkeypatch.setenv("ZYMO_SW_CACHE", str(tmp_path))
    first = cached_pairs(30, [30, 5])
    assert len(list(tmp_path.glob("*.npz"))) == 1
    again = cached_pairs(30, [30, 5])           # from disk
    fresh = make_pairs(30, np.random.default_rng([30, 5]))
    for name in ("q_seq", "q_off", "q_len", "r_seq", "r_off", "r_len"):
        np.testing.assert_array_equal(getattr(again, name), getattr(fresh, name))
        np.testing.assert_array_equal(getattr(first, name), getattr(fresh, name))


def _v0_clearing_loops():
    """V0's three per-diagonal clearing loops and the diagonal loop around them, by op id."""
    from zymo.runtime.evolution.variant import base_ir
    from zymo.runtime.kernel import param_of_arg
    args = sw.small_inputs_v0(np.random.default_rng(0))
    base = base_ir(sw.sw_v0, [param_of_arg(a) for a in args])
    loops = [op for op in base.kernel.walk() if op.name == "control.for"]
    diagonal = next(op for op in loops if sum(1 for inner in op.walk()
                                              if inner.name == "control.for") == 5)
    clears = [op for op in diagonal.regions[0].block.ops if op.name == "control.for"][:3]
    return diagonal.id, [op.id for op in clears]


def _interpreted(edits):
    from zymo.runtime.evolution.screening import interpreted
    from zymo.runtime.evolution.validation import Task
    return interpreted(Task(sw.sw_v0, tuple(edits), sw.small_inputs_v0, sw.check,
                            sw.launch_config, 3, "interp"))


def test_v0_clearings_hoisted_out_of_the_diagonal_loop_pass_the_race_check():
    # GEVO's V0 result in three edits: every array cleared once, not on every diagonal
    from zymo.genome import Move
    diagonal, clears = _v0_clearing_loops()
    verdict = _interpreted([Move(f"m{k}", c, diagonal) for k, c in enumerate(clears)])
    assert verdict.valid and verdict.error == 0.0, verdict.reason


def test_v0_variant_reading_uncleared_shared_memory_fails_the_race_check():
    # F never cleared: the result then depends on what shared memory held before the launch
    # (a GPU leaves the last kernel's values there, which may serve); the interpreter's check
    # runs the variant from two patterns of uninitialised memory and sees the difference
    from zymo.genome import Delete, Move
    diagonal, clears = _v0_clearing_loops()
    edits = [Move("m0", clears[0], diagonal), Move("m1", clears[1], diagonal),
             Delete("d2", clears[2])]
    verdict = _interpreted(edits)
    assert not verdict.valid and "nothing wrote" in verdict.reason, verdict


def test_v1_shuffle_with_an_empty_mask_fails_the_race_check():
    # found by a search on an H100 (1.02x alone): `shfl_up_sync(0, h, 1)` gave the hoped-for
    # value there, but CUDA leaves a shuffle whose mask leaves out its caller undefined
    from zymo.genome import Operand
    from zymo.runtime.evolution.screening import interpreted
    from zymo.runtime.evolution.validation import Task
    from zymo.runtime.evolution.variant import base_ir
    from zymo.runtime.kernel import param_of_arg
    args = sw.small_inputs(np.random.default_rng(0))
    base = base_ir(sw.sw_v1, [param_of_arg(a) for a in args])
    shuffle = next(op for op in base.kernel.walk() if op.name == "warp.shfl_up")
    verdict = interpreted(Task(sw.sw_v1, (Operand("o0", shuffle.id, 0, ("c", "u32", 0)),),
                               sw.small_inputs, sw.check, sw.launch_config, 3, "interp"))
    assert not verdict.valid and verdict.reason.startswith("WarpSyncError"), verdict
    assert "its own lane 0 is not in the mask 0x00000000" in verdict.reason


def test_a_subset_packs_the_picked_pairs_in_order():
    pairs = make_pairs(40, np.random.default_rng(8), ref_len=(5, 60), query_len=(1, 30))
    pick = np.array([3, 4, 17, 18, 39, 0])
    got = subset(pairs, pick)
    want = pack_pairs([pairs.query(p) for p in pick], [pairs.ref(p) for p in pick])
    for name in ("q_seq", "q_off", "q_len", "r_seq", "r_off", "r_len"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
        assert getattr(got, name).dtype == getattr(want, name).dtype, name
