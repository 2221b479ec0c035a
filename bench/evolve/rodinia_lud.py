"""Rodinia's LU decomposition (lud) as an evolution workload: its trailing-matrix update
`lud_internal`, the kernel of the three GEVO timed (with `lud_diagonal` and `lud_perimeter`)
that does all but O(n^2) of the work.

Rodinia factors an n x n matrix in place (no pivoting; L unit lower, U upper, both in the
matrix) in panels of 16: at offset o, `lud_diagonal` factors the 16 x 16 block at (o, o),
`lud_perimeter` solves the row panel (U12) and the column panel (L21) against it, and
`lud_internal` takes L21 U12 from the rest: one 16 x 16 thread block per trailing block, the
block's 16 rows of L21 and 16 columns of U12 staged in shared memory, 16 products summed per
element. The inputs here are the matrix with the first panel already factored (in NumPy, as
the two small kernels would leave it), so the launch is the first, largest update.

Rodinia's generator (`-s n`, GEVO's first test): the Toeplitz matrix 10 exp(-0.001 |i - j|);
it is nearly rank one, so a variant that drops most of the 16 products would still be within
1% of it: each evaluation adds a fresh uniform [0, 1) matrix, which makes every product
count. GEVO's tests: n = 1024 and a 256 x 256 file; fitness here n = 1024 (offset 0), held
out n = 2000 at offset 32. Error: GEVO's per-element relative 1% on the matrix.
"""
from __future__ import annotations

import functools

import numpy as np

import zymo as zm

from .rodinia_common import GEVO_RELATIVE, relative_error, seeded_holdout
from .workloads import Workload

B = 16
M, N, OFFSET = 0, 1, 2


@zm.kernel
def lud_internal(m, n, offset):
    peri_row = zm.shared.array((B, B), zm.f32)
    peri_col = zm.shared.array((B, B), zm.f32)
    tx = zm.threadIdx.x
    ty = zm.threadIdx.y
    row = offset + (zm.blockIdx.y + 1) * B + ty
    col = offset + (zm.blockIdx.x + 1) * B + tx
    peri_row[ty, tx] = m[(offset + ty) * n + col]
    peri_col[ty, tx] = m[row * n + offset + tx]
    zm.syncthreads()
    total = zm.f32(0.0)
    for k in range(B):
        total += peri_col[ty, k] * peri_row[k, tx]
    m[row * n + col] -= total


def factor_panel(a: np.ndarray, offset: int) -> None:
    """What lud_diagonal and lud_perimeter leave at `offset`, in place (float64)."""
    o, e = offset, offset + B
    for k in range(o, e):                       # Doolittle on the diagonal block
        a[k + 1:e, k] /= a[k, k]
        a[k + 1:e, k + 1:e] -= np.outer(a[k + 1:e, k], a[k, k + 1:e])
    lower = np.tril(a[o:e, o:e], -1) + np.eye(B)
    upper = np.triu(a[o:e, o:e])
    a[o:e, e:] = np.linalg.solve(lower, a[o:e, e:])          # U12
    a[e:, o:e] = np.linalg.solve(upper.T, a[e:, o:e].T).T    # L21


def generate(rng, n: int) -> np.ndarray:
    """Rodinia's `-s n` matrix plus a fresh uniform [0, 1) matrix, float64."""
    k = np.arange(n)
    return 10.0 * np.exp(-0.001 * np.abs(k[:, None] - k[None, :])) + rng.random((n, n))


def inputs(rng, n: int = 1024, offset: int = 0) -> list:
    a = generate(rng, n)
    for o in range(0, offset + 1, B):
        if o:
            a[o:, o:] -= a[o:, o - B:o] @ a[o - B:o, o:]      # the earlier updates
        factor_panel(a, o)
    return [a.astype(np.float32).reshape(-1), np.int32(n), np.int32(offset)]


def launch(args):
    blocks = (int(args[N]) - int(args[OFFSET])) // B - 1
    return (blocks, blocks), (B, B)


def reference(args) -> np.ndarray:
    n, o = int(args[N]), int(args[OFFSET])
    a = args[M].astype(np.float64).reshape(n, n).copy()
    e = o + B
    last = e + ((n - o) // B - 1) * B
    a[e:last, e:last] -= a[e:last, o:e] @ a[o:e, e:last]
    return a.reshape(-1)


WORKLOADS = {
    "rodinia_lud": Workload(
        lud_internal, launch, inputs, seeded_holdout(inputs, n=2000, offset=32),
        relative_error(M), GEVO_RELATIVE, functools.partial(inputs, n=64),
        describe="Rodinia LU decomposition, lud_internal at offset 0 of 1024x1024 (held out: "
                 "2000x2000 at offset 32); error: per-element relative 1%"),
}
