"""zm.jax.function on a GPU: the custom call's handler launches with cuLaunchKernel on XLA's
stream inside the compiled program. Values against NumPy, gradients against float64 central
differences and check_grads, vmap, a derivative with tapes, several calls chained in one
program, and the example optimisation, all on the GPU JAX sees.

    XLA_PYTHON_CLIENT_PREALLOCATE=false python -m pytest -q tests/gpu/test_jax_gpu.py
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import zymo as zm  # noqa: E402
from interop.kernels import dense_tanh, scaled_sine, sum_of_squares  # noqa: E402


def _gpu():
    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        return None


pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(_gpu() is None, reason="JAX sees no GPU (jax[cuda12/13])")]
ROOT = Path(__file__).resolve().parents[2]
TILE = 16


def _blocks(n, threads=128):
    return ((n + threads - 1) // threads, threads)


@zm.kernel
def matmul_tiled(A, B, C):
    sA = zm.shared.array((TILE, TILE), zm.f32)
    sB = zm.shared.array((TILE, TILE), zm.f32)
    tx, ty = zm.threadIdx.x, zm.threadIdx.y
    row, col = zm.blockIdx.y * TILE + ty, zm.blockIdx.x * TILE + tx
    acc = 0.0
    for t in range((A.shape[1] + TILE - 1) // TILE):
        ka, kb = t * TILE + tx, t * TILE + ty
        sA[ty, tx] = A[row, ka] if row < A.shape[0] and ka < A.shape[1] else 0.0
        sB[ty, tx] = B[kb, col] if kb < A.shape[1] and col < B.shape[1] else 0.0
        zm.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        zm.syncthreads()
    if row < A.shape[0] and col < B.shape[1]:
        C[row, col] = acc


sine = zm.jax.function(scaled_sine, lambda x, a: _blocks(x.shape[0]), outputs={"y": "x"},
                       scalars=["a"])
squares = zm.jax.function(sum_of_squares, lambda x, w: _blocks(x.shape[0]),
                          outputs={"total": (1,)})
dense = zm.jax.function(
    dense_tanh, lambda x, w, b: (((x.shape[0] + 15) // 16, (w.shape[1] + 15) // 16), (16, 16)),
    outputs={"y": lambda x, w, b: (x.shape[0], w.shape[1])})
matmul = zm.jax.function(
    matmul_tiled,
    lambda a, b: (((b.shape[1] + TILE - 1) // TILE, (a.shape[0] + TILE - 1) // TILE),
                  (TILE, TILE)),
    outputs={"C": lambda a, b: (a.shape[0], b.shape[1])})


def _on_gpu(*arrays):
    return [jax.device_put(a, _gpu()) for a in arrays]


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


def test_values_on_the_gpu_match_numpy():
    x, w = _rand(5000), _rand(5000, seed=1)
    gx, gw = _on_gpu(x, w)
    y = jax.jit(sine, static_argnums=1)(gx, 1.5)
    assert y.devices() == {_gpu()}
    np.testing.assert_allclose(np.asarray(y), 1.5 * np.sin(x) * x, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jax.jit(squares)(gx, gw)), [np.sum(w * x * x)],
                               rtol=1e-10)
    xs, ws, bs = _rand(70, 30), _rand(30, 20, seed=1), _rand(20, seed=2)
    np.testing.assert_allclose(np.asarray(jax.jit(dense)(*_on_gpu(xs, ws, bs))),
                               np.tanh(xs @ ws + bs), rtol=1e-12)
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(np.asarray(jax.jit(sine, static_argnums=1)(*_on_gpu(x32), 0.5)),
                               0.5 * np.sin(x32) * x32, rtol=2e-6)


def test_calls_chained_in_one_program_run_in_stream_order():
    x = _rand(100000)
    chain = jax.jit(lambda x: sine(sine(sine(x, 0.5) + 1.0, 0.25), 2.0))
    y = np.asarray(chain(*_on_gpu(x)))
    first = 0.5 * np.sin(x) * x + 1.0
    second = 0.25 * np.sin(first) * first
    np.testing.assert_allclose(y, 2.0 * np.sin(second) * second, rtol=1e-13)


def test_gradients_on_the_gpu():
    x, w = _rand(300), _rand(300, seed=3)
    gx, gw = _on_gpu(x, w)
    grads = jax.jit(jax.grad(lambda x, w: squares(x, w)[0], argnums=(0, 1)))(gx, gw)
    np.testing.assert_allclose(np.asarray(grads[0]), 2 * w * x, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(grads[1]), x * x, rtol=1e-13)
    check_grads(lambda x: sine(x, 0.7), _on_gpu(_rand(64)), order=1, modes=("fwd", "rev"))
    check_grads(dense, _on_gpu(_rand(9, 7), _rand(7, 5, seed=1), _rand(5, seed=2)), order=1,
                modes=("fwd", "rev"))


def test_a_derivative_with_tapes_on_the_gpu():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((70, 45)).astype(np.float32)
    b = rng.standard_normal((45, 33)).astype(np.float32)
    seed = rng.standard_normal((70, 33)).astype(np.float32)
    ga, gb = jax.jit(jax.grad(lambda a, b: jnp.sum(matmul(a, b) * seed), argnums=(0, 1)))(
        *_on_gpu(a, b))
    np.testing.assert_allclose(np.asarray(ga), seed @ b.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(gb), a.T @ seed, rtol=1e-4, atol=1e-4)


def test_vmap_on_the_gpu():
    xs = np.stack([_rand(1000, seed=k) for k in range(4)])
    w = _rand(1000, seed=9)
    gxs, gw = _on_gpu(xs, w)
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(lambda x: sine(x, 1.5)))(gxs)),
                               1.5 * np.sin(xs) * xs, rtol=1e-14)
    per_example = jax.jit(jax.vmap(jax.grad(lambda x, w: squares(x, w)[0]), in_axes=(0, None)))
    np.testing.assert_allclose(np.asarray(per_example(gxs, gw)), 2 * w * xs, rtol=1e-13)


def test_example_optimisation_runs_on_the_gpu():
    env = dict(os.environ, PYTHONPATH=str(ROOT), XLA_PYTHON_CLIENT_PREALLOCATE="false")
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "jax_optimisation.py")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "fitted" in done.stdout
