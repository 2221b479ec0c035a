"""The kernels of numba-cuda's documentation examples, rewritten for these tests, run through
`from zymo import cuda` on the CPU backend (host device arrays stand in for CuPy's)."""
import math

import numpy as np
import pytest

from zymo import cuda
from zymo.cuda import float32


def test_vecadd():
    @cuda.jit
    def f(a, b, c):
        tid = cuda.grid(1)
        if tid < len(c):
            c[tid] = a[tid] + b[tid]
    rng = np.random.default_rng(1)
    n = 5000
    a, b = cuda.to_device(rng.random(n)), cuda.to_device(rng.random(n))
    c = cuda.device_array_like(a)
    f.forall(len(a))(a, b, c)
    np.testing.assert_equal(c.copy_to_host(), a.copy_to_host() + b.copy_to_host())
    c2 = cuda.device_array(n)
    f[(n // 256) + 1, 256](a, b, c2)
    np.testing.assert_equal(c2.copy_to_host(), c.copy_to_host())


TPB = 4


@cuda.jit
def matmul(A, B, C):
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        C[i, j] = acc


@cuda.jit
def tiled_matmul(A, B, C):
    sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    x, y = cuda.grid(2)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    acc = float32(0.0)
    for i in range(cuda.gridDim.x):
        sA[ty, tx] = 0
        sB[ty, tx] = 0
        if y < A.shape[0] and tx + i * TPB < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * TPB]
        if x < B.shape[1] and ty + i * TPB < B.shape[0]:
            sB[ty, tx] = B[ty + i * TPB, x]
        cuda.syncthreads()
        for j in range(TPB):
            acc += sA[ty, j] * sB[j, tx]
        cuda.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = acc


@pytest.mark.parametrize("shapes", [((4, 4), (4, 4)), ((5, 9), (9, 7))])
def test_matmul_plain_and_with_shared_memory(shapes):
    x_h = np.arange(np.prod(shapes[0])).reshape(shapes[0]).astype(np.float64)
    y_h = np.ones(shapes[1])
    expected = x_h @ y_h
    x_d, y_d = cuda.to_device(x_h), cuda.to_device(y_h)
    z_d = cuda.device_array((shapes[0][0], shapes[1][1]))
    blocks = (math.ceil(z_d.shape[0] / TPB), math.ceil(z_d.shape[1] / TPB))
    matmul[blocks, (TPB, TPB)](x_d, y_d, z_d)
    np.testing.assert_array_equal(z_d.copy_to_host(), expected)
    side = max(*shapes[0], *shapes[1])
    blocks = (math.ceil(side / TPB), math.ceil(side / TPB))
    z_d = cuda.to_device(np.zeros(z_d.shape))
    tiled_matmul[blocks, (TPB, TPB)](x_d, y_d, z_d)
    np.testing.assert_array_equal(z_d.copy_to_host(), expected)


def test_reduction_in_shared_memory():
    from zymo.cuda.types import int32
    nelem = 256
    a = cuda.to_device(np.arange(nelem))

    @cuda.jit
    def array_sum(data):
        tid = cuda.threadIdx.x
        if tid < len(data):
            i = cuda.grid(1)
            shr = cuda.shared.array(nelem, int32)
            shr[tid] = data[i]
            cuda.syncthreads()
            s = 1
            while s < cuda.blockDim.x:
                if tid % (2 * s) == 0:
                    shr[tid] += shr[tid + s]
                s *= 2
                cuda.syncthreads()
            if tid == 0:
                data[tid] = shr[tid]
    array_sum[1, nelem](a)
    assert a.copy_to_host()[0] == np.arange(nelem).sum()


def test_montecarlo_with_a_device_function():
    """The integrator's kernel with the samples drawn on the host (cuda.random's draws are
    tested with that module) and the sum taken by NumPy."""
    def integrand(x):
        return 1.0 / x

    @cuda.jit
    def mc_integrator_kernel(out, samples, lower_lim, upper_lim):
        gid = cuda.grid(1)
        if gid < len(out):
            samp = samples[gid] * (upper_lim - lower_lim) + lower_lim
            out[gid] = integrand(samp)

    def mc_integrate(lower_lim, upper_lim, nsamps):
        out = cuda.to_device(np.zeros(nsamps, dtype="float32"))
        samples = cuda.to_device(np.random.default_rng(42).random(nsamps, dtype=np.float32))
        mc_integrator_kernel.forall(nsamps)(out, samples, lower_lim, upper_lim)
        return out.copy_to_host().sum() * (upper_lim - lower_lim) / (nsamps - 1)
    np.testing.assert_allclose(mc_integrate(1, 2, 100000), np.log(2), atol=2e-3)
    np.testing.assert_allclose(mc_integrate(2, 3, 100000), np.log(1.5), atol=2e-3)


def test_cpu_gpu_compat():
    from math import pi

    def business_logic(x, y, z):
        return 4 * z * (2 * x - (4 * y) / 2 * pi)

    X, Y, Z = (cuda.to_device(np.array(v)) for v in ([1, 10, 234], [2, 2, 4014], [3, 14, 2211]))
    results = cuda.to_device(np.array([0.0, 0.0, 0.0]))

    @cuda.jit
    def f(res, xarr, yarr, zarr):
        tid = cuda.grid(1)
        if tid < len(xarr):
            res[tid] = business_logic(xarr[tid], yarr[tid], zarr[tid])
    f.forall(len(X))(results, X, Y, Z)
    expect = [business_logic(x, y, z) for x, y, z in
              zip(X.copy_to_host(), Y.copy_to_host(), Z.copy_to_host())]
    np.testing.assert_equal(expect, results.copy_to_host())


def test_globals_are_captured_as_constants():
    TAX_RATE = 0.08
    PRICES = np.array([10.0, 25.0, 5.0, 15.0, 30.0], dtype=np.float64)

    @cuda.jit
    def compute_totals(quantities, totals):
        i = cuda.grid(1)
        if i < totals.size:
            totals[i] = quantities[i] * PRICES[i] * (1 + TAX_RATE)
    d_quantities = cuda.to_device(np.array([1, 2, 3, 4, 5], dtype=np.float64))
    d_totals = cuda.device_array(5)
    compute_totals[1, 32](d_quantities, d_totals)
    TAX_RATE = 0.10  # noqa: F841
    PRICES[:] = [20.0, 50.0, 10.0, 30.0, 60.0]
    compute_totals[1, 32](d_quantities, d_totals)
    np.testing.assert_allclose(d_totals.copy_to_host(), [10.8, 54.0, 16.2, 64.8, 162.0])


def _has_grid_sync() -> bool:
    return hasattr(cuda, "cg")


@pytest.mark.skipif(not _has_grid_sync(), reason="cooperative groups (cuda.cg) not in zymo yet")
def test_sessionize_with_grid_sync():
    session_timeout = np.int64(3600 * 10**9)
    ids = cuda.to_device(np.array([1, 1, 1, 2, 2, 3, 3, 3]))
    sec = cuda.to_device(np.array([1, 2, 5 * 10**12, 1, 2, 1, 2, 3], dtype=np.int64))
    results = cuda.to_device(np.zeros(8))

    @cuda.jit
    def sessionize(user_id, timestamp, results):
        gid = cuda.grid(1)
        size = len(user_id)
        if gid >= size:
            return
        is_first = gid == 0
        if not is_first:
            new_user = user_id[gid] != user_id[gid - 1]
            timed_out = timestamp[gid] - timestamp[gid - 1] > session_timeout
            boundary = new_user or timed_out
        else:
            boundary = True
        if boundary:
            results[gid] = gid
            grid = cuda.cg.this_grid()
            grid.sync()
            look_ahead = 1
            while results[gid + look_ahead] == 0:
                results[gid + look_ahead] = gid
                look_ahead += 1
                if gid + look_ahead == size - 1:
                    results[gid + look_ahead] = gid
                    break
    sessionize.forall(len(ids))(ids, sec, results)
    np.testing.assert_equal(results.copy_to_host(), [0, 0, 2, 3, 3, 5, 5, 5])
