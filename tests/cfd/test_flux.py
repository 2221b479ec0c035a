"""The zymo device functions of bench/cfd/flux.py against the NumPy reference, on the CPU backend
(and the interpreter for a handful of edges)."""
from __future__ import annotations

import numpy as np
import pytest

from bench.cfd import reference as ref

from . import kernels
from .test_reference import CASES, random_states, unit_normals

BLOCK = 64


def _near_sonic(rng, count):
    """Pairs of states moving along n at 0.8-1.05 times the sound speed (rho, p in [0.5, 2],
    |u| <= 1), the right state within 3% of the left: the acoustic entropy fix fires on most."""
    n = unit_normals(rng, count)
    rho = rng.uniform(1.0, 1.9, count)
    p = rng.uniform(0.52, 0.55 * rho)  # sound speed 0.6-0.88
    speed = rng.choice([-1.0, 1.0], count) * rng.uniform(0.8, 1.05, count)
    left = np.column_stack([rho, (speed * np.sqrt(ref.GAMMA * p / rho))[:, None] * n, p])
    return left, left * rng.uniform(0.97, 1.03, left.shape), n


@pytest.fixture(scope="module")
def edges():
    """Primitive left and right states and unit normals: 200 random, 100 near-sonic, A, B, C."""
    rng = np.random.default_rng(11)
    sonic = _near_sonic(rng, 100)
    cases = [np.array(parts) for parts in zip(*CASES.values())]
    left = np.vstack([random_states(rng, 200), sonic[0], cases[0]])
    right = np.vstack([random_states(rng, 200), sonic[1], cases[1]])
    return left, right, np.vstack([unit_normals(rng, 200), sonic[2], cases[2]])


def _launch(kernel, *args, backend="cpu"):
    count = len(args[-1])
    kernel.on(backend)[(count + BLOCK - 1) // BLOCK, BLOCK](*args)
    return args


def test_the_edges_exercise_the_entropy_fix(edges):
    slow, fast = ref.acoustic_speeds(*edges)
    fixed = (np.minimum(slow, fast) < ref.DELTA).sum()
    assert 30 < fixed < 200


def test_cons_to_prim(edges):
    left = edges[0]
    (_, out) = _launch(kernels.cons_to_prim, ref.prim_to_cons(left), np.zeros_like(left))
    np.testing.assert_allclose(out, left, rtol=1e-14, atol=1e-15)


def test_roe_flux_matches_the_reference(edges):
    left, right, n = edges
    expected = ref.roe_flux_prim(left, right, n)
    out = _launch(kernels.roe_flux, left, right, n, np.zeros_like(left))[-1]
    np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-14)
    ql, qr = ref.prim_to_cons(left), ref.prim_to_cons(right)
    out = _launch(kernels.roe_flux_cons, ql, qr, n, np.zeros_like(left))[-1]
    np.testing.assert_allclose(out, ref.roe_flux_cons(ql, qr, n), rtol=1e-13, atol=1e-14)


def _hand_jacobians(left, right, n, backend="cpu"):
    ql, qr = ref.prim_to_cons(left), ref.prim_to_cons(right)
    count = len(n)
    result = (np.zeros((count, 5)), np.zeros((count, 5, 5)), np.zeros((count, 5, 5)))
    _launch(kernels.roe_jacobian_hand, ql, qr, n, *result, backend=backend)
    return result, ref.complex_step_jacobians(ql, qr, n)


def _assert_close(got, expected, rtol):
    """Each edge's block within rtol of its largest entry."""
    scale = np.abs(expected).reshape(len(expected), -1).max(axis=1)
    error = np.abs(got - expected).reshape(len(expected), -1).max(axis=1)
    assert np.all(error <= rtol * scale), f"worst relative error {np.max(error / scale):.3g}"


def test_hand_jacobian_matches_complex_step(edges):
    got, expected = _hand_jacobians(*edges)
    for mine, theirs in zip(got, expected):
        _assert_close(mine, theirs, 1e-10)


def test_hand_jacobian_on_the_interpreter(edges):
    pick = [0, 1, 200, 201, -3, -2, -1]  # two random, two near-sonic, cases A, B, C
    got, expected = _hand_jacobians(*(part[pick] for part in edges), backend="interp")
    for mine, theirs in zip(got, expected):
        _assert_close(mine, theirs, 1e-10)


def _hand_tangents(left, right, n, dql, dqr, backend="cpu"):
    ql, qr = ref.prim_to_cons(left), ref.prim_to_cons(right)
    out = _launch(kernels.roe_flux_tangent, ql, qr, dql, dqr, n, np.zeros_like(ql),
                  backend=backend)[-1]
    _, jl, jr = ref.complex_step_jacobians(ql, qr, n)
    return out, np.einsum("eij,ej->ei", jl, dql) + np.einsum("eij,ej->ei", jr, dqr)


def test_hand_tangent_matches_complex_step_in_random_directions(edges):
    rng = np.random.default_rng(12)
    count = len(edges[2])
    got, expected = _hand_tangents(*edges, rng.normal(size=(count, 5)),
                                   rng.normal(size=(count, 5)))
    _assert_close(got, expected, 1e-10)


@pytest.mark.parametrize("side", [0, 1])
def test_hand_tangent_columns_are_the_hand_jacobian(edges, side):
    """Unit directions on one side, as the 10-threads-per-edge kernels seed them."""
    count = len(edges[2])
    (_, left, right), _ = _hand_jacobians(*edges)
    block = (left, right)[side]
    for c in range(5):
        unit, zero = np.zeros((count, 5)), np.zeros((count, 5))
        unit[:, c] = 1.0
        got, expected = _hand_tangents(*edges, *((unit, zero) if side == 0 else (zero, unit)))
        _assert_close(got, expected, 1e-10)
        _assert_close(got, block[:, :, c], 1e-12)


def test_hand_tangent_on_the_interpreter(edges):
    pick = [0, 1, 200, 201, -3, -2, -1]
    rng = np.random.default_rng(13)
    got, expected = _hand_tangents(*(part[pick] for part in edges), rng.normal(size=(7, 5)),
                                   rng.normal(size=(7, 5)), backend="interp")
    _assert_close(got, expected, 1e-10)
