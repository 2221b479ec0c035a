"""The NumPy reference for the flux-Jacobian benchmark: the tangent-free 3-D Roe flux, its
complex-step Jacobians, the edge-based assembly, and the benchmark's flow states.

The flux follows Roe (1981) in the tangent-free form (four waves, the two shear waves combined)
with Harten's parabolic entropy fix on the acoustic waves only, absolute width DELTA; see
shared/research/forward-mode-and-roe.md, section 1.2. Every function works on complex128 arrays
as well as float64 (complex-safe |x| and comparisons on the real part), so complex_step_jacobians
can differentiate it; |x| takes the slope +1 at exactly 0.
"""
from __future__ import annotations

import numpy as np

from .mesh import JacobianLayout, Mesh

GAMMA = 1.4
DELTA = 0.2        # entropy-fix width, absolute (velocities scaled by the free-stream sound speed)
MACH = 0.8
FLOW_DIRECTION = np.array([0.8, 0.5, 0.33]) / np.linalg.norm([0.8, 0.5, 0.33])


def cabs(x: np.ndarray) -> np.ndarray:
    """|x| by the sign of the real part (slope +1 at exactly 0), safe for complex steps."""
    return np.where(np.real(x) < 0, -x, x)


def entropy_fix(speed: np.ndarray) -> np.ndarray:
    """Harten's parabola below DELTA: (speed^2 + DELTA^2) / (2 DELTA)."""
    return np.where(np.real(speed) < DELTA, (speed * speed + DELTA * DELTA) / (2.0 * DELTA), speed)


def cons_to_prim(Q: np.ndarray) -> np.ndarray:
    """(rho, rho u, rho v, rho w, rho E) -> (rho, u, v, w, p), along the last axis."""
    rho = Q[..., 0]
    velocity = Q[..., 1:4] / rho[..., None]
    p = (GAMMA - 1.0) * (Q[..., 4] - 0.5 * rho * np.sum(velocity * velocity, axis=-1))
    return np.concatenate([rho[..., None], velocity, p[..., None]], axis=-1)


def prim_to_cons(W: np.ndarray) -> np.ndarray:
    """(rho, u, v, w, p) -> (rho, rho u, rho v, rho w, rho E), along the last axis."""
    rho, velocity, p = W[..., 0], W[..., 1:4], W[..., 4]
    energy = p / (GAMMA - 1.0) + 0.5 * rho * np.sum(velocity * velocity, axis=-1)
    return np.concatenate([rho[..., None], rho[..., None] * velocity, energy[..., None]], axis=-1)


