"""Launch a kernel on the CPU backend and on the interpreter and compare what comes back with a
NumPy/Python reference (the kernel-level tests of tests/frontend, ops and backend share these)."""
from __future__ import annotations

import copy

import numpy as np

BACKENDS = ("cpu", "interp")


def run(kernel, grid, block, args, backend):
    """Launch `kernel` on a deep copy of `args` on `backend`; return the copied arguments."""
    args = copy.deepcopy(list(args))
    k = kernel if backend == "cpu" else kernel.on("interp")
    k[grid, block](*args)
    return args


def check(kernel, grid, block, args, expected, rtol=0.0, atol=0.0):
    """`expected`: {argument index: array}; every other array argument must come back unchanged."""
    for backend in BACKENDS:
        got = run(kernel, grid, block, args, backend)
        for idx, arg in enumerate(args):
            if not isinstance(arg, np.ndarray):
                continue
            want = expected.get(idx, arg)
            if rtol == 0.0 and atol == 0.0:
                np.testing.assert_array_equal(got[idx], want, err_msg=f"{backend}: arg {idx}")
            else:
                np.testing.assert_allclose(got[idx], want, rtol=rtol, atol=atol,
                                           err_msg=f"{backend}: arg {idx}")


def cdiv(n, d):
    return -(-n // d)
