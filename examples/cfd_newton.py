"""Implicit time steps of the 1-D Euler equations (Sod's shock tube), each solved by Newton's
method with a Jacobian assembled from `zm.jacfwd` of the Roe flux.

A backward-Euler step solves R(Q) = dx/dt (Q - Q_old) + F(i+1/2) - F(i-1/2) = 0 in every cell i,
F being the Roe flux of bench/cfd/flux.py (a 3-D flux, here through the normal (1, 0, 0): the two
transverse momenta are unknowns that stay 0). One zymo kernel assembles R; another assembles the
block-tridiagonal dR/dQ from the flux's Jacobian, which `zm.jacfwd` gives as dual numbers of
width 10 (both states of a face in one pass); NumPy solves the linear systems. The residual
norms printed per step fall quadratically; at the end the Jacobian is checked against central
differences of the residual.

    python examples/cfd_newton.py                      # the CPU backend, a few seconds
    ZYMO_BACKEND=cuda python examples/cfd_newton.py    # on a GPU (NumPy arrays copied per launch)
"""
import pathlib
import sys

import numpy as np

# The Roe flux lives in the repository's CFD benchmark, beside the package (which this also
# finds in a checkout where zymo is not installed; an installed zymo comes first).
sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))
import zymo as zm  # noqa: E402
from bench.cfd import flux  # noqa: E402
from bench.cfd.kernels import split_rows, state  # noqa: E402

NORMAL = (1.0, 0.0, 0.0)
# dF/d(QL, QR): 5 rows, each a pair of 5-tuples; width 10 seeds both states in one pass.
FLUX_JACOBIAN = zm.jacfwd(flux.roe_flux_cons, argnums=(0, 1), width=10)


@zm.func
def neighbours(i, n):
    """The cells west and east of cell i; past the ends the boundary cell itself (outflow)."""
    return max(i - 1, 0), min(i + 1, n - 1)


@zm.kernel
def residual(Q, Q_old, dx_dt, R):
    i = zm.grid(1)
    n = Q.shape[0]
    if i < n:
        west, east = neighbours(i, n)
        q = state(Q, i)
        f_west = flux.roe_flux_cons(state(Q, west), q, NORMAL)
        f_east = flux.roe_flux_cons(q, state(Q, east), NORMAL)
        for k, (fw, fe) in enumerate(zip(f_west, f_east)):
            R[i, k] = dx_dt * (Q[i, k] - Q_old[i, k]) + fe - fw


@zm.func
def add_block(A, i, k, block, scale):
    """A[i, k] += scale * block, A[i, k] being dR_i/dQ of cell i - 1 + k."""
    for r, row in enumerate(block):
        for c, value in enumerate(row):
            A[i, k, r, c] += scale * value


@zm.kernel
def jacobian(Q, dx_dt, A):
    """A[i, 0..2] = dR_i/dQ of cells i-1, i, i+1 (A starts at zero)."""
    i = zm.grid(1)
    n = Q.shape[0]
    if i < n:
        west, east = neighbours(i, n)
        q = state(Q, i)
        w_left, w_right = split_rows(FLUX_JACOBIAN(state(Q, west), q, NORMAL))
        e_left, e_right = split_rows(FLUX_JACOBIAN(q, state(Q, east), NORMAL))
        add_block(A, i, west - i + 1, w_left, -1.0)
        add_block(A, i, 1, w_right, -1.0)
        add_block(A, i, 1, e_left, 1.0)
        add_block(A, i, east - i + 1, e_right, 1.0)
        for k in range(5):
            A[i, 1, k, k] += dx_dt


def launch(n):
    return (n + 63) // 64, 64


def assemble_residual(Q, Q_old, dx_dt):
    R = np.empty_like(Q)
    residual[launch(len(Q))](Q, Q_old, dx_dt, R)
    return R


def assemble_jacobian(Q, dx_dt):
    """The dense (5n, 5n) matrix dR/dQ from the kernel's block rows."""
    n = len(Q)
    A = np.zeros((n, 3, 5, 5))
    jacobian[launch(n)](Q, dx_dt, A)
    dense = np.zeros((n, 5, n, 5))
    for k, offset in enumerate((-1, 0, 1)):
        rows = np.arange(max(0, -offset), min(n, n - offset))
        dense[rows, :, rows + offset, :] = A[rows, k]
    return dense.reshape(5 * n, 5 * n)


def finite_difference_jacobian(Q, Q_old, dx_dt, h=1e-6):
    """Central differences of the residual kernel, one unknown at a time."""
    columns = []
    for j in range(Q.size):
        step = np.zeros(Q.size)
        step[j] = h
        step = step.reshape(Q.shape)
        columns.append((assemble_residual(Q + step, Q_old, dx_dt)
                        - assemble_residual(Q - step, Q_old, dx_dt)).ravel() / (2 * h))
    return np.stack(columns, axis=1)


def sod(n, width=1.0):
    """Conservative states (rho, rho u, rho v, rho w, rho E) of Sod's tube at rest, the jump
    at x = 1/2 spread over a few cells: a sharp jump at rest sits on the kink of |u| in the
    Roe dissipation, where Newton's first iterations wander before they converge."""
    left = 0.5 * (1.0 - np.tanh((np.arange(n) + 0.5 - n / 2) / width))
    Q = np.zeros((n, 5))
    Q[:, 0] = 0.125 + 0.875 * left
    Q[:, 4] = (0.1 + 0.9 * left) / flux.GM1
    return Q


def newton_step(Q_old, dx_dt, tol=1e-10, max_iterations=10):
    """Q with R(Q) = 0, from Q_old, and the residual norms before every iteration."""
    Q = Q_old.copy()
    norms = []
    for _ in range(max_iterations):
        R = assemble_residual(Q, Q_old, dx_dt)
        norms.append(np.linalg.norm(R))
        if norms[-1] < tol:
            return Q, norms
        Q = Q - np.linalg.solve(assemble_jacobian(Q, dx_dt), R.ravel()).reshape(Q.shape)
    raise RuntimeError("Newton's method did not converge (try a smaller cfl): residual norms "
                       + " ".join(f"{norm:.1e}" for norm in norms))


def main(cells=64, t_end=0.2, cfl=4.0):
    dx = 1.0 / cells
    steps = int(np.ceil(t_end * np.sqrt(flux.GAMMA) / (cfl * dx)))
    dx_dt = dx * steps / t_end      # cfl or less by the sound speed of the initial left state
    Q = sod(cells)
    for step in range(1, steps + 1):
        Q, norms = newton_step(Q, dx_dt)
        print(f"step {step}  |R| " + " ".join(f"{norm:.1e}" for norm in norms))
    differences = finite_difference_jacobian(Q, Q, dx_dt)
    error = np.abs(assemble_jacobian(Q, dx_dt) - differences).max() / np.abs(differences).max()
    assert error < 1e-7, f"the Jacobian differs from finite differences by {error:.1e}"
    print(f"jacobian vs finite differences: max relative error {error:.1e}")
    rho, u = Q[:, 0], Q[:, 1] / Q[:, 0]
    print(f"t = {t_end}: density {rho.min():.4f}..{rho.max():.4f}, velocity up to {u.max():.4f}")


if __name__ == "__main__":
    main()
