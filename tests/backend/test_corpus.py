"""Run every corpus kernel on every backend against its NumPy reference, and the backends
against each other."""
from __future__ import annotations

import copy
import zlib

import numpy as np
import pytest

from corpus import ALL_CASES

BACKENDS = ("interp", "cpu")


def _seed(case) -> int:
    return zlib.crc32(case.name.encode())


def _launch(case, backend: str, seed: int) -> tuple[list, list]:
    """(arguments before the launch, the same arguments after it)."""
    args = case.make_args(np.random.default_rng(seed))
    before = copy.deepcopy(args)
    case.kernel.on(backend)[case.grid, case.block](*args)
    return before, args


def _assert_close(got, want, case, what: str) -> None:
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol, equal_nan=True,
                                   err_msg=what)


def _array_indices(args: list) -> list[int]:
    return [k for k, a in enumerate(args) if isinstance(a, np.ndarray)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ALL_CASES, ids=lambda case: case.name)
def test_case_matches_reference(case, backend):
    before, after = _launch(case, backend, _seed(case))
    expected = case.reference(copy.deepcopy(before))
    assert expected, f"{case.name}: the reference names no output"
    for k, want in expected.items():
        _assert_close(after[k], want, case, f"{case.name} on {backend}: argument {k}")
    for k in _array_indices(after):
        if k not in expected:  # inputs must come back untouched
            np.testing.assert_array_equal(after[k], before[k],
                                          err_msg=f"{case.name} on {backend}: input {k} changed")


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda case: case.name)
def test_backends_agree(case):
    seed = _seed(case) + 1  # other data than the reference test
    results = {backend: _launch(case, backend, seed)[1] for backend in BACKENDS}
    first, *others = BACKENDS
    for other in others:
        for k in _array_indices(results[first]):
            _assert_close(results[other][k], results[first][k], case,
                          f"{case.name}: argument {k}, {other} vs {first}")


def test_corpus_is_well_formed():
    names = [case.name for case in ALL_CASES]
    assert len(names) == len(set(names)), "case names must be unique"
    assert len({id(case.kernel) for case in ALL_CASES}) >= 45
    for case in ALL_CASES:
        a = case.make_args(np.random.default_rng(0))
        b = case.make_args(np.random.default_rng(0))
        for x, y in zip(a, b):
            if isinstance(x, np.ndarray):
                assert x.dtype == y.dtype
                np.testing.assert_array_equal(x, y, err_msg=f"{case.name}: make_args not seeded")
        frozen = copy.deepcopy(a)
        expected = case.reference(a)
        assert set(expected) <= set(_array_indices(a)), f"{case.name}: reference names a non-array"
        for x, y in zip(a, frozen):
            if isinstance(x, np.ndarray):
                np.testing.assert_array_equal(x, y, err_msg=f"{case.name}: reference mutated args")
