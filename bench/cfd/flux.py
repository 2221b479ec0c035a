"""The Roe flux as zymo device functions (scalar code on tuples), and its hand-differentiated
Jacobian: the baseline the automatic derivatives are compared against.

The formulas are those of reference.py (Roe 1981, tangent-free, Harten's entropy fix on the
acoustic waves with absolute width DELTA); states are 5-tuples, normals unit 3-tuples, and a
Jacobian is a 5-tuple of rows (flux components) of 5 entries (conservative inputs).
"""
from __future__ import annotations

import math

import zymo as zm

GAMMA = 1.4
GM1 = GAMMA - 1.0
HALF_GM1 = 0.5 * GM1
GAMMA_OVER_GM1 = GAMMA / GM1
DELTA = 0.2
DELTA2 = DELTA * DELTA
HALF_OVER_DELTA = 0.5 / DELTA
INV_DELTA = 1.0 / DELTA


@zm.func
def cons_to_prim(q):
    """(rho, rho u, rho v, rho w, rho E) -> (rho, u, v, w, p)."""
    rho = q[0]
    inv_rho = 1.0 / rho
    u, v, w = q[1] * inv_rho, q[2] * inv_rho, q[3] * inv_rho
    return rho, u, v, w, GM1 * (q[4] - 0.5 * rho * (u * u + v * v + w * w))


@zm.func
def fixed_speed(x):
    """An acoustic wave speed: |x|, replaced by Harten's parabola below DELTA."""
    speed = abs(x)
    return (speed * speed + DELTA2) * HALF_OVER_DELTA if speed < DELTA else speed


@zm.func
def roe_flux(wl, wr, n):
    """The Roe flux per unit area between primitive states wl, wr through the unit normal n."""
    rho_l, u_l, v_l, w_l, p_l = wl
    rho_r, u_r, v_r, w_r, p_r = wr
    nx, ny, nz = n
    qn_l = u_l * nx + v_l * ny + w_l * nz
    qn_r = u_r * nx + v_r * ny + w_r * nz
    h_l = GAMMA_OVER_GM1 * p_l / rho_l + 0.5 * (u_l * u_l + v_l * v_l + w_l * w_l)
    h_r = GAMMA_OVER_GM1 * p_r / rho_r + 0.5 * (u_r * u_r + v_r * v_r + w_r * w_r)
    # Roe averages
    ratio = math.sqrt(rho_r / rho_l)
    rho = ratio * rho_l
    weight_l = 1.0 / (1.0 + ratio)
    weight_r = ratio * weight_l
    u = weight_l * u_l + weight_r * u_r
    v = weight_l * v_l + weight_r * v_r
    w = weight_l * w_l + weight_r * w_r
    h = weight_l * h_l + weight_r * h_r
    kinetic = 0.5 * (u * u + v * v + w * w)
    c2 = GM1 * (h - kinetic)
    c = math.sqrt(c2)
    qn = u * nx + v * ny + w * nz
    # jumps, wave strengths (acoustic, entropy, acoustic; the shear waves' is rho) and speeds
    d_u, d_v, d_w, d_p = u_r - u_l, v_r - v_l, w_r - w_l, p_r - p_l
    d_qn = qn_r - qn_l
    rc_dqn = rho * c * d_qn
    inv_c2 = 1.0 / c2
    b1 = fixed_speed(qn - c) * 0.5 * (d_p - rc_dqn) * inv_c2
    b2 = abs(qn) * (rho_r - rho_l - d_p * inv_c2)
    b3 = fixed_speed(qn + c) * 0.5 * (d_p + rc_dqn) * inv_c2
    b4 = abs(qn) * rho
    # dissipation: sum of speed * strength * right eigenvector
    b13 = b1 + b3
    d0 = b13 + b2
    cbm = c * (b3 - b1)
    d1 = d0 * u + cbm * nx + b4 * (d_u - d_qn * nx)
    d2 = d0 * v + cbm * ny + b4 * (d_v - d_qn * ny)
    d3 = d0 * w + cbm * nz + b4 * (d_w - d_qn * nz)
    d4 = b13 * h + cbm * qn + b2 * kinetic + b4 * (u * d_u + v * d_v + w * d_w - qn * d_qn)
    mass_l = rho_l * qn_l
    mass_r = rho_r * qn_r
    return (0.5 * (mass_l + mass_r - d0),
            0.5 * (mass_l * u_l + mass_r * u_r + (p_l + p_r) * nx - d1),
            0.5 * (mass_l * v_l + mass_r * v_r + (p_l + p_r) * ny - d2),
            0.5 * (mass_l * w_l + mass_r * w_r + (p_l + p_r) * nz - d3),
            0.5 * (mass_l * h_l + mass_r * h_r - d4))


@zm.func
def roe_flux_cons(ql, qr, n):
    """The Roe flux per unit area between conservative states ql, qr."""
    return roe_flux(cons_to_prim(ql), cons_to_prim(qr), n)


