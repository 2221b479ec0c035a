"""Rodinia's particle filter (its CUDA "float" version, `ex_particle_CUDA_float_seq.cu`, the one
GEVO built: despite the name it computes in double) as an evolution workload: one launch of
`likelihood_kernel`, for one frame of the video.

The video is Nfr frames of IszX x IszY 8-bit pixels, stored I[x, y, frame] (flat, the frame
fastest). A disk of radius 5 (the 69 offsets with x^2 + y^2 < 25) moves across it on a
background of 100 (the disk is 228), plus Gaussian noise of sigma 5 truncated to an integer.
The particles start at the frame's centre; for each frame k = 1 .. Nfr - 1 Rodinia launches four
kernels, 512 threads a block, one thread per particle:

- `likelihood_kernel` (evolved here): take the resampled position (xj, yj), move it by
  (1 + 5 n1, -2 + 2 n2) with n1, n2 normal draws from the particle's own linear congruential
  generator (GCC's constants, state in `seed`, Box-Muller from two uniform draws each), read the
  69 pixels of frame k under the disk placed at the position (truncated to integers; an index
  past the video reads pixel 0), and set the weight to 1/N exp(mean over the disk of
  ((p - 100)^2 - (p - 228)^2) / 50); each block sums its weights in shared memory into
  `partial_sums`;
- `sum_kernel`, `normalize_weights_kernel` (weights / their sum, the CDF, a uniform draw from
  particle 0's generator for the systematic resampling's offset) and `find_index_kernel` (each
  particle takes the position of the first CDF entry >= its point): NumPy here
  (`normalize`, `resample`), as they leave the state for the next frame.

Which kernel does the most work: the likelihood kernel reads 69 scattered pixels and stores and
reloads 69 indices per particle and draws 4 normals (8 logarithms, cosines, square roots in
double); `find_index_kernel` is a linear search of the CDF, about N/2 steps per particle, so at
GEVO's 9870 particles it makes ~35x as many memory reads (all of the same cached CDF, in step
across a warp). Its time was not in any profile we hold; the likelihood kernel is the one with
the filter's arithmetic, and a search over it is what the task asks for.

GEVO's tests (its particlefilter profile.json): frames of 64^2, 128^2 and 256^2 pixels, 3 or 99
frames, 77 or 9870 particles; fitness here: 128 x 128 x 99 frames, 9870 particles, at a frame k
drawn per evaluation (GEVO's run launches the kernel for every frame), the state before it
made by running the filter in NumPy up to k; held out: 256 x 200 pixels (not square) x 20 frames
and 30011 particles (not a multiple of the block). Random numbers: Rodinia seeds particle i's
generator from the clock (`time(0) * i`; GEVO's copy uses 2 i + 3) and adds the video's noise
from particle 0's generator on the host; here the seeds are drawn from the evaluation's
generator, and so is the noise (the kernel's own generator is Rodinia's, bit for bit).

Error: GEVO's, relative 1% per element on arrayX, arrayY and weights, the three outputs Rodinia
writes: the weights as `normalize_weights_kernel` leaves them (the launch's weights over the sum
of its partial sums, so a wrong block sum counts), and the seeds exactly (integers that every
later frame draws from: GEVO's runs over 3 or 99 frames see a wrong seed as wrong positions in
the next frame). One frame's move is small against the position (~1 pixel against 64, so a
variant that drops the drift of 1 would pass 1% of the position on a 256-pixel frame): the
positions must also be within 1% of the frame's largest move (rodinia_common.step_error).
"""
from __future__ import annotations

import functools
import math

import numpy as np

import zymo as zm

from .rodinia_common import (GEVO_RELATIVE, cdiv, elementwise_relative, seeded_holdout,
                             step_error)
from .workloads import Workload

