"""Array access: 2-D/3-D grids, 3-D and 4-D arrays, strided views, constant and local arrays."""
from __future__ import annotations

import numpy as np

import zymo as zm

from .case import Case, cdiv, f32, f64, ints, wide


# ---- 2-D 5-point stencil on a 2-D grid of 2-D blocks ----------------------------------------
@zm.kernel
def stencil5(u, out, alpha):
    x, y = zm.grid(2)
    ny, nx = u.shape
    if 0 < y < ny - 1 and 0 < x < nx - 1:
        lap = u[y - 1, x] + u[y + 1, x] + u[y, x - 1] + u[y, x + 1] - 4.0 * u[y, x]
        out[y, x] = u[y, x] + alpha * lap
    elif y < ny and x < nx:
        out[y, x] = u[y, x]


SY, SX = 45, 70


def _stencil_args(rng):
    return [f32(rng, SY, SX), np.zeros((SY, SX), np.float32), 0.2]


def _stencil_ref(args):
    u, _, alpha = args
    u = wide(u)
    out = u.copy()
    lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
    out[1:-1, 1:-1] = u[1:-1, 1:-1] + alpha * lap
    return {1: out}


# ---- 3-D grid over a 3-D array, indices from zm.grid(3) and from .x/.y/.z ---------------------
@zm.kernel
def grid3d(a, out, ids):
    x, y, z = zm.grid(3)
    nz, ny, nx = out.shape
    if x < nx and y < ny and z < nz:
        out[z, y, x] = a[z, y, x] * 2.0 + zm.f32(x + 10 * y + 100 * z)
        xx = zm.blockIdx.x * zm.blockDim.x + zm.threadIdx.x
        yy = zm.blockIdx.y * zm.blockDim.y + zm.threadIdx.y
        zz = zm.blockIdx.z * zm.blockDim.z + zm.threadIdx.z
        ids[z, y, x] = xx + 1000 * yy + 1000000 * zz + 0 * zm.gridDim.z


G3 = (6, 9, 11)  # (nz, ny, nx)


def _grid3d_args(rng):
    return [f32(rng, *G3), np.zeros(G3, np.float32), np.zeros(G3, np.int32)]


def _grid3d_ref(args):
    a = wide(args[0])
    z, y, x = np.meshgrid(*(np.arange(n) for n in G3), indexing="ij")
    return {1: 2 * a + x + 10 * y + 100 * z, 2: (x + 1000 * y + 1000000 * z).astype(np.int32)}


# ---- 3-D 7-point Laplacian (interior only) ----------------------------------------------------
@zm.kernel
def laplace3d(u, out):
    x, y, z = zm.grid(3)
    nz, ny, nx = u.shape
    if 0 < x < nx - 1 and 0 < y < ny - 1 and 0 < z < nz - 1:
        out[z, y, x] = (u[z - 1, y, x] + u[z + 1, y, x] + u[z, y - 1, x] + u[z, y + 1, x]
                        + u[z, y, x - 1] + u[z, y, x + 1] - 6.0 * u[z, y, x])


def _lap3_args(rng):
    return [f64(rng, *G3), np.zeros(G3)]


def _lap3_ref(args):
    u = args[0]
    out = np.zeros(G3)
    c = u[1:-1, 1:-1, 1:-1]
    out[1:-1, 1:-1, 1:-1] = (u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1] + u[1:-1, :-2, 1:-1]
                             + u[1:-1, 2:, 1:-1] + u[1:-1, 1:-1, :-2] + u[1:-1, 1:-1, 2:] - 6 * c)
    return {1: out}


# ---- 4-D arrays: a permutation of the axes, and a reduction over the last axis ---------------
@zm.kernel
def permute4d(x, out, sums):
    i = zm.grid(1)
    A, B, C, D = out.shape
    if i < A * B * C * D:
        d = i % D
        t = i // D
        c = t % C
        t = t // C
        b = t % B
        a = t // B
        out[a, b, c, d] = x[d, c, b, a] * 3.0
        if d == 0:
            s = 0.0
            for k in range(D):
                s += x[k, c, b, a]
            sums[a, b, c] = s


