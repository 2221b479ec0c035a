"""Kernel time on one GPU: zymo against the same kernels in CUDA C compiled by NVRTC (CuPy
RawKernel) and against numba-cuda, side by side in one run.

    python -m zymo.bench.gpu_kernels [--quick] [--output bench/results/gpu-kernels-<gpu>.md]

Each kernel is written once in zymo syntax below. The numba-cuda version is the *same source*
(`inspect.getsource` of the zymo kernel, `zm.` -> `cuda.`, `zm.f32` -> `numba.float32`) passed
through `cuda.jit`; the CUDA C version is the same algorithm with the same launch configuration
and data. All three run on the same CuPy arrays on the legacy default stream.

Correctness gate: every implementation's outputs are compared with the others and with a
NumPy/CuPy reference before anything is timed. Timing: CUDA events around each launch (or each
application run, for the multi-launch Rodinia codes nw and pathfinder), launches queued back to
back, 3 warm-up runs, median of ROUNDS x REPS runs with the implementations interleaved by round.
"""
from __future__ import annotations

import inspect
import math
import os
import re
import sys
import textwrap
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

import zymo as zm

ROUNDS, REPS, WARMUP = 3, 10, 3

# ------------------------------------------------------------------------------------------------
# The kernels, in zymo syntax (each written once)
# ------------------------------------------------------------------------------------------------
TILE = 16          # SGEMM tile
TD, BR = 32, 8     # transpose tile and block rows
TD1 = TD + 1       # padded row (a named constant: numba wants literal shared shapes)
NB = 16            # Needleman-Wunsch block
NB1 = NB + 1
PF_BLOCK = 256     # pathfinder block
NT = 256           # n-body tile


@zm.kernel
def triad(a, b, c, s):
    i = zm.grid(1)
    if i < a.shape[0]:
        a[i] = b[i] + s * c[i]


@zm.kernel
def block_reduce(x, partial):
    sm = zm.shared.array(256, zm.f32)
    t = zm.threadIdx.x
    i = zm.blockIdx.x * 512 + t
    n = x.shape[0]
    v = zm.f32(0.0)
    if i < n:
        v = x[i]
    if i + 256 < n:
        v += x[i + 256]
    sm[t] = v
    zm.syncthreads()
    stride = 128
    while stride > 0:
        if t < stride:
            sm[t] += sm[t + stride]
        zm.syncthreads()
        stride //= 2
    if t == 0:
        partial[zm.blockIdx.x] = sm[0]


@zm.kernel
def warp_reduce(x, out):
    warp_sums = zm.shared.array(32, zm.f32)
    t = zm.threadIdx.x
    lane = t & 31
    wid = t >> 5
    n = x.shape[0]
    v = zm.f32(0.0)
    i = zm.grid(1)
    stride = zm.gridsize(1)
    while i < n:
        v += x[i]
        i += stride
    off = 16
    while off > 0:
        v += zm.shfl_down_sync(0xFFFFFFFF, v, off)
        off //= 2
    if lane == 0:
        warp_sums[wid] = v
    zm.syncthreads()
    if wid == 0:
        v = warp_sums[lane] if lane < (zm.blockDim.x >> 5) else zm.f32(0.0)
        off = 16
        while off > 0:
            v += zm.shfl_down_sync(0xFFFFFFFF, v, off)
            off //= 2
        if lane == 0:
            zm.atomic.add(out, 0, v)


@zm.kernel
def sgemm(a, b, c):
    sa = zm.shared.array((TILE, TILE), zm.f32)
    sb = zm.shared.array((TILE, TILE), zm.f32)
    tx = zm.threadIdx.x
    ty = zm.threadIdx.y
    row = zm.blockIdx.y * TILE + ty
    col = zm.blockIdx.x * TILE + tx
    n = a.shape[1]
    acc = zm.f32(0.0)
    for k0 in range(0, n, TILE):
        sa[ty, tx] = a[row, k0 + tx]
        sb[ty, tx] = b[k0 + ty, col]
        zm.syncthreads()
        for k in range(TILE):
            acc += sa[ty, k] * sb[k, tx]
        zm.syncthreads()
    c[row, col] = acc


@zm.kernel
def transpose(src, dst):
    tile = zm.shared.array((TD, TD1), zm.f32)
    x = zm.blockIdx.x * TD + zm.threadIdx.x
    y = zm.blockIdx.y * TD + zm.threadIdx.y
    for j in range(0, TD, BR):
        tile[zm.threadIdx.y + j, zm.threadIdx.x] = src[y + j, x]
    zm.syncthreads()
    x = zm.blockIdx.y * TD + zm.threadIdx.x
    y = zm.blockIdx.x * TD + zm.threadIdx.y
    for j in range(0, TD, BR):
        dst[y + j, x] = tile[zm.threadIdx.x, zm.threadIdx.y + j]


@zm.kernel
def hotspot(temp, power, out, cap, rx, ry, rz, amb):
    c, r = zm.grid(2)
    rows = temp.shape[0]
    cols = temp.shape[1]
    if r < rows and c < cols:
        t = temp[r, c]
        nn = temp[max(r - 1, 0), c]
        s = temp[min(r + 1, rows - 1), c]
        w = temp[r, max(c - 1, 0)]
        e = temp[r, min(c + 1, cols - 1)]
        out[r, c] = t + cap * (power[r, c] + (nn + s - zm.f32(2.0) * t) * ry
                               + (e + w - zm.f32(2.0) * t) * rx + (amb - t) * rz)


@zm.kernel
def histogram(values, bins):
    h = zm.shared.array(256, zm.i32)
    t = zm.threadIdx.x
    h[t] = 0
    zm.syncthreads()
    i = zm.grid(1)
    stride = zm.gridsize(1)
    n = values.shape[0]
    while i < n:
        zm.atomic.add(h, values[i] & 255, 1)
        i += stride
    zm.syncthreads()
    zm.atomic.add(bins, t, h[t])


