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
