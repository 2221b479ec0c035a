"""Reverse mode on the GPU: the classic cases and the differentiable corpus against finite
differences, the GPU against the interpreter, and contention on a uniform-address read."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import zymo as zm
from ad import kernels as K
from ad.test_corpus_grad import DIFFERENTIABLE, activities

pytestmark = pytest.mark.gpu


def dup(a):
    return zm.Duplicated(a, np.zeros_like(a))


def check(kernel, grid, block, *args):
    report = zm.check_grad(kernel, grid, block, *args, backend="cuda")
    assert report.ok, str(report)


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda case: case.name)
def test_corpus_gradients_on_gpu(case):
    seed = zlib.crc32(case.name.encode())
    args = case.make_args(np.random.default_rng(seed))
    report = zm.check_grad(case.kernel, case.grid, case.block, *activities(args),
                           backend="cuda", seed=seed)
    assert report.ok, str(report)


def test_classic_cases_on_gpu():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, 300)
    check(K.square, 3, 128, dup(x), dup(np.zeros(300)))
    check(K.exp_cos, 3, 128, dup(x), dup(np.zeros(300)))
    W, b = rng.standard_normal((5, 7)) * 0.3, rng.standard_normal(5)
    xs = rng.standard_normal((70, 7))
    check(K.dense, 2, 64, dup(W), dup(b), dup(xs), dup(np.zeros((70, 5))))
    check(K.block_reduce, 4, 128, dup(x), dup(np.zeros(1)))
    index = rng.integers(0, 7, 300).astype(np.int32)
    check(K.scatter_add, 3, 128, dup(x), index, dup(np.zeros(7)))
    check(K.in_place_axpy, 3, 128, zm.Active(1.5), dup(x), dup(rng.standard_normal(300)))
    counts = rng.integers(0, 6, 300).astype(np.int32)
    check(K.power_loop, 3, 128, dup(x), counts, dup(np.zeros(300)))
    check(K.early_exit, 3, 128, dup(x), dup(np.zeros(300)), 0.3)
    check(K.shifted_neighbours, 3, 128, dup(x), dup(np.zeros(300)))
    check(K.warp_sum, 2, 64, dup(x[:128].copy()), dup(np.zeros(4)))
    check(K.uniform_read, 3, 128, dup(rng.standard_normal(2)), dup(x), dup(np.zeros(300)))


def test_active_scalar_sum_on_gpu():
    out = zm.to_device(np.zeros(64, np.float32))
    dout = zm.to_device(np.ones(64, np.float32))
    (da,) = zm.grad(K.scale_sum)[2, 32](zm.Active(np.float32(3.0)), zm.Duplicated(out, dout))
    assert da == 64 * 65 / 2


def test_uniform_read_under_contention():
    """2^20 threads read w[0] and w[1]; the adjoint goes through the warp reduction."""
    n = 1 << 20
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 1, n).astype(np.float32)
    w = np.array([0.5, -0.25], np.float32)
    dw = zm.to_device(np.zeros(2, np.float32))
    dy = zm.to_device(np.ones(n, np.float32))
    dx = zm.to_device(np.zeros(n, np.float32))
    zm.grad(K.uniform_read)[n // 256, 256](
        zm.Duplicated(zm.to_device(w), dw), zm.Duplicated(zm.to_device(x), dx),
        zm.Duplicated(zm.to_device(np.zeros(n, np.float32)), dy))
    got = dw.copy_to_host()
    np.testing.assert_allclose(got, [x.astype(np.float64).sum(), n], rtol=2e-4)
    np.testing.assert_allclose(dx.copy_to_host(), 0.5)


def test_gpu_matches_interpreter():
    rng = np.random.default_rng(3)
    W, b = rng.standard_normal((5, 7)), rng.standard_normal(5)
    xs = rng.standard_normal((70, 7))
    seeds = rng.standard_normal((70, 5))
    results = {}
    for backend in ("interp", "cuda"):
        arrays = [W, b, xs, np.zeros((70, 5))]
        shadows = [np.zeros_like(W), np.zeros_like(b), np.zeros_like(xs), seeds.copy()]
        if backend == "cuda":
            arrays = [zm.to_device(a) for a in arrays]
            shadows = [zm.to_device(s) for s in shadows]
        zm.grad(K.dense).on(backend)[2, 64](*[zm.Duplicated(a, s)
                                               for a, s in zip(arrays, shadows)])
        results[backend] = [s if isinstance(s, np.ndarray) else s.copy_to_host()
                            for s in shadows]
    for got, want in zip(results["cuda"], results["interp"]):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype, inputs, block", [
    (np.float32, 70, 64),     # three chunks of 32 iterations, the last of 6
    (np.float64, 32, 160),    # one whole chunk; warp 4 has no float64 tile rows
    (np.float32, 5, 320),     # one partial chunk; warps 8 and 9 have no float32 tile rows
])
def test_weight_cotangents_summed_in_a_tile(dtype, inputs, block):
    """The dense layer's weight cotangents go through `atomic.accumulate_in_tile`: whole warps
    leave their per-iteration sums in a shared tile and add them up per chunk of iterations;
    partial warps (the last block's) and warps without tile rows take the plain path. The
    GPU's cotangents equal the interpreter's, and the gradient checks."""
    rng = np.random.default_rng(inputs)
    outputs, rows = 6, 2 * block + 37
    W = (rng.standard_normal((outputs, inputs)) * 0.2).astype(dtype)
    b = rng.standard_normal(outputs).astype(dtype)
    xs = rng.standard_normal((rows, inputs)).astype(dtype)
    seeds = rng.standard_normal((rows, outputs)).astype(dtype)
    grid = -(-rows // block)
    spec = zm.grad(K.dense).specialize(dup(W), dup(b), dup(xs), dup(np.zeros_like(seeds)))
    assert "atomic.accumulate_in_tile" in spec.ir("ad")
    results = {}
    for backend in ("interp", "cuda"):
        arrays = [W, b, xs, np.zeros_like(seeds)]
        shadows = [np.zeros_like(W), np.zeros_like(b), np.zeros_like(xs), seeds.copy()]
        if backend == "cuda":
            arrays = [zm.to_device(a) for a in arrays]
            shadows = [zm.to_device(s) for s in shadows]
        zm.grad(K.dense).on(backend)[grid, block](*[zm.Duplicated(a, s)
                                                     for a, s in zip(arrays, shadows)])
        results[backend] = [s if isinstance(s, np.ndarray) else s.copy_to_host()
                            for s in shadows]
    tolerance = 1e-4 if dtype == np.float32 else 1e-11
    for got, want in zip(results["cuda"], results["interp"]):
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
    if dtype == np.float64:
        check(K.dense, grid, block, dup(W), dup(b), dup(xs), dup(np.zeros_like(seeds)))


def test_shadow_update_strategies_on_gpu():
    """Ownership through periodic indices, batched accesses, gather, block-private copies,
    tapes and `memory.update`'s relaxed atomics, on the GPU against finite differences."""
    from ad import test_memory_strategies as S
    from corpus.memory import stencil5
    rng = np.random.default_rng(71)
    src = rng.standard_normal((5, 4, 8))
    check(K.periodic_pull, (1, 2), (8, 2), dup(src), dup(np.zeros_like(src)), 0.7)
    check(K.periodic_pull, (2, 2), (8, 2), dup(src), dup(np.zeros((5, 4, 16))), 0.7)
    u = rng.standard_normal((20, 30))
    check(stencil5, (2, 3), (16, 8), dup(u), dup(np.zeros_like(u)), zm.Active(0.2))
    x = rng.standard_normal(300)
    check(K.nonlinear_stencil, 3, 128, dup(x), dup(np.zeros(300)))
    check(K.rows_of_pairs, (1, 3), (128, 1), dup(x[:100].copy()), dup(np.zeros((3, 100))))
    check(K.rows_per_step, 2, 128, dup(rng.standard_normal((4, 200))), dup(np.zeros(200)))
    check(K.static_power, 3, 128, dup(x), dup(np.zeros(300)))
    counts = rng.integers(0, 40, 300).astype(np.int32)
    check(K.power_loop, 3, 128, dup(x), counts, dup(np.zeros(300)))
    check(S.weighted_stencil, 3, 128, dup(x), dup(rng.standard_normal(3)), dup(np.zeros(300)),
          zm.Active(0.7))
    check(S.skewed_rows, 2, 128, dup(rng.standard_normal((4, 256))), dup(np.zeros(256)))
    check(S.triangular, 1, 128, dup(rng.standard_normal((100, 5))), dup(np.zeros(100)))
    check(S.masked_weights, 2, 64, dup(rng.standard_normal(40)),
          dup(rng.standard_normal((100, 40))), dup(np.zeros(100)))


def test_private_shadows_leave_l1_to_the_kernel():
    """A derivative whose only shared memory is its block-private shadows prefers a shared
    carveout of PRIVATE_CARVEOUT percent; one whose kernel has shared memory of its own keeps
    the driver's choice."""
    from zymo.runtime import grad as grad_module
    from zymo.runtime.cuda import driver
    rng = np.random.default_rng(7)
    W, b = rng.standard_normal((5, 7)) * 0.3, rng.standard_normal(5)
    x = rng.standard_normal((70, 7))
    dk = zm.grad(K.dense)
    dk[2, 64](dup(W), dup(b), dup(x), dup(np.zeros((70, 5))))
    program = dk.last.compiled("cuda")
    assert program.shared_carveout == grad_module.PRIVATE_CARVEOUT
    function = program.function(driver.current_device())
    assert driver.function_attribute(function, "PREFERRED_SHARED_MEMORY_CARVEOUT") \
        == grad_module.PRIVATE_CARVEOUT
    dr = zm.grad(K.block_reduce)
    dr[4, 128](dup(rng.standard_normal(500)), dup(np.zeros(1)))
    assert dr.last.compiled("cuda").shared_carveout is None