@zm.kernel
def nw_diag(ref, mat, cols, penalty, diag, phase, block_width):
    temp = zm.shared.array((NB1, NB1), zm.i32)
    rf = zm.shared.array((NB, NB), zm.i32)
    bx = zm.blockIdx.x
    tx = zm.threadIdx.x
    if phase == 0:
        bix = bx
        biy = diag - 1 - bx
    else:
        bix = bx + block_width - diag
        biy = block_width - bx - 1
    base = cols * NB * biy + NB * bix
    index = base + tx + cols + 1
    index_n = base + tx + 1
    index_w = base + cols
    if tx == 0:
        temp[0, 0] = mat[base]
    for ty in range(NB):
        rf[ty, tx] = ref[index + cols * ty]
    zm.syncthreads()
    temp[tx + 1, 0] = mat[index_w + cols * tx]
    zm.syncthreads()
    temp[0, tx + 1] = mat[index_n]
    zm.syncthreads()
    for m in range(NB):
        if tx <= m:
            x = tx + 1
            y = m - tx + 1
            temp[y, x] = max(temp[y - 1, x - 1] + rf[y - 1, x - 1], temp[y, x - 1] - penalty,
                             temp[y - 1, x] - penalty)
        zm.syncthreads()
    for m2 in range(NB - 1):
        m = NB - 2 - m2
        if tx <= m:
            x = tx + NB - m
            y = NB - tx
            temp[y, x] = max(temp[y - 1, x - 1] + rf[y - 1, x - 1], temp[y, x - 1] - penalty,
                             temp[y - 1, x] - penalty)
        zm.syncthreads()
    for ty in range(NB):
        mat[index + ty * cols] = temp[ty + 1, tx + 1]


@zm.kernel
def pathfinder(iteration, wall, src, dst, cols, start_step, border):
    prev = zm.shared.array(PF_BLOCK, zm.i32)
    result = zm.shared.array(PF_BLOCK, zm.i32)
    bx = zm.blockIdx.x
    tx = zm.threadIdx.x
    small = PF_BLOCK - iteration * 2
    blk_x = small * bx - border
    blk_xmax = blk_x + PF_BLOCK - 1
    xidx = blk_x + tx
    valid_min = -blk_x if blk_x < 0 else 0
    valid_max = PF_BLOCK - 1 - (blk_xmax - cols + 1) if blk_xmax > cols - 1 else PF_BLOCK - 1
    w = max(tx - 1, valid_min)
    e = min(tx + 1, valid_max)
    if 0 <= xidx and xidx <= cols - 1:
        prev[tx] = src[xidx]
    zm.syncthreads()
    computed = False
    for i in range(iteration):
        computed = False
        if i + 1 <= tx and tx <= PF_BLOCK - i - 2 and valid_min <= tx and tx <= valid_max:
            computed = True
            shortest = min(prev[w], prev[tx], prev[e])
            result[tx] = shortest + wall[cols * (start_step + i) + xidx]
        zm.syncthreads()
        if i == iteration - 1:
            break
        if computed:
            prev[tx] = result[tx]
        zm.syncthreads()
    if computed:
        dst[xidx] = result[tx]


@zm.kernel
def nbody(pos, acc, eps2):
    sh = zm.shared.array((NT, 4), zm.f32)
    i = zm.grid(1)
    t = zm.threadIdx.x
    n = pos.shape[0]
    px = pos[i, 0]
    py = pos[i, 1]
    pz = pos[i, 2]
    ax = zm.f32(0.0)
    ay = zm.f32(0.0)
    az = zm.f32(0.0)
    for tile in range(0, n, NT):
        sh[t, 0] = pos[tile + t, 0]
        sh[t, 1] = pos[tile + t, 1]
        sh[t, 2] = pos[tile + t, 2]
        sh[t, 3] = pos[tile + t, 3]
        zm.syncthreads()
        for j in range(NT):
            dx = sh[j, 0] - px
            dy = sh[j, 1] - py
            dz = sh[j, 2] - pz
            r2 = dx * dx + dy * dy + dz * dz + eps2
            inv = zm.f32(1.0) / math.sqrt(r2)
            s = sh[j, 3] * inv * inv * inv
            ax += dx * s
            ay += dy * s
            az += dz * s
        zm.syncthreads()
    acc[i, 0] = ax
    acc[i, 1] = ay
    acc[i, 2] = az


@zm.func
def cnd(d):
    k = zm.f32(1.0) / (zm.f32(1.0) + zm.f32(0.2316419) * math.fabs(d))
    c = zm.f32(0.3989422804014327) * math.exp(zm.f32(-0.5) * d * d) * (
        k * (zm.f32(0.31938153) + k * (zm.f32(-0.356563782) + k * (
            zm.f32(1.781477937) + k * (zm.f32(-1.821255978) + k * zm.f32(1.330274429))))))
    return zm.f32(1.0) - c if d > 0 else c


@zm.kernel
def black_scholes(S, X, T, call, put, r, v):
    i = zm.grid(1)
    if i < S.shape[0]:
        s = S[i]
        x = X[i]
        t = T[i]
        sqt = math.sqrt(t)
        d1 = (math.log(s / x) + (r + zm.f32(0.5) * v * v) * t) / (v * sqt)
        d2 = d1 - v * sqt
        c1 = cnd(d1)
        c2 = cnd(d2)
        ert = math.exp(-r * t)
        call[i] = s * c1 - x * ert * c2
        put[i] = x * ert * (zm.f32(1.0) - c2) - s * (zm.f32(1.0) - c1)