# ---- the hand-differentiated Jacobian ----------------------------------------------------------
# Chain rule: F = (Fn(L) + Fn(R) - D) / 2 with D = M(roe) (W_R - W_L), the dissipation linear in
# the jump of the primitive states W at a fixed Roe state. So in primitive variables
#   dF/dW_L = (dFn/dW_L + M - dD/droe droe/dW_L) / 2,  dF/dW_R = (dFn/dW_R - M - ...) / 2,
# with roe = (rho, u, v, w, H) of the Roe average, and dF/dQ = dF/dW dW/dQ.

@zm.func
def axpy(a, x, y):
    """a x + y for 5-tuples."""
    return (a * x[0] + y[0], a * x[1] + y[1], a * x[2] + y[2], a * x[3] + y[3], a * x[4] + y[4])


@zm.func
def fixed_speed_slope(x):
    """fixed_speed(x) and its derivative in x (|x| >= DELTA > 0 where the sign is taken)."""
    speed = abs(x)
    if speed < DELTA:
        return (speed * speed + DELTA2) * HALF_OVER_DELTA, x * INV_DELTA
    return speed, math.copysign(1.0, x)


@zm.func
def side_state(q, n):
    """(rho, u, v, w, p, |u|^2/2, H, q_n, 1/rho) of one conservative state."""
    rho = q[0]
    inv_rho = 1.0 / rho
    u, v, w = q[1] * inv_rho, q[2] * inv_rho, q[3] * inv_rho
    kinetic = 0.5 * (u * u + v * v + w * w)
    p = GM1 * (q[4] - rho * kinetic)
    return rho, u, v, w, p, kinetic, (q[4] + p) * inv_rho, u * n[0] + v * n[1] + w * n[2], inv_rho


@zm.func
def side_jacobian(side, sign, weight, n, roe, d_roe, d_jump):
    """dF/dQ of one side; sign is +1 for L, -1 for R; weight is its Roe weight; d_roe and d_jump
    are the columns of dD/droe and of M."""
    rho, u, v, w, p, kinetic, h, qn, inv_rho = side
    nx, ny, nz = n
    d_rho, d_u, d_v, d_w, d_h = d_roe
    m_rho, m_u, m_v, m_w, m_p = d_jump
    # droe/dW of this side: rho column (all of roe), u, v, w columns (u, v, w, H), p column (H)
    half_inv = 0.5 * inv_rho
    c_u, c_v, c_w = weight * half_inv * (u - roe[1]), weight * half_inv * (v - roe[2]), \
        weight * half_inv * (w - roe[3])
    c_h = weight * half_inv * (kinetic + kinetic - h - roe[4])
    g_rho = axpy(-half_inv * roe[0], d_rho, axpy(-c_u, d_u, axpy(-c_v, d_v, axpy(
        -c_w, d_w, axpy(-c_h, d_h, axpy(sign, m_rho, (qn, qn * u, qn * v, qn * w, qn * kinetic)))))))
    mass = rho * qn
    g_u = axpy(-weight, d_u, axpy(-weight * u, d_h, axpy(sign, m_u, (
        rho * nx, rho * nx * u + mass, rho * nx * v, rho * nx * w, rho * nx * h + mass * u))))
    g_v = axpy(-weight, d_v, axpy(-weight * v, d_h, axpy(sign, m_v, (
        rho * ny, rho * ny * u, rho * ny * v + mass, rho * ny * w, rho * ny * h + mass * v))))
    g_w = axpy(-weight, d_w, axpy(-weight * w, d_h, axpy(sign, m_w, (
        rho * nz, rho * nz * u, rho * nz * v, rho * nz * w + mass, rho * nz * h + mass * w))))
    g_p = axpy(-weight * GAMMA_OVER_GM1 * inv_rho, d_h, axpy(sign, m_p, (
        0.0, nx, ny, nz, GAMMA_OVER_GM1 * qn)))
    # dW/dQ, with the factor 1/2
    hu, hv, hw = half_inv * u, half_inv * v, half_inv * w
    col_rho = axpy(-hu, g_u, axpy(-hv, g_v, axpy(-hw, g_w, axpy(
        HALF_GM1 * kinetic, g_p, axpy(0.5, g_rho, (0.0, 0.0, 0.0, 0.0, 0.0))))))
    col_u = axpy(half_inv, g_u, axpy(-HALF_GM1 * u, g_p, (0.0, 0.0, 0.0, 0.0, 0.0)))
    col_v = axpy(half_inv, g_v, axpy(-HALF_GM1 * v, g_p, (0.0, 0.0, 0.0, 0.0, 0.0)))
    col_w = axpy(half_inv, g_w, axpy(-HALF_GM1 * w, g_p, (0.0, 0.0, 0.0, 0.0, 0.0)))
    return transpose((col_rho, col_u, col_v, col_w, axpy(HALF_GM1, g_p, (
        0.0, 0.0, 0.0, 0.0, 0.0))))