THREADS = 512          # Rodinia's threads_per_block
RADIUS = 5             # the disk's (and the dilation's) radius
FOREGROUND, BACKGROUND = 228, 100
LCG_A, LCG_C, LCG_M = 1103515245, 12345, 2147483647     # GCC's constants, M = INT_MAX
PI = 3.14159265358979323846

# argument positions (Rodinia's order; CDF and u are passed but only the later kernels use them)
(ARRAY_X, ARRAY_Y, XJ, YJ, CDF, IND, OBJXY, LIKELIHOOD, FRAMES, U, WEIGHTS, N_PARTICLES,
 COUNT_ONES, MAX_SIZE, FRAME, ISZ_Y, NFR, SEED, PARTIAL_SUMS) = range(19)


@zm.func
def randu(seed, i):
    """Particle i's next uniform draw in [0, 1]: C's int arithmetic (wrapping) and C's
    remainder (the sign of the dividend)."""
    num = LCG_A * seed[i] + LCG_C
    rem = num % LCG_M
    if num < 0 and rem != 0:
        rem -= LCG_M
    seed[i] = rem
    return abs(zm.f64(rem) / zm.f64(LCG_M))


@zm.func
def randn(seed, i):
    """A normal draw by Box-Muller."""
    u = randu(seed, i)
    v = randu(seed, i)
    cosine = math.cos(2.0 * PI * v)
    rt = -2.0 * math.log(u)
    return math.sqrt(rt) * cosine


@zm.kernel
def likelihood_kernel(array_x, array_y, xj, yj, cdf, ind, objxy, likelihood, frames, u,
                      weights, n_particles, count_ones, max_size, k, isz_y, nfr, seed,
                      partial_sums):
    buffer = zm.shared.array(THREADS, zm.f64)
    tx = zm.threadIdx.x
    i = zm.blockDim.x * zm.blockIdx.x + tx
    if i < n_particles:
        array_x[i] = xj[i]
        array_y[i] = yj[i]
        weights[i] = 1.0 / zm.f64(n_particles)
        array_x[i] = array_x[i] + 1.0 + 5.0 * randn(seed, i)
        array_y[i] = array_y[i] - 2.0 + 2.0 * randn(seed, i)
    zm.syncthreads()
    if i < n_particles:
        for y in range(count_ones):
            # Rodinia's dev_round_double returns the truncation (its `newValue++` is a
            # post-increment)
            ind_x = zm.i32(array_x[i]) + objxy[y * 2 + 1]
            ind_y = zm.i32(array_y[i]) + objxy[y * 2]
            ind[i * count_ones + y] = abs(ind_x * isz_y * nfr + ind_y * nfr + k)
            if ind[i * count_ones + y] >= max_size:
                ind[i * count_ones + y] = 0
        total = 0.0
        for y in range(count_ones):
            pixel = zm.i32(frames[ind[i * count_ones + y]])
            fg = zm.f64(pixel - BACKGROUND)
            bg = zm.f64(pixel - FOREGROUND)
            total += (fg * fg - bg * bg) / 50.0
        likelihood[i] = total
        likelihood[i] = likelihood[i] / zm.f64(count_ones)
        weights[i] = weights[i] * math.exp(likelihood[i])
    buffer[tx] = 0.0
    zm.syncthreads()
    if i < n_particles:
        buffer[tx] = weights[i]
    zm.syncthreads()
    s = zm.blockDim.x // 2
    while s > 0:
        if tx < s:
            buffer[tx] += buffer[tx + s]
        zm.syncthreads()
        s >>= 1
    if tx == 0:
        partial_sums[zm.blockIdx.x] = buffer[0]
    zm.syncthreads()


# ---- NumPy: the generator, the video, the other three kernels ----------------------------------
def lcg_uniform(seed: np.ndarray, which=slice(None)) -> np.ndarray:
    """randu for the particles `which`, advancing their seeds in place (int32 wrap-around)."""
    s = seed[which].astype(np.int64)
    num = (LCG_A * s + LCG_C + 2 ** 31) % 2 ** 32 - 2 ** 31
    rem = np.fmod(num, LCG_M)
    seed[which] = rem.astype(np.int32)
    return np.abs(rem / float(LCG_M))