@zm.kernel
def trig_chain(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        a = x[i]
        acc = zm.f32(0.0)
        for k in range(16):
            a = (math.sin(a) * math.exp(-a * a) + math.log(zm.f32(1.0) + a * a)
                 + math.sqrt(math.fabs(a) + zm.f32(1.0)))
            acc += a
        y[i] = acc


DEVICE_FUNCS = [cnd]

# ------------------------------------------------------------------------------------------------
# The same kernels in CUDA C (NVRTC through CuPy)
# ------------------------------------------------------------------------------------------------
CUDA_SOURCE = r"""
#define TILE 16
#define TD 32
#define BR 8
#define NB 16
#define PF_BLOCK 256
#define NT 256
#define IN_RANGE(x, lo, hi) ((x) >= (lo) && (x) <= (hi))

__device__ int max3(int a, int b, int c) { int k = a > b ? a : b; return k > c ? k : c; }

__device__ float cnd(float d) {
  float k = 1.0f / (1.0f + 0.2316419f * fabsf(d));
  float c = 0.3989422804014327f * expf(-0.5f * d * d) *
            (k * (0.31938153f + k * (-0.356563782f + k * (1.781477937f + k * (-1.821255978f +
             k * 1.330274429f)))));
  return d > 0 ? 1.0f - c : c;
}

extern "C" {

__global__ void spin_ns(long long ns) {   // timing helper, not benchmarked
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < (unsigned long long)ns);
}

__global__ void triad(float* a, const float* b, const float* c, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = b[i] + s * c[i];
}

__global__ void block_reduce(const float* x, float* partial, int n) {
  __shared__ float sm[256];
  int t = threadIdx.x;
  int i = blockIdx.x * 512 + t;
  float v = 0.0f;
  if (i < n) v = x[i];
  if (i + 256 < n) v += x[i + 256];
  sm[t] = v;
  __syncthreads();
  for (int stride = 128; stride > 0; stride /= 2) {
    if (t < stride) sm[t] += sm[t + stride];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = sm[0];
}

__global__ void warp_reduce(const float* x, float* out, int n) {
  __shared__ float warp_sums[32];
  int t = threadIdx.x, lane = t & 31, wid = t >> 5;
  float v = 0.0f;
  int stride = gridDim.x * blockDim.x;
  for (int i = blockIdx.x * blockDim.x + t; i < n; i += stride) v += x[i];
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffff, v, off);
  if (lane == 0) warp_sums[wid] = v;
  __syncthreads();
  if (wid == 0) {
    v = lane < (blockDim.x >> 5) ? warp_sums[lane] : 0.0f;
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffff, v, off);
    if (lane == 0) atomicAdd(out, v);
  }
}

__global__ void sgemm(const float* a, const float* b, float* c, int n) {
  __shared__ float sa[TILE][TILE];
  __shared__ float sb[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += TILE) {
    sa[ty][tx] = a[row * n + k0 + tx];
    sb[ty][tx] = b[(k0 + ty) * n + col];
    __syncthreads();
    for (int k = 0; k < TILE; k++) acc += sa[ty][k] * sb[k][tx];
    __syncthreads();
  }
  c[row * n + col] = acc;
}

__global__ void transpose(const float* src, float* dst, int n) {
  __shared__ float tile[TD][TD + 1];
  int x = blockIdx.x * TD + threadIdx.x, y = blockIdx.y * TD + threadIdx.y;
  for (int j = 0; j < TD; j += BR) tile[threadIdx.y + j][threadIdx.x] = src[(y + j) * n + x];
  __syncthreads();
  x = blockIdx.y * TD + threadIdx.x;
  y = blockIdx.x * TD + threadIdx.y;
  for (int j = 0; j < TD; j += BR) dst[(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}

__global__ void hotspot(const float* temp, const float* power, float* out, int rows, int cols,
                        float cap, float rx, float ry, float rz, float amb) {
  int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) {
    float t = temp[r * cols + c];
    float nn = temp[max(r - 1, 0) * cols + c];
    float s = temp[min(r + 1, rows - 1) * cols + c];
    float w = temp[r * cols + max(c - 1, 0)];
    float e = temp[r * cols + min(c + 1, cols - 1)];
    out[r * cols + c] = t + cap * (power[r * cols + c] + (nn + s - 2.0f * t) * ry
                                   + (e + w - 2.0f * t) * rx + (amb - t) * rz);
  }
}

__global__ void histogram(const int* values, int* bins, int n) {
  __shared__ int h[256];
  int t = threadIdx.x;
  h[t] = 0;
  __syncthreads();
  int stride = gridDim.x * blockDim.x;
  for (int i = blockIdx.x * blockDim.x + t; i < n; i += stride) atomicAdd(&h[values[i] & 255], 1);
  __syncthreads();
  atomicAdd(&bins[t], h[t]);
}

__global__ void nw_diag(const int* ref, int* mat, int cols, int penalty, int diag, int phase,
                        int block_width) {
  __shared__ int temp[NB + 1][NB + 1];
  __shared__ int rf[NB][NB];
  int bx = blockIdx.x, tx = threadIdx.x;
  int bix, biy;
  if (phase == 0) { bix = bx; biy = diag - 1 - bx; }
  else { bix = bx + block_width - diag; biy = block_width - bx - 1; }
  int base = cols * NB * biy + NB * bix;
  int index = base + tx + cols + 1, index_n = base + tx + 1, index_w = base + cols;
  if (tx == 0) temp[0][0] = mat[base];
  for (int ty = 0; ty < NB; ty++) rf[ty][tx] = ref[index + cols * ty];
  __syncthreads();
  temp[tx + 1][0] = mat[index_w + cols * tx];
  __syncthreads();
  temp[0][tx + 1] = mat[index_n];
  __syncthreads();
  for (int m = 0; m < NB; m++) {
    if (tx <= m) {
      int x = tx + 1, y = m - tx + 1;
      temp[y][x] = max3(temp[y - 1][x - 1] + rf[y - 1][x - 1], temp[y][x - 1] - penalty,
                        temp[y - 1][x] - penalty);
    }
    __syncthreads();
  }
  for (int m = NB - 2; m >= 0; m--) {
    if (tx <= m) {
      int x = tx + NB - m, y = NB - tx;
      temp[y][x] = max3(temp[y - 1][x - 1] + rf[y - 1][x - 1], temp[y][x - 1] - penalty,
                        temp[y - 1][x] - penalty);
    }
    __syncthreads();
  }
  for (int ty = 0; ty < NB; ty++) mat[index + ty * cols] = temp[ty + 1][tx + 1];
}

__global__ void pathfinder(int iteration, const int* wall, const int* src, int* dst, int cols,
                           int start_step, int border) {
  __shared__ int prev[PF_BLOCK];
  __shared__ int result[PF_BLOCK];
  int bx = blockIdx.x, tx = threadIdx.x;
  int small_cols = PF_BLOCK - iteration * 2;
  int blk_x = small_cols * bx - border;
  int blk_xmax = blk_x + PF_BLOCK - 1;
  int xidx = blk_x + tx;
  int valid_min = blk_x < 0 ? -blk_x : 0;
  int valid_max = blk_xmax > cols - 1 ? PF_BLOCK - 1 - (blk_xmax - cols + 1) : PF_BLOCK - 1;
  int w = max(tx - 1, valid_min), e = min(tx + 1, valid_max);
  bool is_valid = IN_RANGE(tx, valid_min, valid_max);
  if (IN_RANGE(xidx, 0, cols - 1)) prev[tx] = src[xidx];
  __syncthreads();
  bool computed = false;
  for (int i = 0; i < iteration; i++) {
    computed = false;
    if (IN_RANGE(tx, i + 1, PF_BLOCK - i - 2) && is_valid) {
      computed = true;
      int shortest = min(min(prev[w], prev[tx]), prev[e]);
      result[tx] = shortest + wall[cols * (start_step + i) + xidx];
    }
    __syncthreads();
    if (i == iteration - 1) break;
    if (computed) prev[tx] = result[tx];
    __syncthreads();
  }
  if (computed) dst[xidx] = result[tx];
}

__global__ void nbody(const float* pos, float* acc, int n, float eps2) {
  __shared__ float sh[NT][4];
  int i = blockIdx.x * blockDim.x + threadIdx.x, t = threadIdx.x;
  float px = pos[i * 4], py = pos[i * 4 + 1], pz = pos[i * 4 + 2];
  float ax = 0.0f, ay = 0.0f, az = 0.0f;
  for (int tile = 0; tile < n; tile += NT) {
    sh[t][0] = pos[(tile + t) * 4];
    sh[t][1] = pos[(tile + t) * 4 + 1];
    sh[t][2] = pos[(tile + t) * 4 + 2];
    sh[t][3] = pos[(tile + t) * 4 + 3];
    __syncthreads();
    for (int j = 0; j < NT; j++) {
      float dx = sh[j][0] - px, dy = sh[j][1] - py, dz = sh[j][2] - pz;
      float r2 = dx * dx + dy * dy + dz * dz + eps2;
      float inv = 1.0f / sqrtf(r2);
      float s = sh[j][3] * inv * inv * inv;
      ax += dx * s; ay += dy * s; az += dz * s;
    }
    __syncthreads();
  }
  acc[i * 3] = ax; acc[i * 3 + 1] = ay; acc[i * 3 + 2] = az;
}

__global__ void black_scholes(const float* S, const float* X, const float* T, float* call,
                              float* put, float r, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float s = S[i], x = X[i], t = T[i];
    float sqt = sqrtf(t);
    float d1 = (logf(s / x) + (r + 0.5f * v * v) * t) / (v * sqt);
    float d2 = d1 - v * sqt;
    float c1 = cnd(d1), c2 = cnd(d2);
    float ert = expf(-r * t);
    call[i] = s * c1 - x * ert * c2;
    put[i] = x * ert * (1.0f - c2) - s * (1.0f - c1);
  }
}

__global__ void trig_chain(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float a = x[i], acc = 0.0f;
    for (int k = 0; k < 16; k++) {
      a = sinf(a) * expf(-a * a) + logf(1.0f + a * a) + sqrtf(fabsf(a) + 1.0f);
      acc += a;
    }
    y[i] = acc;
  }
}

}  // extern "C"
"""

# ------------------------------------------------------------------------------------------------
# numba-cuda: the same Python source, `zm.` -> `cuda.`
# ------------------------------------------------------------------------------------------------
_NUMBA_NS: dict | None = None


def _numba_source(fn) -> str:
    src = textwrap.dedent(inspect.getsource(fn))
    src = "\n".join(line for line in src.splitlines() if not line.lstrip().startswith("@"))
    src = re.sub(r"\bzm\.f32\b", "numba.float32", src)
    src = re.sub(r"\bzm\.i32\b", "numba.int32", src)
    return re.sub(r"\bzm\.", "cuda.", src)


def numba_kernel(kernel):
    """numba-cuda's compilation of the zymo kernel's own source."""
    global _NUMBA_NS
    import numba
    from numba import cuda
    if _NUMBA_NS is None:
        _NUMBA_NS = {k: v for k, v in globals().items()}
        _NUMBA_NS.update(cuda=cuda, numba=numba, math=math)
        for func in DEVICE_FUNCS:
            py = func.py_func if hasattr(func, "py_func") else func
            exec(compile(_numba_source(py), f"<numba {py.__name__}>", "exec"), _NUMBA_NS)
            _NUMBA_NS[py.__name__] = cuda.jit(device=True)(_NUMBA_NS[py.__name__])
    py = kernel.py_func
    exec(compile(_numba_source(py), f"<numba {py.__name__}>", "exec"), _NUMBA_NS)
    return cuda.jit(_NUMBA_NS[py.__name__])


# ------------------------------------------------------------------------------------------------
# Cases: data, launch closures for the three implementations, reference
# ------------------------------------------------------------------------------------------------
class Case:
    def __init__(self, name, size, kernel, make, outs, run_zymo, run_c, run_numba, ref=None,
                 tol=1e-4, launches=1):
        self.name, self.size, self.kernel, self.make, self.outs = name, size, kernel, make, outs
        self.launches = launches
        self.run = {"zymo": run_zymo, "cuda_c": run_c, "numba": run_numba}
        self.ref, self.tol = ref, tol


def cdiv(a, b):
    return (a + b - 1) // b


def build_cases(quick: bool, cp, module):
    """module: the CuPy RawModule; returns a list of Case."""
    i32, f32 = np.int32, np.float32
    cases = []
    rng = cp.random.default_rng(0) if hasattr(cp.random, "default_rng") else None

    def urand(shape, lo=0.0, hi=1.0):
        a = cp.random.random(shape, dtype=cp.float32) if rng is None else \
            rng.random(shape, dtype=cp.float32)
        return (a * (hi - lo) + lo).astype(cp.float32)

    def irand(shape, lo, hi):
        return cp.random.randint(lo, hi, size=shape, dtype=cp.int32)

    cp.random.seed(0)

    # 1 triad
    n = 1 << (20 if quick else 26)
    b0, c0 = urand(n), urand(n)
    s = f32(3.0)
    g = cdiv(n, 256)
    cases.append(Case(
        "stream triad", f"n=2^{n.bit_length() - 1} f32", triad,
        lambda: [cp.zeros(n, cp.float32), b0, c0],
        lambda a: [a[0]],
        lambda a, k: k[g, 256](a[0], a[1], a[2], s),
        lambda a, k: k((g,), (256,), (a[0], a[1], a[2], s, i32(n))),
        lambda a, k: k[g, 256](a[0], a[1], a[2], s),
        ref=lambda: [b0 + s * c0]))

    # 2 shared-memory block reduction
    x = urand(n)
    gb = cdiv(n, 512)
    cases.append(Case(
        "block reduction (shared)", f"n=2^{n.bit_length() - 1} f32", block_reduce,
        lambda: [x, cp.zeros(gb, cp.float32)],
        lambda a: [a[1]],
        lambda a, k: k[gb, 256](a[0], a[1]),
        lambda a, k: k((gb,), (256,), (a[0], a[1], i32(n))),
        lambda a, k: k[gb, 256](a[0], a[1]),
        ref=lambda: [x.reshape(-1, 512).sum(axis=1, dtype=cp.float64).astype(cp.float32)]))

    # 3 warp-shuffle reduction (grid-stride, one atomic per block)
    gw = 128 if quick else 1056
    cases.append(Case(
        "warp-shuffle reduction", f"n=2^{n.bit_length() - 1} f32", warp_reduce,
        lambda: [x, cp.zeros(1, cp.float32)],
        lambda a: [a[1]],
        lambda a, k: k[gw, 256](a[0], a[1]),
        lambda a, k: k((gw,), (256,), (a[0], a[1], i32(n))),
        lambda a, k: k[gw, 256](a[0], a[1]),
        ref=lambda: [x.sum(dtype=cp.float64).astype(cp.float32).reshape(1)]))

    # 4 SGEMM
    m = 512 if quick else 2048
    A, B = urand((m, m), -1, 1), urand((m, m), -1, 1)
    gs = (m // TILE, m // TILE)
    cases.append(Case(
        f"SGEMM (shared {TILE}x{TILE} tiles)", f"{m}x{m}", sgemm,
        lambda: [A, B, cp.zeros((m, m), cp.float32)],
        lambda a: [a[2]],
        lambda a, k: k[gs, (TILE, TILE)](a[0], a[1], a[2]),
        lambda a, k: k(gs, (TILE, TILE), (a[0], a[1], a[2], i32(m))),
        lambda a, k: k[gs, (TILE, TILE)](a[0], a[1], a[2]),
        ref=lambda: [A @ B]))

    # 5 transpose
    t = 1024 if quick else 8192
    T0 = urand((t, t))
    gt = (t // TD, t // TD)
    cases.append(Case(
        "transpose (shared, padded tile)", f"{t}x{t} f32", transpose,
        lambda: [T0, cp.zeros((t, t), cp.float32)],
        lambda a: [a[1]],
        lambda a, k: k[gt, (TD, BR)](a[0], a[1]),
        lambda a, k: k(gt, (TD, BR), (a[0], a[1], i32(t))),
        lambda a, k: k[gt, (TD, BR)](a[0], a[1]),
        ref=lambda: [cp.ascontiguousarray(T0.T)], tol=0.0))

    # 6 hotspot-like stencil
    h = 1024 if quick else 4096
    temp0, power0 = urand((h, h), 320.0, 340.0), urand((h, h), 0.0, 1.0)
    cap, rx, ry, rz, amb = f32(0.5), f32(0.1), f32(0.1), f32(0.05), f32(80.0)
    gh = (h // 16, h // 16)

    def hot_ref():
        p = cp.pad(temp0, 1, mode="edge")
        tt = p[1:-1, 1:-1]
        return [tt + cap * (power0 + (p[:-2, 1:-1] + p[2:, 1:-1] - f32(2) * tt) * ry
                            + (p[1:-1, 2:] + p[1:-1, :-2] - f32(2) * tt) * rx + (amb - tt) * rz)]
    cases.append(Case(
        "2-D stencil (hotspot-like, 5-point + source)", f"{h}x{h} f32", hotspot,
        lambda: [temp0, power0, cp.zeros((h, h), cp.float32)],
        lambda a: [a[2]],
        lambda a, k: k[gh, (16, 16)](a[0], a[1], a[2], cap, rx, ry, rz, amb),
        lambda a, k: k(gh, (16, 16), (a[0], a[1], a[2], i32(h), i32(h), cap, rx, ry, rz, amb)),
        lambda a, k: k[gh, (16, 16)](a[0], a[1], a[2], cap, rx, ry, rz, amb),
        ref=hot_ref, tol=1e-5))

    # 7 histogram (shared-memory privatized, 256 bins)
    values = irand(n, 0, 256)
    gg = 128 if quick else 2112
    cases.append(Case(
        "histogram (shared atomics, 256 bins)", f"n=2^{n.bit_length() - 1} i32", histogram,
        lambda: [values, cp.zeros(256, cp.int32)],
        lambda a: [a[1]],
        lambda a, k: k[gg, 256](a[0], a[1]),
        lambda a, k: k((gg,), (256,), (a[0], a[1], i32(n))),
        lambda a, k: k[gg, 256](a[0], a[1]),
        ref=lambda: [cp.bincount(values, minlength=256).astype(cp.int32)], tol=0.0))

    # 8 Needleman-Wunsch (Rodinia nw, both diagonal kernels folded into one with a phase flag)
    nn = 512 if quick else 2048
    cols = nn + 1
    penalty = 10
    ref_m = irand((cols, cols), -4, 11)
    ref_m[0, :] = 0
    ref_m[:, 0] = 0
    ref_flat = ref_m.reshape(-1)
    init = cp.zeros((cols, cols), cp.int32)
    init[0, :] = -penalty * cp.arange(cols, dtype=cp.int32)
    init[:, 0] = -penalty * cp.arange(cols, dtype=cp.int32)
    bw = nn // NB

    def nw_run(style):
        def run(a, k):
            for d in range(1, bw + 1):
                _launch(style, k, (d,), (NB,), (a[0], a[1], i32(cols), i32(penalty), i32(d),
                                                  i32(0), i32(bw)))
            for d in range(bw - 1, 0, -1):
                _launch(style, k, (d,), (NB,), (a[0], a[1], i32(cols), i32(penalty), i32(d),
                                                  i32(1), i32(bw)))
        return run

    def nw_ref():
        R = cp.asnumpy(ref_m).astype(np.int64)
        S = cp.asnumpy(init).astype(np.int64)
        for d in range(2, 2 * nn + 1):
            ii = np.arange(max(1, d - nn), min(nn, d - 1) + 1)
            jj = d - ii
            diagonal = S[ii - 1, jj - 1] + R[ii, jj]
            S[ii, jj] = np.maximum(np.maximum(diagonal, S[ii, jj - 1] - penalty),
                                   S[ii - 1, jj] - penalty)
        return [S.astype(np.int32).reshape(-1)]
    cases.append(Case(
        "Needleman-Wunsch (Rodinia nw, 16x16 blocks)", f"{nn}x{nn}, {2 * bw - 1} launches",
        nw_diag,
        lambda: [ref_flat, init.reshape(-1).copy()],
        lambda a: [a[1]],
        nw_run("zymo"), nw_run("cuda_c"), nw_run("numba"), ref=nw_ref, tol=0.0,
        launches=2 * bw - 1))

    # 9 pathfinder (Rodinia dynproc, pyramid height 20)
    pcols = 1 << (16 if quick else 20)
    prows = 100 if quick else 400
    pyramid = 20
    data = irand((prows, pcols), 0, 10)
    first = data[0].copy()
    wall = data[1:].reshape(-1)
    border = pyramid
    small = PF_BLOCK - pyramid * 2
    gp = cdiv(pcols, small)
    steps = list(range(0, prows - 1, pyramid))

    def pf_run(style):
        def run(a, k):
            src = a[0]
            bufs = (a[1], a[2])
            for idx, tstep in enumerate(steps):
                dst = bufs[idx % 2]
                it = min(pyramid, prows - tstep - 1)
                _launch(style, k, (gp,), (PF_BLOCK,), (i32(it), a[3], src, dst, i32(pcols),
                                                         i32(tstep), i32(border)))
                src = dst
        return run

    def pf_ref():
        p = data[0].copy()
        for r in range(1, prows):
            left = cp.concatenate([p[:1], p[:-1]])
            right = cp.concatenate([p[1:], p[-1:]])
            p = cp.minimum(cp.minimum(left, p), right) + data[r]
        return [p]
    last = (len(steps) - 1) % 2
    cases.append(Case(
        "pathfinder (Rodinia, shared, pyramid 20)", f"{pcols} cols x {prows} rows, "
        f"{len(steps)} launches", pathfinder,
        lambda: [first, cp.zeros(pcols, cp.int32), cp.zeros(pcols, cp.int32), wall],
        lambda a: [a[1 + last]],
        pf_run("zymo"), pf_run("cuda_c"), pf_run("numba"), ref=pf_ref, tol=0.0,
        launches=len(steps)))

    # 10 n-body
    nb = 2048 if quick else 16384
    pos = urand((nb, 4), -1.0, 1.0)
    pos[:, 3] = urand(nb, 0.5, 1.0)
    eps2 = f32(1e-2)
    gn = nb // NT

    def nbody_ref():
        P = cp.asnumpy(pos).astype(np.float64)
        sel = P[:128]
        d = P[None, :, :3] - sel[:, None, :3]
        r2 = (d ** 2).sum(-1) + float(eps2)
        s = P[None, :, 3] / r2 ** 1.5
        return [(d * s[..., None]).sum(1).astype(np.float32)]
    cases.append(Case(
        "n-body (all pairs, shared tiles)", f"{nb} bodies f32", nbody,
        lambda: [pos, cp.zeros((nb, 3), cp.float32)],
        lambda a: [a[1]],
        lambda a, k: k[gn, NT](a[0], a[1], eps2),
        lambda a, k: k((gn,), (NT,), (a[0], a[1], i32(nb), eps2)),
        lambda a, k: k[gn, NT](a[0], a[1], eps2),
        ref=nbody_ref, tol=1e-4))

    # 11 Black-Scholes
    nbs = 1 << (20 if quick else 24)
    S0, X0, T0b = urand(nbs, 5.0, 30.0), urand(nbs, 1.0, 100.0), urand(nbs, 0.25, 10.0)
    r_, v_ = f32(0.02), f32(0.30)
    gbs = cdiv(nbs, 256)

    def bs_ref():
        from math import erf
        Sd, Xd, Td = (cp.asnumpy(a[:4096]).astype(np.float64) for a in (S0, X0, T0b))
        r, v = float(r_), float(v_)
        d1 = (np.log(Sd / Xd) + (r + 0.5 * v * v) * Td) / (v * np.sqrt(Td))
        d2 = d1 - v * np.sqrt(Td)
        N = np.vectorize(lambda z: 0.5 * (1 + erf(z / math.sqrt(2))))
        e = np.exp(-r * Td)
        return [(Sd * N(d1) - Xd * e * N(d2)).astype(np.float32),
                (Xd * e * N(-d2) - Sd * N(-d1)).astype(np.float32)]
    cases.append(Case(
        "Black-Scholes (exp/log/sqrt)", f"n=2^{nbs.bit_length() - 1} options", black_scholes,
        lambda: [S0, X0, T0b, cp.zeros(nbs, cp.float32), cp.zeros(nbs, cp.float32)],
        lambda a: [a[3], a[4]],
        lambda a, k: k[gbs, 256](a[0], a[1], a[2], a[3], a[4], r_, v_),
        lambda a, k: k((gbs,), (256,), (a[0], a[1], a[2], a[3], a[4], r_, v_, i32(nbs))),
        lambda a, k: k[gbs, 256](a[0], a[1], a[2], a[3], a[4], r_, v_),
        ref=bs_ref, tol=2e-4))

    # 12 transcendental chain
    xt = urand(nbs, -2.0, 2.0)

    def trig_ref():
        a = cp.asnumpy(xt[:65536]).astype(np.float64)
        acc = np.zeros_like(a)
        for _ in range(16):
            a = np.sin(a) * np.exp(-a * a) + np.log(1 + a * a) + np.sqrt(np.abs(a) + 1)
            acc += a
        return [acc.astype(np.float32)]
    cases.append(Case(
        "transcendental chain (16x sin/exp/log/sqrt)", f"n=2^{nbs.bit_length() - 1} f32",
        trig_chain,
        lambda: [xt, cp.zeros(nbs, cp.float32)],
        lambda a: [a[1]],
        lambda a, k: k[gbs, 256](a[0], a[1]),
        lambda a, k: k((gbs,), (256,), (a[0], a[1], i32(nbs))),
        lambda a, k: k[gbs, 256](a[0], a[1]),
        ref=trig_ref, tol=1e-5))
    return cases


def _launch(style, k, grid, block, args):
    if style == "cuda_c":
        k(grid, block, args)
    else:
        k[grid, block](*args)


# ------------------------------------------------------------------------------------------------
# Harness
# ------------------------------------------------------------------------------------------------
def _rel_err(a: np.ndarray, b: np.ndarray) -> float:
    a = a.astype(np.float64).reshape(-1)
    b = b.astype(np.float64).reshape(-1)
    scale = max(np.abs(b).max(), 1e-30)
    return float(np.abs(a - b).max() / scale)


def _to_numba(args):
    from numba import cuda
    import cupy as cp
    return [cuda.as_cuda_array(a) if isinstance(a, cp.ndarray) else a for a in args]


def _regs(case, impl, handle, args) -> str:
    """'registers/local bytes' of the compiled kernel (local bytes > 0 means spills or stack)."""
    try:
        if impl == "cuda_c":
            if hasattr(handle, "num_regs"):
                return f"{handle.num_regs}/{handle.local_size_bytes}"
            at = handle.attributes
            return f"{at['num_regs']}/{at['local_size_bytes']}"
        if impl == "zymo":
            from zymo.runtime.cuda import driver
            drv = driver.bindings()
            program = next(iter(handle._specs.values())).compiled("cuda")
            fn = program.function(driver.current_device())
            attr = drv.CUfunction_attribute
            regs = drv.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_NUM_REGS, fn)[1]
            local = drv.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn)[1]
            return f"{regs}/{local}"
        regs = handle.get_regs_per_thread()
        local = handle.get_local_mem_per_thread()
        if isinstance(regs, dict):
            regs = list(regs.values())[0]
        if isinstance(local, dict):
            local = list(local.values())[0]
        return f"{regs}/{local}"
    except Exception as error:  # informational only
        return f"? ({type(error).__name__})"


def bench_case(case, cp, module) -> dict:
    row = {"name": case.name, "size": case.size, "ms": {}, "err": {}, "regs": {}, "notes": []}
    impls = {"zymo": case.kernel, "cuda_c": module.get_function(case.kernel.__name__)}
    try:
        impls["numba"] = numba_kernel(case.kernel)
    except Exception as error:
        row["notes"].append(f"numba failed: {type(error).__name__}: {error}")
    argsets = {}
    outputs = {}
    for impl, handle in impls.items():
        try:
            args = case.make()
            call_args = _to_numba(args) if impl == "numba" else args
            case.run[impl](call_args, handle)       # compile + correctness run on fresh data
            cp.cuda.Device().synchronize()
            outputs[impl] = [cp.asnumpy(o) for o in case.outs(args)]
            argsets[impl] = call_args
            row["regs"][impl] = _regs(case, impl, handle, args)
        except Exception as error:
            row["notes"].append(f"{impl} failed: {type(error).__name__}: "
                                f"{str(error).splitlines()[0][:160] if str(error) else ''}")
            traceback.print_exc()
    # correctness gate: against CUDA C (or the first that ran), and against the reference
    base = "cuda_c" if "cuda_c" in outputs else next(iter(outputs), None)
    reference = None
    if case.ref is not None:
        try:
            reference = [cp.asnumpy(r) if isinstance(r, cp.ndarray) else r for r in case.ref()]
        except Exception as error:
            row["notes"].append(f"reference failed: {type(error).__name__}: {error}")
    ok = {}
    for impl, outs in outputs.items():
        errs = []
        if base and impl != base:
            errs.append(max(_rel_err(o, b) for o, b in zip(outs, outputs[base])))
        if reference is not None:
            errs.append(max(_rel_err(o[: r.shape[0]] if o.shape != r.shape else o, r)
                            for o, r in zip(outs, reference)))
        err = max(errs) if errs else 0.0
        row["err"][impl] = err
        tol = case.tol if case.tol > 0 else 0.0
        ok[impl] = err <= max(tol * 10, 0.0) if tol > 0 else err == 0.0
        if not ok[impl]:
            row["notes"].append(f"{impl} WRONG (max rel err {err:.2e})")
    # timing: interleaved rounds
    times = {impl: [] for impl in argsets if ok.get(impl)}
    for impl in times:
        for _ in range(WARMUP):
            case.run[impl](argsets[impl], impls[impl])
    cp.cuda.Device().synchronize()
    # (a) GPU time: a spin kernel holds the GPU while the runs are queued behind it, so host
    # launch overhead is hidden and events measure the kernels alone (<= 600 queued launches).
    per_round = max(1, min(REPS, 600 // case.launches))
    rounds = max(ROUNDS, -(-ROUNDS * REPS // per_round))
    spin = module.get_function("spin_ns")
    spin_ns = np.int64(min(200_000_000, 5_000_000 + per_round * case.launches * 60_000))
    for _ in range(rounds):
        for impl in times:
            run, a, k = case.run[impl], argsets[impl], impls[impl]
            events = [cp.cuda.Event() for _ in range(per_round + 1)]
            spin((1,), (1,), (spin_ns,))
            events[0].record()
            for r in range(per_round):
                run(a, k)
                events[r + 1].record()
            events[-1].synchronize()
            times[impl] += [cp.cuda.get_elapsed_time(events[r], events[r + 1])
                            for r in range(per_round)]
    row["ms"] = {impl: float(np.median(ts)) for impl, ts in times.items()}
    row["n"] = {impl: len(ts) for impl, ts in times.items()}
    # (b) end to end: runs queued back to back from an idle GPU, host launch cost included
    e2e = {impl: [] for impl in times}
    for _ in range(ROUNDS):
        for impl in e2e:
            run, a, k = case.run[impl], argsets[impl], impls[impl]
            cp.cuda.Device().synchronize()
            events = [cp.cuda.Event() for _ in range(REPS + 1)]
            events[0].record()
            for r in range(REPS):
                run(a, k)
                events[r + 1].record()
            events[-1].synchronize()
            e2e[impl] += [cp.cuda.get_elapsed_time(events[r], events[r + 1])
                          for r in range(REPS)]
    row["e2e"] = {impl: float(np.median(ts)) for impl, ts in e2e.items()}
    return row


def environment(cp) -> str:
    from importlib.metadata import PackageNotFoundError, version

    def v(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return "?"
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    drv = cp.cuda.runtime.driverGetVersion()
    rt = cp.cuda.runtime.runtimeGetVersion()
    try:
        nvrtc = ".".join(map(str, cp.cuda.nvrtc.getVersion()))
    except Exception:
        nvrtc = "?"
    try:
        import subprocess
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        smi = "?"
    return (f"GPU: {name} (sm_{props['major']}{props['minor']}, {props['multiProcessorCount']} SMs)"
            f", driver {smi} (CUDA driver API {drv // 1000}.{drv % 1000 // 10}), CUDA runtime "
            f"{rt // 1000}.{rt % 1000 // 10}, NVRTC {nvrtc}; CuPy {cp.__version__}, numba-cuda "
            f"{v('numba-cuda')} (numba {v('numba')}), llvmlite {v('llvmlite')}, cuda-bindings "
            f"{v('cuda-bindings')}, NumPy {np.__version__}, Python {sys.version.split()[0]}"), name


def run_suite(quick: bool = False, output: str | None = None) -> int:
    os.environ.setdefault("NUMBA_CUDA_ARRAY_INTERFACE_SYNC", "0")
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack   # numba-cuda 0.30.4 still calls it; gone in NumPy 2.5
    warnings.filterwarnings("ignore")
    import cupy as cp
    started = time.perf_counter()
    module = cp.RawModule(code=CUDA_SOURCE, options=("-std=c++17",))
    env, gpu = environment(cp)
    cases = build_cases(quick, cp, module)
    rows = []
    for case in cases:
        t0 = time.perf_counter()
        try:
            row = bench_case(case, cp, module)
        except Exception as error:
            traceback.print_exc()
            row = {"name": case.name, "size": case.size, "ms": {}, "err": {}, "regs": {},
                   "notes": [f"case failed: {type(error).__name__}: {error}"]}
        rows.append(row)
        print(f"[{time.perf_counter() - t0:6.1f}s] {row['name']}: {row['ms']} {row['notes']}",
              file=sys.stderr, flush=True)
        cp.get_default_memory_pool().free_all_blocks()

    ptx_dir = os.environ.get("ZYMO_BENCH_PTX_DIR")
    if ptx_dir:       # for looking into outliers: zymo's PTX and NVRTC's, side by side
        Path(ptx_dir).mkdir(parents=True, exist_ok=True)
        for case in cases:
            try:
                spec = next(iter(case.kernel._specs.values()))
                Path(ptx_dir, f"{case.kernel.__name__}.zymo.ptx").write_text(
                    spec.compiled("cuda").ptx)
            except Exception as error:
                print(f"ptx dump {case.kernel.__name__}: {error}", file=sys.stderr)
        try:
            try:
                from cuda.core import Program, ProgramOptions
            except ImportError:
                from cuda.core.experimental import Program, ProgramOptions
            props = cp.cuda.runtime.getDeviceProperties(0)
            prog = Program(CUDA_SOURCE, "c++",
                           ProgramOptions(arch=f"sm_{props['major']}{props['minor']}"))
            code = prog.compile("ptx").code
            Path(ptx_dir, "cuda_c.nvrtc.ptx").write_text(
                code.decode() if isinstance(code, bytes) else str(code))
        except Exception as error:
            print(f"ptx dump nvrtc: {error}", file=sys.stderr)

    def f(x):
        return "-" if x is None else f"{x:.4f}" if x < 1 else f"{x:.3f}"
    title = "# GPU kernel time: zymo vs CUDA C (NVRTC) vs numba-cuda"
    lines = [f"{title}{' (quick)' if quick else ''}",
             "", env, "",
             f"Milliseconds per run (one launch, or the whole application for nw and pathfinder), "
             f"CUDA events, median of >= {ROUNDS * REPS} runs after {WARMUP} warm-up runs, "
             "implementations interleaved by round. The zymo / CUDA C / numba columns are GPU "
             "time: each round's runs are queued behind a spin kernel, so host launch overhead is "
             "hidden. "
             "'end-to-end' queues the runs from an idle GPU, so a run shorter than a host launch "
             "(or the 255 small launches of nw) shows launch overhead too. Same algorithm, launch "
             "configuration and data for all three; the numba kernel is the zymo kernel's own "
             "source. Ratios < 1 mean zymo is faster. regs = registers/local bytes per thread "
             "(zymo / CUDA C / numba).", "",
             "| kernel | size | zymo ms | CUDA C ms | numba ms | zymo/CUDA C | zymo/numba | regs "
             "z / C / nb | end-to-end ms z / C / nb | max rel err z / nb |",
             "|---|---|---:|---:|---:|---:|---:|---|---|---|"]
    ratios = []
    for row in rows:
        ms = row["ms"]
        z, c, nb = ms.get("zymo"), ms.get("cuda_c"), ms.get("numba")
        rc = z / c if z and c else None
        rn = z / nb if z and nb else None
        if rc:
            ratios.append(rc)
        regs = " / ".join(row["regs"].get(k, "-") for k in ("zymo", "cuda_c", "numba"))
        errs = " / ".join(f"{row['err'][k]:.1e}" if k in row["err"] else "-"
                          for k in ("zymo", "numba"))
        e2e = " / ".join(f(row.get("e2e", {}).get(k)) for k in ("zymo", "cuda_c", "numba"))
        lines.append(f"| {row['name']} | {row['size']} | {f(z)} | {f(c)} | {f(nb)} | "
                     f"{f'{rc:.2f}x' if rc else '-'} | {f'{rn:.2f}x' if rn else '-'} | {regs} | "
                     f"{e2e} | {errs} |")
    geo = float(np.exp(np.mean(np.log(ratios)))) if ratios else float("nan")
    lines += ["", f"**Geometric mean zymo / CUDA C: {geo:.3f}** over {len(ratios)} kernels; "
              f"above 1.10x: {sum(r > 1.10 for r in ratios)}; worst "
              f"{max(ratios):.2f}x." if ratios else "no ratios"]
    notes = [f"- {row['name']}: {n}" for row in rows for n in row["notes"]]
    if notes:
        lines += ["", "Notes:"] + notes
    lines.append(f"\nSuite wall time {time.perf_counter() - started:.0f} s.")
    report = "\n".join(lines)
    print(report)
    if output is None and os.environ.get("OUT"):
        output = os.path.join(os.environ["OUT"], "gpu-kernels.md")
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(report + "\n")
        print(f"\nreport written to {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--output", default=None)
    opts = parser.parse_args()
    sys.exit(run_suite(opts.quick, opts.output))