P4 = (3, 4, 5, 6)  # out shape (A, B, C, D); x has shape (D, C, B, A)


def _perm_args(rng):
    return [f32(rng, *P4[::-1]), np.zeros(P4, np.float32), np.zeros(P4[:3], np.float32)]


def _perm_ref(args):
    x = wide(args[0])
    xt = x.transpose(3, 2, 1, 0)
    return {1: 3 * xt, 2: xt.sum(axis=3)}


# ---- strided views: a[:, ::2] in, a strided view out, a transposed view ----------------------
@zm.kernel
def strided_scale(v, out, s):
    col, row = zm.grid(2)
    if row < v.shape[0] and col < v.shape[1]:
        out[row, col] = v[row, col] * s


def _strided_args(rng):
    base = f32(rng, 40, 60)
    out_base = np.zeros((80, 95), np.float32)
    return [base[:, ::2], out_base[::2, 1::3][:, :30], -1.5]


def _strided_ref(args):
    v, _, s = args
    return {1: wide(v) * s}


@zm.kernel
def row_sums(m, out, every_third):
    r = zm.grid(1)
    if r < m.shape[0]:
        s = 0.0
        for j in range(m.shape[1]):
            s += m[r, j]
        out[r] = s
        every_third[r] = m[r, 0] + m[r, m.shape[1] - 1]


def _rowsum_args(rng):
    a = f32(rng, 50, 70)
    third = np.zeros(3 * 70, np.float32)
    return [a.T, np.zeros(70, np.float32), third[::3]]  # m is F-ordered (70, 50)


def _rowsum_ref(args):
    m = wide(args[0])
    return {1: m.sum(axis=1), 2: m[:, 0] + m[:, -1]}


# ---- constant arrays: FIR filter and a 3x3 blur with clamped borders -------------------------
FIR_TAPS = np.array([0.05, 0.1, 0.2, 0.3, 0.2, 0.1, 0.05], dtype=np.float32)
NTAPS = 7
BLUR = np.array([[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]], dtype=np.float32) / 16


@zm.kernel
def fir_filter(x, out):
    taps = zm.const.array_like(FIR_TAPS)
    i = zm.grid(1)
    if i < out.shape[0]:
        acc = 0.0
        for k in range(NTAPS):
            acc += taps[k] * x[i + k]
        out[i] = acc


def _fir_args(rng):
    n = 777
    return [f32(rng, n), np.zeros(n - NTAPS + 1, np.float32)]


def _fir_ref(args):
    x = wide(args[0])
    return {1: np.convolve(x, wide(FIR_TAPS)[::-1], mode="valid")}


@zm.kernel
def blur3x3(img, out):
    w = zm.const.array_like(BLUR)
    x, y = zm.grid(2)
    ny, nx = img.shape
    if y < ny and x < nx:
        acc = 0.0
        for dy in range(-1, 2):
            for dx in range(-1, 2):
                yy = min(max(y + dy, 0), ny - 1)
                xx = min(max(x + dx, 0), nx - 1)
                acc += w[dy + 1, dx + 1] * img[yy, xx]
        out[y, x] = acc


def _blur_args(rng):
    return [f32(rng, 33, 50, low=0.0, high=1.0), np.zeros((33, 50), np.float32)]


def _blur_ref(args):
    img = np.pad(wide(args[0]), 1, mode="edge")
    ny, nx = args[0].shape
    out = np.zeros((ny, nx))
    for dy in range(3):
        for dx in range(3):
            out += wide(BLUR)[dy, dx] * img[dy:dy + ny, dx:dx + nx]
    return {1: out}


# ---- local arrays: per-thread insertion sort ---------------------------------------------------
SORT_LEN = 8


