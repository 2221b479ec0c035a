"""What the memory traffic of a reverse sweep costs when written by hand in CUDA C (NVRTC via
CuPy), to tell the cost of a shadow-update strategy from the cost of zymo's code:

- 2-D 5-point stencil adjoint, scatter form (5 atomicAdds per thread, as zymo emits), gather
  form (each thread sums the cotangents of the reads of its element: plain stores);
- the memory skeleton of a D3Q19 pull-streaming adjoint (read and zero 19 output cotangents,
  add 19 cotangents into the pulled-from elements): atomicAdd, plain read-modify-write in
  program order, and plain with the 19 loads issued before any store.

    python bench/grad_floor.py
"""
from __future__ import annotations

import sys

import numpy as np

STENCIL = r"""
extern "C" __global__ void primal(const float* u, float* out, int ny, int nx, float a) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (y > 0 && y < ny - 1 && x > 0 && x < nx - 1) {
        int i = y * nx + x;
        out[i] = u[i] + a * (u[i - nx] + u[i + nx] + u[i - 1] + u[i + 1] - 4.0f * u[i]);
    }
}
extern "C" __global__ void scatter(float* du, float* dout, int ny, int nx, float a) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (y > 0 && y < ny - 1 && x > 0 && x < nx - 1) {
        int i = y * nx + x;
        float g = dout[i]; dout[i] = 0.0f;
        atomicAdd(&du[i], g * (1.0f - 4.0f * a));
        atomicAdd(&du[i - nx], g * a); atomicAdd(&du[i + nx], g * a);
        atomicAdd(&du[i - 1], g * a); atomicAdd(&du[i + 1], g * a);
    }
}
__device__ bool inner(int y, int x, int ny, int nx) {
    return y > 0 && y < ny - 1 && x > 0 && x < nx - 1;
}
extern "C" __global__ void gather(float* du, const float* dout, int ny, int nx, float a) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (y < ny && x < nx) {
        int i = y * nx + x;
        float s = inner(y, x, ny, nx) ? dout[i] * (1.0f - 4.0f * a) : 0.0f;
        if (inner(y + 1, x, ny, nx)) s += a * dout[i + nx];
        if (inner(y - 1, x, ny, nx)) s += a * dout[i - nx];
        if (inner(y, x + 1, ny, nx)) s += a * dout[i + 1];
        if (inner(y, x - 1, ny, nx)) s += a * dout[i - 1];
        du[i] += s;
    }
}
"""

LBM = r"""
__constant__ int CX[19] = {0,1,-1,0,0,0,0,1,-1,1,-1,1,-1,1,-1,0,0,0,0};
__constant__ int CY[19] = {0,0,0,1,-1,0,0,1,-1,-1,1,0,0,0,0,1,-1,1,-1};
__constant__ int CZ[19] = {0,0,0,0,0,1,-1,0,0,0,0,1,-1,-1,1,1,-1,-1,1};
#define CELL(q, z, y, x) ((((long)(q) * nz + (z)) * ny + (y)) * nx + (x))
#define SRC(q) CELL(q, (z - CZ[q] + nz) % nz, (y - CY[q] + ny) % ny, (x - CX[q] + nx) % nx)
extern "C" __global__ void primal(const float* src, float* dst, int nz, int ny, int nx) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    float f[19];
    #pragma unroll
    for (int q = 0; q < 19; q++) f[q] = src[SRC(q)];
    #pragma unroll
    for (int q = 0; q < 19; q++) dst[CELL(q, z, y, x)] = 0.9f * f[q];
}
extern "C" __global__ void atomic(float* dsrc, float* ddst, int nz, int ny, int nx) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    #pragma unroll
    for (int q = 0; q < 19; q++) {
        float g = ddst[CELL(q, z, y, x)]; ddst[CELL(q, z, y, x)] = 0.0f;
        atomicAdd(&dsrc[SRC(q)], 0.9f * g);
    }
}
extern "C" __global__ void ordered(float* dsrc, float* ddst, int nz, int ny, int nx) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    #pragma unroll
    for (int q = 0; q < 19; q++) {
        float g = ddst[CELL(q, z, y, x)]; ddst[CELL(q, z, y, x)] = 0.0f;
        dsrc[SRC(q)] += 0.9f * g;
    }
}
extern "C" __global__ void pairs(float* __restrict__ dsrc, float* __restrict__ ddst,
                                 int nz, int ny, int nx) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    float g[19], old[19];
    #pragma unroll
    for (int q = 0; q < 19; q++) { g[q] = ddst[CELL(q, z, y, x)]; ddst[CELL(q, z, y, x)] = 0.0f; }
    #pragma unroll
    for (int q = 0; q < 19; q++) old[q] = dsrc[SRC(q)];
    #pragma unroll
    for (int q = 0; q < 19; q++) dsrc[SRC(q)] = old[q] + 0.9f * g[q];
}
extern "C" __global__ void batched(float* __restrict__ dsrc, float* __restrict__ ddst,
                                   int nz, int ny, int nx) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    float g[19], old[19];
    #pragma unroll
    for (int q = 0; q < 19; q++) { g[q] = ddst[CELL(q, z, y, x)]; old[q] = dsrc[SRC(q)]; }
    #pragma unroll
    for (int q = 0; q < 19; q++) { ddst[CELL(q, z, y, x)] = 0.0f; dsrc[SRC(q)] = old[q] + 0.9f * g[q]; }
}
"""


def timed(cp, run, reps=20) -> float:
    run()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(reps):
        run()
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop) / reps


def main() -> int:
    import cupy as cp
    rows = []
    module = cp.RawModule(code=STENCIL, options=("-std=c++17",))
    ny = nx = 4096
    u, out = cp.random.random((ny, nx), dtype=cp.float32), cp.zeros((ny, nx), cp.float32)
    du, dout = cp.zeros_like(u), cp.ones_like(u)
    grid, block = (nx // 16, ny // 8), (16, 8)
    args = (np.int32(ny), np.int32(nx), np.float32(0.2))
    base = timed(cp, lambda: module.get_function("primal")(grid, block, (u, out) + args))
    rows.append(("stencil 4096^2 primal", base, 1.0))
    for name in ("scatter", "gather"):
        ms = timed(cp, lambda: module.get_function(name)(grid, block, (du, dout) + args))
        rows.append((f"stencil adjoint, {name}", ms, ms / base))
    module = cp.RawModule(code=LBM, options=("-std=c++17",))
    nz, ny, nx = 150, 120, 120
    src = cp.random.random((19, nz, ny, nx), dtype=cp.float32)
    dst, dsrc, ddst = cp.zeros_like(src), cp.zeros_like(src), cp.ones_like(src)
    grid, block = (nx // 8, ny // 4, nz // 2), (8, 4, 2)
    dims = (np.int32(nz), np.int32(ny), np.int32(nx))
    base = timed(cp, lambda: module.get_function("primal")(grid, block, (src, dst) + dims))
    rows.append(("LBM pull 120x120x150 primal (copy)", base, 1.0))
    for name in ("atomic", "ordered", "pairs", "batched"):
        ms = timed(cp, lambda: module.get_function(name)(grid, block, (dsrc, ddst) + dims))
        rows.append((f"LBM adjoint skeleton, {name}", ms, ms / base))
    print(f"GPU: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    for name, ms, ratio in rows:
        print(f"{name:40s} {ms:8.3f} ms {ratio:7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
