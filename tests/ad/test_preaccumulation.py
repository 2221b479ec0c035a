"""Forward mode preaccumulates expression trees (zymo/ad/forward.py): a value used once, by a
scalar op of its block, gets no tangents; the root of its tree sums (d root / d leaf) times the
leaves' tangents. Checked: fewer float operations than dual numbers of every node, the same
tangents (to rounding), finite differences, and no preaccumulation through a shuffle."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm
from zymo.ad import forward

BACKENDS = ("interp", "cpu")


def energy(x, y):
    i = zm.grid(1)
    if i < y.shape[0]:
        u, v, w, p = x[i, 0], x[i, 1], x[i, 2], x[i, 3]
        kinetic = 0.5 * (u * u + v * v + w * w)
        y[i] = math.sqrt(2.5 * p / (1.0 + u * u) + kinetic) * (3.0 * u - 0.5 * v / w)


def _args(rng, n=40):
    x = rng.uniform(0.5, 2.0, (n, 4))
    tx = rng.standard_normal((3, n, 4))
    return x, tx, np.zeros(n), np.zeros((3, n))


def _tangents(leaves, monkeypatch, backend="cpu"):
    monkeypatch.setattr(forward, "MAX_LEAVES", leaves)
    kernel = zm.kernel(energy)          # a fresh kernel: no specialization cached across limits
    x, tx, y, ty = _args(np.random.default_rng(0))
    jvp = zm.jvp(kernel, width=3)
    jvp.on(backend)[1, 64](zm.BatchDuplicated(x, tx), zm.BatchDuplicated(y, ty))
    spec = jvp.specialize(zm.BatchDuplicated(x, tx), zm.BatchDuplicated(y, ty))
    text = spec.ir("opt")
    flops = sum(text.count(f"arith.{name}(") for name in ("mul", "add", "sub", "neg"))
    return ty, flops


@pytest.mark.parametrize("leaves", (2, 4, 1000))
def test_preaccumulated_tangents_equal_dual_numbers_with_fewer_operations(leaves, monkeypatch):
    dual, dual_flops = _tangents(0, monkeypatch)          # 0: every value has its tangents
    pre, pre_flops = _tangents(leaves, monkeypatch)
    np.testing.assert_allclose(pre, dual, rtol=1e-14, atol=1e-14)
    assert np.abs(dual).min() > 0
    assert pre_flops < dual_flops, (pre_flops, dual_flops)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("width", (1, 3))
def test_preaccumulated_tangents_match_finite_differences(backend, width):
    x, _, y, _ = _args(np.random.default_rng(1))
    report = zm.check_jvp(zm.kernel(energy), 1, 64, zm.Duplicated(x, np.zeros_like(x)),
                          zm.Duplicated(y, np.zeros_like(y)),
                          width=width, backend=backend, seed=width)
    assert report.ok, str(report)
    assert len(report.rows) >= width


FULL = 0xFFFFFFFF


@zm.kernel
def scaled_butterfly(x, y):
    """A value feeds both a shuffle and arithmetic: the shuffle's partial is another lane's
    adjoint, not a factor, so the tree must stop at it."""
    i = zm.grid(1)
    a = 2.0 * x[i] * x[i]
    b = a + zm.shfl_xor_sync(FULL, 3.0 * a, 1)
    y[i] = b * b


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_shuffle_ends_a_tree(backend):
    rng = np.random.default_rng(2)
    x, tx = rng.standard_normal(32), rng.standard_normal(32)
    y, ty = np.zeros(32), np.zeros(32)
    zm.jvp(scaled_butterfly).on(backend)[1, 32](zm.Duplicated(x, tx), zm.Duplicated(y, ty))
    a, ta = 2 * x * x, 4 * x * tx
    partner = np.arange(32) ^ 1
    b, tb = a + 3 * a[partner], ta + 3 * ta[partner]
    np.testing.assert_allclose(y, b * b, rtol=1e-14)
    np.testing.assert_allclose(ty, 2 * b * tb, rtol=1e-13)


def test_a_long_chain_of_unary_ops_is_one_tree(tmp_path, monkeypatch):
    """A chain of one-operand ops is a tree with one leaf however deep: 3000 ops in one block,
    no recursion limit."""
    body = "".join("    v = 1.0001 * v\n" for _ in range(3000))
    (tmp_path / "deep_chain.py").write_text(
        "import zymo as zm\n\n\n@zm.kernel\ndef chain(x, y):\n    i = zm.grid(1)\n"
        f"    v = x[i]\n{body}    y[i] = v\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from deep_chain import chain
    x, tx = np.linspace(1, 2, 8), np.ones(8)
    y, ty = np.zeros(8), np.zeros(8)
    zm.jvp(chain).on("interp")[1, 8](zm.Duplicated(x, tx), zm.Duplicated(y, ty))
    np.testing.assert_allclose(ty, 1.0001 ** 3000 * tx, rtol=1e-12)
