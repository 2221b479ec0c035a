"""Rodinia lud: lud_internal on the CPU backend against NumPy, the factored panel is an LU
factorization, and the check rejects a variant that drops one of the 16 products."""
import numpy as np

from rodinia_helpers import on_cpu, race_free
from bench.evolve import rodinia_lud as lud


def test_internal_update_matches_numpy():
    w = lud.WORKLOADS["rodinia_lud"]
    for n, offset in ((64, 0), (83, 16)):
        args = lud.inputs(np.random.default_rng(n), n=n, offset=offset)
        got = on_cpu(w, args)
        np.testing.assert_allclose(got[lud.M], lud.reference(args), rtol=1e-4, atol=1e-4)
        assert w.check(got, got) == 0.0


def test_panel_is_factored():
    """L (its first 16 columns) times U (its first 16 rows) gives back the first 16 rows and
    columns of the matrix."""
    a = lud.generate(np.random.default_rng(0), 48)
    f = a.copy()
    lud.factor_panel(f, 0)
    product = (np.tril(f[:, :16], -1) + np.eye(48, 16)) @ np.triu(f[:16, :])
    np.testing.assert_allclose(product[:16, :], a[:16, :], rtol=1e-10)
    np.testing.assert_allclose(product[:, :16], a[:, :16], rtol=1e-10)


def test_check_rejects_a_dropped_product():
    w = lud.WORKLOADS["rodinia_lud"]
    args = lud.inputs(np.random.default_rng(5), n=64)
    expected = on_cpu(w, args)
    a = args[lud.M].astype(np.float64).reshape(64, 64)
    bad = a.copy()
    bad[16:, 16:] -= a[16:, :15] @ a[:15, 16:]          # 15 of the 16 products
    assert w.check(expected, [bad.astype(np.float32).reshape(-1), *expected[1:]]) > w.tolerance


def test_race_free():
    race_free(lud.WORKLOADS["rodinia_lud"])
