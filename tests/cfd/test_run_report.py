"""bench/cfd/run.py's comparison of automatic and hand-differentiated variants (no GPU: the
report is built from median times)."""
from __future__ import annotations

from bench.cfd import run

EDGES = 5_970_033
PEAK = 3350.0


def _rows(lines):
    return {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| ")}


def test_best_automatic_is_compared_with_the_hand_kernel_of_its_strategy():
    medians = {"hand_1": 7.5, "hand_1_merged_r168": 3.45, "dn1_10_runs": 3.3,
               "hand_10_runs": 3.6, "dn1_10": 4.4, "hand_10": 4.0}
    rows = _rows(run.like_against_like(medians, EDGES, PEAK))
    assert "hand_1 7.500 ms" in rows["best automatic vs hand_1 (one thread per edge)"]
    assert rows["best automatic vs best hand"].endswith(f"| {3.3 / 3.45:.3f}x |")
    same = rows["best automatic vs hand with the same strategy"]
    assert "dn1_10_runs 3.300 ms" in same and "hand_10_runs 3.600 ms" in same
    assert same.endswith(f"| {3.3 / 3.6:.3f}x |")
    assert rows["same strategy"].endswith(f"| {4.4 / 4.0:.3f}x |")
    # modelled DRAM share: 720 B per edge in 3.3 ms
    share = 100 * EDGES * run.BYTES_PER_EDGE / 3.3e-3 / 1e9 / PEAK
    assert f"dn1_10_runs 3.300 ms, {share:.0f}%" in same


def test_the_dram_target_and_a_missing_twin_are_stated():
    lines = run.like_against_like({"hand_1": 7.5, "dn1_10_runs": 3.3}, EDGES, PEAK)
    assert "not timed (--variants hand_10_runs)" in \
        _rows(lines)["best automatic vs hand with the same strategy"]
    target = next(line for line in lines if line.startswith("DRAM target"))
    assert ">= 60%" in target and "(dn1_10_runs): MISSED" in target
    assert run.like_against_like({"dn1_10": 4.4}, EDGES, PEAK) == []
