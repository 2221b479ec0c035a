"""The fuzzer's own parts: generation is deterministic, the comparison catches what it must and
forgives what it should, and the shrinker keeps a failure while it removes the rest."""
from __future__ import annotations

import numpy as np

from zymo.fuzz.generate import generate
from zymo.fuzz.grammar import ArraySpec, Program
from zymo.fuzz.run import Finding, compare, make_buffers
from zymo.fuzz.shrink import candidates


def _program(role: str, dtype: str = "f32") -> Program:
    return Program(0, 1, 32, [], [], [ArraySpec("y", dtype, 32, role)], [])


def test_generation_is_deterministic():
    for seed in range(5):
        assert generate(seed).module_source() == generate(seed).module_source()
        assert generate(seed, grad=True).module_source() == \
            generate(seed, grad=True).module_source()


def test_compare_floats_integers_and_multisets():
    program = _program("out")
    want = make_buffers(program, 1)
    got = {"y": want["y"].copy()}
    got["y"][3] = np.nextafter(got["y"][3], np.float32(9))           # one ulp: forgiven
    assert compare(program, want, got) is None
    got["y"][4] += 0.5                                                # a wrong number: caught
    assert "y[4]" in compare(program, want, got)
    nan = {"y": np.full(32, np.nan, np.float32)}
    assert compare(program, nan, {"y": nan["y"].copy()}) is None      # NaN equals NaN
    slots = _program("slots", "i32")
    a = {"y": np.arange(32, dtype=np.int32)}
    assert compare(slots, a, {"y": a["y"][::-1].copy()}) is None      # order is free
    assert compare(_program("out", "i32"), a, {"y": a["y"][::-1].copy()}) is not None


def test_shrink_candidates_are_smaller_and_valid_python():
    program = generate(3)
    source = program.module_source()
    for count, variant in enumerate(candidates(program)):
        compile(variant.module_source(), "<variant>", "exec")
        assert len(variant.module_source()) <= len(source) + 200
        if count > 40:
            break
    assert Finding("crash", 3, "cpu", "").signature() == ("crash", "cpu")


def test_two_and_three_dimensional_blocks_render_and_launch_so():
    programs = [generate(seed) for seed in range(120)]
    flat = [p for p in programs if not p.width]
    tiled = [p for p in programs if p.width and p.tiles]
    assert flat and {p.depth for p in tiled} == {1, 2}
    for program in tiled:
        source = program.kernel_source()
        width, rows, depth = program.width, program.rows, program.depth
        assert width * rows * depth == program.threads
        assert program.block == ((width, rows) if depth == 1 else (width, rows, depth))
        assert f"t = tx + {width} * (ty + {rows} * tz)" in source
        assert ("[tz, ty, tx] = " if depth > 1 else "[ty, tx] = ") in source
        assert {"block-2d" if depth == 1 else "block-3d", "shared-tile"} <= program.features()
        compile(program.module_source(), "<tiled>", "exec")
    assert all(p.block == p.threads and "zm.grid(1)" in p.kernel_source() for p in flat)


def test_the_fuzzer_finds_the_loop_vectorizer_miscompile(monkeypatch, tmp_path):
    """LLVM's loop vectorizer miscompiled the CPU backend's loops over a 2-D block's threads
    (tests/backend/test_cpu_vectorizer.py); the 1-D fuzzer never found it. With the vectorizer
    switched back on, the fuzzer must see what the hand-written reproducer sees: where this
    LLVM has the bug, seed 70045 (a 2-D block with shared tiles) is a primal mismatch."""
    from backend.test_cpu_vectorizer import _expected, _rotating

    from zymo.backend.cpu import jit
    from zymo.fuzz.run import run_one
    monkeypatch.setattr(jit, "LOOP_VECTORIZATION", True)
    a = np.random.default_rng(8).standard_normal((8, 8))
    out = np.zeros_like(a)
    _rotating(8).on("cpu")[1, (8, 8)](a, out)
    miscompiles = not np.allclose(out, _expected(a), rtol=1e-12, atol=1e-12)
    program = generate(70045)
    assert program.width and program.tiles
    outcome = run_one(program, ("interp", "cpu"), False, str(tmp_path))
    found = [f.kind for f in outcome.findings]
    assert found == (["mismatch-primal"] if miscompiles else []), (miscompiles, outcome)
    monkeypatch.setattr(jit, "LOOP_VECTORIZATION", False)
    assert not run_one(program, ("interp", "cpu"), False, str(tmp_path)).findings