def lcg_normal(seed: np.ndarray) -> np.ndarray:
    u = lcg_uniform(seed)
    v = lcg_uniform(seed)
    with np.errstate(divide="ignore"):
        return np.sqrt(-2.0 * np.log(u)) * np.cos(2.0 * PI * v)


def disk_offsets() -> np.ndarray:
    """objxy: (y, x) offsets of the disk's cells, x the outer loop, as Rodinia's getneighbors."""
    d = np.arange(-(RADIUS - 1), RADIUS)
    x, y = np.meshgrid(d, d, indexing="ij")
    inside = x * x + y * y < RADIUS * RADIUS
    return np.stack([y[inside], x[inside]], axis=1).reshape(-1).astype(np.int32)


def video(rng, isz_x: int, isz_y: int, nfr: int) -> np.ndarray:
    """Rodinia's videoSequence: I[x, y, frame] flat, uint8."""
    size = isz_x * isz_y * nfr
    marks = np.zeros(size, np.uint8)
    x0, y0 = int(isz_y / 2.0), int(isz_x / 2.0)
    marks[x0 * isz_y * nfr + y0 * nfr] = 1
    for k in range(1, nfr):
        # Rodinia's frames put the moving point's y where x goes (and spill past a row)
        pos = abs(y0 - 2 * (k - 1)) * isz_y * nfr + abs(x0 + (k - 1)) * nfr + k
        marks[pos if pos < size else 0] = 1
    # dilation by the disk: cells within distance < 5, clipped at the frame
    image = np.zeros((isz_x, isz_y, nfr), np.uint8)
    for x, y, z in zip(*np.nonzero(marks.reshape(isz_x, isz_y, nfr))):
        xs = np.arange(max(x - RADIUS, 0), min(x + RADIUS, isz_x))
        ys = np.arange(max(y - RADIUS, 0), min(y + RADIUS, isz_y))
        near = (xs[:, None] - x) ** 2 + (ys[None, :] - y) ** 2 < RADIUS * RADIUS
        image[xs[:, None], ys[None, :], z] |= near.astype(np.uint8)
    image = np.where(image == 1, FOREGROUND, BACKGROUND)
    # the noise: (unsigned char)(5 randn) added with 8-bit wrap-around, as on the host
    noise = np.trunc(5.0 * rng.standard_normal(image.shape)).astype(np.int64)
    return ((image + noise) % 256).astype(np.uint8).reshape(-1)


# ((p - 100)^2 - (p - 228)^2) / 50 for each pixel value
_PIXEL_TERM = (((np.arange(256.0) - BACKGROUND) ** 2 - (np.arange(256.0) - FOREGROUND) ** 2)
               / 50.0)


def likelihood_step(frames, xj, yj, seed, objxy, k, isz_y, nfr):
    """The likelihood kernel in float64 over all particles: (arrayX, arrayY, weights before
    normalising), advancing `seed` in place."""
    n = xj.size
    x = xj + 1.0 + 5.0 * lcg_normal(seed)
    y = yj - 2.0 + 2.0 * lcg_normal(seed)
    off = objxy.reshape(-1, 2).astype(np.int64)
    # (x + dx) S + (y + dy) nfr + k, S = isz_y nfr: the particle's part plus the offset's
    base = np.trunc(x).astype(np.int64) * (isz_y * nfr) + np.trunc(y).astype(np.int64) * nfr + k
    ind = np.abs(base[:, None] + (off[:, 1] * (isz_y * nfr) + off[:, 0] * nfr)[None, :])
    ind[ind >= frames.size] = 0
    lik = _PIXEL_TERM[frames[ind]].sum(axis=1) / off.shape[0]
    return x, y, np.exp(lik) / n