@zm.kernel
def sort_rows_local(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        buf = zm.local.array(SORT_LEN, zm.f32)
        for k in range(SORT_LEN):
            buf[k] = x[i, k]
        for k in range(1, SORT_LEN):
            v = buf[k]
            j = k - 1
            while j >= 0 and buf[j] > v:
                buf[j + 1] = buf[j]
                j -= 1
            buf[j + 1] = v
        for k in range(SORT_LEN):
            out[i, k] = buf[k]


def _sort_args(rng):
    x = f32(rng, 300, SORT_LEN)
    x[0] = np.arange(SORT_LEN)[::-1]
    return [x, np.zeros((300, SORT_LEN), np.float32)]


def _sort_ref(args):
    return {1: np.sort(args[0], axis=1)}


# ---- gather / scatter through index arrays of several integer types ---------------------------
@zm.kernel
def gather_scatter(x, idx64, perm32, idx_u8, idx_i16, table, g, s, t):
    i = zm.grid(1)
    if i < x.shape[0]:
        g[i] = x[idx64[i]]
        s[perm32[i]] = x[i]
        t[i] = table[idx_u8[i]] + table[idx_i16[i]]


def _gather_args(rng):
    n = 900
    return [f32(rng, n), ints(rng, np.int64, n, low=0, high=n),
            rng.permutation(n).astype(np.int32), ints(rng, np.uint8, n),
            ints(rng, np.int16, n, low=0, high=256), f32(rng, 256),
            np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32)]


def _gather_ref(args):
    x, idx64, perm, iu8, ii16, table = args[:6]
    s = np.zeros_like(x)
    s[perm] = x
    return {6: x[idx64], 7: s, 8: wide(table[iu8]) + table[ii16]}


CASES = [
    Case("stencil5_2d", stencil5, (cdiv(SX, 16), cdiv(SY, 8)), (16, 8), _stencil_args,
         _stencil_ref, features=("2d_grid", "chained_compare", "shape_unpack"),
         differentiable=True),
    Case("grid3d", grid3d, (cdiv(G3[2], 4), cdiv(G3[1], 4), cdiv(G3[0], 2)), (4, 4, 2),
         _grid3d_args, _grid3d_ref, features=("3d_grid", "3d_array", "cast")),
    Case("laplace3d_f64", laplace3d, (cdiv(G3[2], 8), cdiv(G3[1], 4), cdiv(G3[0], 4)), (8, 4, 4),
         _lap3_args, _lap3_ref, rtol=1e-12, atol=1e-12, features=("3d_grid", "3d_array", "f64"),
         differentiable=True),
    Case("permute4d", permute4d, cdiv(int(np.prod(P4)), 64), 64, _perm_args, _perm_ref,
         features=("4d_array", "floordiv", "mod"), differentiable=True),
    Case("strided_scale", strided_scale, (cdiv(30, 8), cdiv(40, 8)), (8, 8), _strided_args,
         _strided_ref, features=("strided", "2d_grid"), differentiable=True),
    Case("row_sums_transposed", row_sums, cdiv(70, 32), 32, _rowsum_args, _rowsum_ref,
         features=("strided", "transposed")),
    Case("fir_filter_const", fir_filter, cdiv(771, 128), 128, _fir_args, _fir_ref,
         features=("const_array",), differentiable=True),
    Case("blur3x3_const", blur3x3, (cdiv(50, 16), cdiv(33, 16)), (16, 16), _blur_args, _blur_ref,
         features=("const_array", "2d_grid", "min_max", "negative_range"), differentiable=True),
    Case("sort_rows_local", sort_rows_local, cdiv(300, 64), 64, _sort_args, _sort_ref,
         features=("local_array", "while", "short_circuit")),
    Case("gather_scatter", gather_scatter, cdiv(900, 128), 128, _gather_args, _gather_ref,
         features=("gather", "scatter", "index_types", "u8", "i16", "i64")),
]