def normal_flux(W: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The physical flux through a unit normal n, from primitive states."""
    rho, velocity, p = W[..., 0], W[..., 1:4], W[..., 4]
    qn = np.sum(velocity * n, axis=-1)
    enthalpy = GAMMA * p / rho / (GAMMA - 1.0) + 0.5 * np.sum(velocity * velocity, axis=-1)
    mass = rho * qn
    momentum = mass[..., None] * velocity + p[..., None] * n
    return np.concatenate([mass[..., None], momentum, (mass * enthalpy)[..., None]], axis=-1)


def roe_average(WL: np.ndarray, WR: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, ...]:
    """The Roe state: (rho, velocity [..., 3], enthalpy, sound speed, normal velocity)."""
    ratio = np.sqrt(WR[..., 0] / WL[..., 0])
    weight_l, weight_r = 1.0 / (1.0 + ratio), ratio / (1.0 + ratio)
    velocity = weight_l[..., None] * WL[..., 1:4] + weight_r[..., None] * WR[..., 1:4]
    enthalpy = weight_l * _enthalpy(WL) + weight_r * _enthalpy(WR)
    sound = np.sqrt((GAMMA - 1.0) * (enthalpy - 0.5 * np.sum(velocity * velocity, axis=-1)))
    return ratio * WL[..., 0], velocity, enthalpy, sound, np.sum(velocity * n, axis=-1)


def _enthalpy(W: np.ndarray) -> np.ndarray:
    return GAMMA * W[..., 4] / W[..., 0] / (GAMMA - 1.0) + 0.5 * np.sum(W[..., 1:4] ** 2, axis=-1)


def acoustic_speeds(WL: np.ndarray, WR: np.ndarray,
                    n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|qn - a| and |qn + a| at the Roe state, before the entropy fix (the fix fires below
    DELTA)."""
    _, _, _, sound, qn = roe_average(WL, WR, n)
    return cabs(qn - sound), cabs(qn + sound)


def roe_flux_prim(WL: np.ndarray, WR: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The Roe flux per unit area from primitive states [..., 5] through unit normals [..., 3]."""
    rho, velocity, enthalpy, sound, qn = roe_average(WL, WR, n)
    jump = WR - WL
    d_rho, d_velocity, d_p = jump[..., 0], jump[..., 1:4], jump[..., 4]
    d_qn = np.sum(d_velocity * n, axis=-1)
    c2 = sound * sound
    strengths = ((d_p - rho * sound * d_qn) / (2.0 * c2),    # left acoustic
                 d_rho - d_p / c2,                           # entropy
                 (d_p + rho * sound * d_qn) / (2.0 * c2),    # right acoustic
                 rho)                                        # shear (both waves together)
    speeds = (entropy_fix(cabs(qn - sound)), cabs(qn), entropy_fix(cabs(qn + sound)), cabs(qn))

    def vector(first, momentum, energy):
        return np.concatenate([np.broadcast_to(first, energy.shape)[..., None], momentum,
                               energy[..., None]], axis=-1)

    kinetic = 0.5 * np.sum(velocity * velocity, axis=-1)
    s = sound[..., None]
    waves = (vector(1.0, velocity - s * n, enthalpy - sound * qn),
             vector(1.0, velocity, kinetic),
             vector(1.0, velocity + s * n, enthalpy + sound * qn),
             vector(0.0, d_velocity - d_qn[..., None] * n,
                    np.sum(velocity * d_velocity, axis=-1) - qn * d_qn))
    dissipation = sum((speed * strength)[..., None] * wave
                      for speed, strength, wave in zip(speeds, strengths, waves))
    return 0.5 * (normal_flux(WL, n) + normal_flux(WR, n) - dissipation)


def roe_flux_cons(QL: np.ndarray, QR: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The Roe flux per unit area from conservative states."""
    return roe_flux_prim(cons_to_prim(QL), cons_to_prim(QR), n)


def complex_step_jacobians(QL: np.ndarray, QR: np.ndarray, n: np.ndarray,
                           h: float = 1e-30) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(F [E, 5], dF/dQL [E, 5, 5], dF/dQR [E, 5, 5]) by complex steps; rows are flux
    components, columns conservative inputs."""
    QL, QR, n = (np.asarray(a, dtype=np.float64) for a in (QL, QR, n))
    flux = roe_flux_cons(QL, QR, n)
    jacobians = []
    for side in range(2):
        jacobian = np.empty(flux.shape + (5,))
        for k in range(5):
            states = [QL.astype(np.complex128), QR.astype(np.complex128)]
            states[side][..., k] += 1j * h
            jacobian[..., k] = np.imag(roe_flux_cons(states[0], states[1], n)) / h
        jacobians.append(jacobian)
    return flux, jacobians[0], jacobians[1]


def assemble_reference(mesh: Mesh, layout: JacobianLayout, Q: np.ndarray,
                       chunk: int = 1 << 17) -> tuple[np.ndarray, np.ndarray]:
    """The benchmark's Jacobian: (Adiag float64 [N, 5, 5], Aoff float32 [nnz, 5, 5]).

    For edge e = (i, j) with area A = |normals[e]| and n = normals[e] / A, B_L = A dF/dQ_i and
    B_R = A dF/dQ_j: Adiag[i] += B_L, Adiag[j] -= B_R, Aoff[off_ij] = B_R, Aoff[off_ji] = -B_L."""
    count = len(mesh.nodes)
    diagonal = np.zeros((count, 25))
    off = np.empty((len(layout.col), 5, 5), np.float32)
    for start in range(0, len(mesh.edges), chunk):
        part = slice(start, start + chunk)
        i, j = mesh.edges[part, 0], mesh.edges[part, 1]
        area = np.linalg.norm(mesh.normals[part], axis=1)[:, None]
        _, left, right = complex_step_jacobians(Q[i], Q[j], mesh.normals[part] / area)
        left, right = area[:, None] * left, area[:, None] * right
        for entry in range(25):
            diagonal[:, entry] += np.bincount(i, left.reshape(-1, 25)[:, entry], count)
            diagonal[:, entry] -= np.bincount(j, right.reshape(-1, 25)[:, entry], count)
        off[layout.off_ij[part]] = right
        off[layout.off_ji[part]] = -left
    return diagonal.reshape(count, 5, 5), off


def free_stream_states(mesh: Mesh, seed: int = 0, sonic_fraction: float = 0.03) -> np.ndarray:
    """Conservative states [N, 5]: Mach 0.8 along FLOW_DIRECTION, rho = 1, p = 1/GAMMA (sound
    speed 1), each perturbed by up to 10% with sums of sines of the node coordinates; a random
    `sonic_fraction` of the nodes move at near-sonic speed (Mach 0.95-1.25) so that the
    acoustic entropy fix fires on some edges and not on the rest."""
    rng = np.random.default_rng(seed)

    def smooth():  # in [-1, 1]
        waves = rng.uniform(1.0, 3.0, (3, 3)) * 2.0 * np.pi
        phases = rng.uniform(0.0, 2.0 * np.pi, 3)
        return np.mean(np.sin(mesh.nodes @ waves.T + phases), axis=1)

    rho = 1.0 + 0.1 * smooth()
    p = (1.0 + 0.1 * smooth()) / GAMMA
    velocity = MACH * FLOW_DIRECTION + 0.1 * MACH * np.stack([smooth() for _ in range(3)], 1)
    sonic = rng.random(len(rho)) < sonic_fraction
    sound = np.sqrt(GAMMA * p[sonic] / rho[sonic])
    velocity[sonic] = (rng.uniform(0.95, 1.25, sonic.sum()) * sound)[:, None] * FLOW_DIRECTION
    return prim_to_cons(np.column_stack([rho, velocity, p]))