def normalize(weights: np.ndarray, partial_sums: np.ndarray) -> np.ndarray:
    """sum_kernel and normalize_weights_kernel's weights: over the sum of the blocks' sums."""
    blocks = cdiv(weights.size, THREADS)
    return np.asarray(weights, np.float64) / float(np.sum(partial_sums[:blocks]))


def resample(x, y, weights, seed):
    """normalize_weights_kernel's CDF and systematic points (one draw of particle 0's
    generator) and find_index_kernel: the positions (xj, yj) the next frame starts from."""
    n = weights.size
    cdf = np.cumsum(weights)
    u = lcg_uniform(seed, slice(0, 1))[0] / n + np.arange(n) / n
    index = np.minimum(np.searchsorted(cdf, u, side="left"), n - 1)
    return x[index], y[index]


def inputs(rng, isz_x: int = 128, isz_y: int = 128, nfr: int = 99, n: int = 9870,
           k: int | None = None) -> list:
    frames = video(rng, isz_x, isz_y, nfr)
    objxy = disk_offsets()
    seed = rng.integers(0, 2 ** 31 - 1, n).astype(np.int32)
    k = int(rng.integers(1, nfr)) if k is None else k
    xj = np.full(n, float(int(isz_y / 2.0)))
    yj = np.full(n, float(int(isz_x / 2.0)))
    for frame in range(1, k):
        x, y, w = likelihood_step(frames, xj, yj, seed, objxy, frame, isz_y, nfr)
        xj, yj = resample(x, y, w / w.sum(), seed)
    z = functools.partial(np.zeros, dtype=np.float64)
    count = objxy.size // 2
    return [z(n), z(n), xj, yj, z(n), np.zeros(n * count, np.int32), objxy, z(n), frames, z(n),
            z(n), np.int32(n), np.int32(count), np.int32(frames.size), np.int32(k),
            np.int32(isz_y), np.int32(nfr), seed, z(n)]


def launch(args):
    return (cdiv(int(args[N_PARTICLES]), THREADS),), (THREADS,)


def reference(args):
    """(arrayX, arrayY, weights before normalising, seeds after) in float64."""
    seed = args[SEED].copy()
    x, y, w = likelihood_step(args[FRAMES], args[XJ], args[YJ], seed, args[OBJXY],
                              int(args[FRAME]), int(args[ISZ_Y]), int(args[NFR]))
    return x, y, w, seed


def check(expected, got) -> float:
    """GEVO's relative 1% on arrayX, arrayY and the normalised weights; the positions also
    within 1% of the frame's largest move; the seeds exact."""
    if not np.array_equal(expected[SEED], got[SEED]):
        return float("inf")
    error = elementwise_relative(normalize(expected[WEIGHTS], expected[PARTIAL_SUMS]),
                                 normalize(got[WEIGHTS], got[PARTIAL_SUMS]))
    for pos, before in ((ARRAY_X, XJ), (ARRAY_Y, YJ)):
        error = max(error, elementwise_relative(expected[pos], got[pos]),
                    step_error(expected[before], expected[pos], got[pos]))
    return error


WORKLOADS = {
    "rodinia_particlefilter": Workload(
        likelihood_kernel, launch, inputs,
        seeded_holdout(inputs, isz_x=256, isz_y=200, nfr=20, n=30011, k=7), check, GEVO_RELATIVE,
        # the race check: two blocks of 512 (the partial sums of both), small frames
        functools.partial(inputs, isz_x=20, isz_y=24, nfr=4, n=600),
        describe="Rodinia particlefilter (likelihood_kernel, double), 128x128x99 frames, 9870 "
                 "particles, a random frame (held out: 256x200x20, 30011 particles); error: "
                 "relative 1% on arrayX, arrayY, normalised weights, 1% of the move, exact "
                 "seeds"),
}
