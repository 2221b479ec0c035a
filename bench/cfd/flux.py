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
def roe_flux(wl, wr, n):
    """The Roe flux per unit area between primitive states wl, wr through the unit normal n."""
    left, right = prim_side(wl, n), prim_side(wr, n)
    return flux_from_sides(left, right, roe_average(left, right, n), n)


@zm.func
def roe_flux_cons(ql, qr, n):
    """The Roe flux per unit area between conservative states ql, qr."""
    return roe_flux(cons_to_prim(ql), cons_to_prim(qr), n)


# ---- the pieces: a side is (rho, u, v, w, p, |u|^2/2, H, q_n, 1/rho) ------------------------
@zm.func
def prim_side(state, n):
    """The side tuple of a primitive state (rho, u, v, w, p)."""
    rho, u, v, w, p = state
    inv_rho = 1.0 / rho
    kinetic = 0.5 * (u * u + v * v + w * w)
    return (rho, u, v, w, p, kinetic, GAMMA_OVER_GM1 * p * inv_rho + kinetic,
            u * n[0] + v * n[1] + w * n[2], inv_rho)


@zm.func
def cons_side(q, n):
    """The side tuple of a conservative state (rho, rho u, rho v, rho w, rho E)."""
    rho = q[0]
    inv_rho = 1.0 / rho
    u, v, w = q[1] * inv_rho, q[2] * inv_rho, q[3] * inv_rho
    kinetic = 0.5 * (u * u + v * v + w * w)
    p = GM1 * (q[4] - rho * kinetic)
    return rho, u, v, w, p, kinetic, (q[4] + p) * inv_rho, u * n[0] + v * n[1] + w * n[2], inv_rho


@zm.func
def roe_average(left, right, n):
    """(rho, u, v, w, H, |u|^2/2, c, q_n, weight_l, weight_r) of the Roe-averaged state."""
    rho_l, u_l, v_l, w_l, _, _, h_l, _, inv_l = left
    rho_r, u_r, v_r, w_r, _, _, h_r, _, _ = right
    ratio = math.sqrt(rho_r * inv_l)
    weight_l = 1.0 / (1.0 + ratio)
    weight_r = ratio * weight_l
    u = weight_l * u_l + weight_r * u_r
    v = weight_l * v_l + weight_r * v_r
    w = weight_l * w_l + weight_r * w_r
    h = weight_l * h_l + weight_r * h_r
    kinetic = 0.5 * (u * u + v * v + w * w)
    return (ratio * rho_l, u, v, w, h, kinetic, math.sqrt(GM1 * (h - kinetic)),
            u * n[0] + v * n[1] + w * n[2], weight_l, weight_r)


@zm.func
def wave_strengths(left, right, roe):
    """The jumps (u, v, w, p, q_n) and the strengths of the left acoustic, entropy and right
    acoustic waves (the combined shear waves' strength is the Roe density)."""
    rho, _, _, _, _, _, c, _, _, _ = roe
    d_p = right[4] - left[4]
    d_qn = right[7] - left[7]
    rc_dqn = rho * c * d_qn
    inv_c2 = 1.0 / (c * c)
    return (right[1] - left[1], right[2] - left[2], right[3] - left[3], d_p, d_qn,
            0.5 * (d_p - rc_dqn) * inv_c2, right[0] - left[0] - d_p * inv_c2,
            0.5 * (d_p + rc_dqn) * inv_c2)


@zm.func
def fixed_speed(x):
    """An acoustic wave speed: |x|, replaced by Harten's parabola below DELTA."""
    speed = abs(x)
    return (speed * speed + DELTA2) * HALF_OVER_DELTA if speed < DELTA else speed


@zm.func
def flux_from_sides(left, right, roe, n):
    """(Fn(L) + Fn(R) - D) / 2, D = sum of |speed| * strength * right eigenvector."""
    rho_l, u_l, v_l, w_l, p_l, _, h_l, qn_l, _ = left
    rho_r, u_r, v_r, w_r, p_r, _, h_r, qn_r, _ = right
    rho, u, v, w, h, kinetic, c, qn, _, _ = roe
    d_u, d_v, d_w, _, d_qn, a1, a2, a3 = wave_strengths(left, right, roe)
    nx, ny, nz = n
    b1 = fixed_speed(qn - c) * a1
    b2 = abs(qn) * a2
    b3 = fixed_speed(qn + c) * a3
    b4 = abs(qn) * rho
    b13 = b1 + b3
    d0 = b13 + b2
    cbm = c * (b3 - b1)
    d1 = d0 * u + cbm * nx + b4 * (d_u - d_qn * nx)
    d2 = d0 * v + cbm * ny + b4 * (d_v - d_qn * ny)
    d3 = d0 * w + cbm * nz + b4 * (d_w - d_qn * nz)
    d4 = b13 * h + cbm * qn + b2 * kinetic + b4 * (u * d_u + v * d_v + w * d_w - qn * d_qn)
    mass_l = rho_l * qn_l
    mass_r = rho_r * qn_r
    p_sum = p_l + p_r
    return (0.5 * (mass_l + mass_r - d0),
            0.5 * (mass_l * u_l + mass_r * u_r + p_sum * nx - d1),
            0.5 * (mass_l * v_l + mass_r * v_r + p_sum * ny - d2),
            0.5 * (mass_l * w_l + mass_r * w_r + p_sum * nz - d3),
            0.5 * (mass_l * h_l + mass_r * h_r - d4))


# ---- the hand-differentiated Jacobian ----------------------------------------------------------
# F = (Fn(L) + Fn(R) - D) / 2 where D = M(roe) (W_R - W_L) is linear in the jump of the primitive
# states W at a fixed Roe state roe = (rho, u, v, w, H). In primitive variables
#   dF/dW_L = (dFn/dW_L + M - dD/droe droe/dW_L) / 2,  dF/dW_R = (dFn/dW_R - M - ...) / 2,
# and dF/dQ = dF/dW dW/dQ. Roe-state derivatives pass through c = sqrt((g-1)(H - |u|^2/2)) and
# q_n = u.n; |x| has slope sign(x) (+1 at 0), the entropy fix (x^2 + d^2)/(2d) slope x/d.

@zm.func
def roe_jacobian_hand(ql, qr, n):
    """(F, dF/dQL, dF/dQR) of roe_flux_cons, differentiated by hand."""
    left, right = cons_side(ql, n), cons_side(qr, n)
    roe = roe_average(left, right, n)
    d_roe = dissipation_wrt_roe(left, right, roe, n)
    d_jump = dissipation_wrt_jump(roe, n)
    return (flux_from_sides(left, right, roe, n),
            side_jacobian(left, 1.0, roe[8], roe, n, d_roe, d_jump),
            side_jacobian(right, -1.0, roe[9], roe, n, d_roe, d_jump))


@zm.func
def fixed_speed_slope(x):
    """fixed_speed(x) and its derivative in x (x is not 0 where its sign is taken)."""
    return fixed_speed(x), x * INV_DELTA if abs(x) < DELTA else math.copysign(1.0, x)


@zm.func
def wave_speeds(qn, c):
    """The wave speeds |qn - c| (fixed), |qn|, |qn + c| (fixed), each followed by its slope."""
    l1, g1 = fixed_speed_slope(qn - c)
    l3, g3 = fixed_speed_slope(qn + c)
    return l1, g1, abs(qn), 1.0 if qn >= 0.0 else -1.0, l3, g3


@zm.func
def dissipation_wrt_roe(left, right, roe, n):
    """The columns dD/drho, dD/du, dD/dv, dD/dw, dD/dH at fixed jumps."""
    rho, u, v, w, h, kinetic, c, qn, _, _ = roe
    d_u, d_v, d_w, d_p, d_qn, a1, a2, a3 = wave_strengths(left, right, roe)
    nx, ny, nz = n
    l1, g1, l2, s2, l3, g3 = wave_speeds(qn, c)
    b1, b2, b3, b4 = l1 * a1, l2 * a2, l3 * a3, l2 * rho
    inv_c2 = 1.0 / (c * c)
    inv_c = c * inv_c2
    t_u, t_v, t_w = d_u - d_qn * nx, d_v - d_qn * ny, d_w - d_qn * nz  # the shear eigenvector
    t_e = u * d_u + v * d_v + w * d_w - qn * d_qn
    # d/drho: (l3 r3 - l1 r1) d_qn / (2c) + l2 (shear eigenvector)
    lm = 0.5 * (l3 - l1) * inv_c * d_qn
    lp = 0.5 * (l1 + l3) * d_qn
    d_rho = (lm, lm * u + lp * nx + l2 * t_u, lm * v + lp * ny + l2 * t_v,
             lm * w + lp * nz + l2 * t_w, lm * h + lp * qn + l2 * t_e)
    # d/dc times dc/dH = (g-1)/(2c): through the speeds, the strengths and r1, r3
    e_p = d_p * inv_c2 * inv_c
    e_q = 0.5 * rho * d_qn * inv_c2
    beta1 = l1 * (e_q - e_p) - g1 * a1
    beta3 = g3 * a3 - l3 * (e_p + e_q)
    beta2 = 2.0 * l2 * e_p
    dc_dh = HALF_GM1 * inv_c
    sig = (beta1 + beta2 + beta3) * dc_dh
    xi = ((beta3 - beta1) * c + b3 - b1) * dc_dh
    d_c = (sig, sig * u + xi * nx, sig * v + xi * ny, sig * w + xi * nz,
           ((beta1 + beta3) * h + beta2 * kinetic) * dc_dh + xi * qn)
    # d/dq_n: through the speeds, the shear speed and the energy rows of r1, r3, shear
    gam1, gam2, gam3 = g1 * a1, s2 * a2, g3 * a3
    tau = gam1 + gam2 + gam3
    zeta = (gam3 - gam1) * c
    rho_s = s2 * rho
    d_q = (tau, tau * u + zeta * nx + rho_s * t_u, tau * v + zeta * ny + rho_s * t_v,
           tau * w + zeta * nz + rho_s * t_w,
           (gam1 + gam3) * h + gam2 * kinetic + zeta * qn + rho_s * t_e + c * (b3 - b1)
           - b4 * d_qn)
    # totals: dc/du = -u (g-1)/(2c), dq_n/du = nx, plus the direct dependences on u and H
    d0 = b1 + b2 + b3
    return (d_rho,
            (nx * d_q[0] - u * d_c[0], nx * d_q[1] - u * d_c[1] + d0, nx * d_q[2] - u * d_c[2],
             nx * d_q[3] - u * d_c[3], nx * d_q[4] - u * d_c[4] + b2 * u + b4 * d_u),
            (ny * d_q[0] - v * d_c[0], ny * d_q[1] - v * d_c[1], ny * d_q[2] - v * d_c[2] + d0,
             ny * d_q[3] - v * d_c[3], ny * d_q[4] - v * d_c[4] + b2 * v + b4 * d_v),
            (nz * d_q[0] - w * d_c[0], nz * d_q[1] - w * d_c[1], nz * d_q[2] - w * d_c[2],
             nz * d_q[3] - w * d_c[3] + d0, nz * d_q[4] - w * d_c[4] + b2 * w + b4 * d_w),
            (d_c[0], d_c[1], d_c[2], d_c[3], d_c[4] + b1 + b3))


@zm.func
def dissipation_wrt_jump(roe, n):
    """The columns of M = dD/d(jump of rho, u, v, w, p) at a fixed Roe state."""
    rho, u, v, w, h, kinetic, c, qn, _, _ = roe
    nx, ny, nz = n
    l1, l2, l3 = fixed_speed(qn - c), abs(qn), fixed_speed(qn + c)
    inv_c2 = 1.0 / (c * c)
    l_avg = 0.5 * (l1 + l3)
    b4 = l2 * rho
    # p: (l1 r1 + l3 r3) / (2c^2) - l2 r2 / c^2
    pa = (l_avg - l2) * inv_c2
    pc = 0.5 * (l3 - l1) * c * inv_c2
    m_p = (pa, pa * u + pc * nx, pa * v + pc * ny, pa * w + pc * nz,
           (l_avg * h - l2 * kinetic) * inv_c2 + pc * qn)
    # q_n: rho (l3 r3 - l1 r1) / (2c) - b4 (0, n, q_n); u, v, w enter through q_n and the shear
    qa = 0.5 * rho * (l3 - l1) * c * inv_c2
    qb = rho * (l_avg - l2)
    m_qn = (qa, qa * u + qb * nx, qa * v + qb * ny, qa * w + qb * nz, qa * h + qb * qn)
    return ((l2, l2 * u, l2 * v, l2 * w, l2 * kinetic),
            (nx * m_qn[0], nx * m_qn[1] + b4, nx * m_qn[2], nx * m_qn[3], nx * m_qn[4] + b4 * u),
            (ny * m_qn[0], ny * m_qn[1], ny * m_qn[2] + b4, ny * m_qn[3], ny * m_qn[4] + b4 * v),
            (nz * m_qn[0], nz * m_qn[1], nz * m_qn[2], nz * m_qn[3] + b4, nz * m_qn[4] + b4 * w),
            m_p)


@zm.func
def axpy(a, x, y):
    """a x + y for 5-tuples."""
    return (a * x[0] + y[0], a * x[1] + y[1], a * x[2] + y[2], a * x[3] + y[3], a * x[4] + y[4])


@zm.func
def side_jacobian(side, sign, weight, roe, n, d_roe, d_jump):
    """dF/dQ of one side, as rows: sign is +1 for L and -1 for R, weight the side's Roe weight,
    d_roe the columns of dD/droe and d_jump those of M."""
    rho, u, v, w, _, kinetic, h, qn, inv_rho = side
    nx, ny, nz = n
    d_rho, d_u, d_v, d_w, d_h = d_roe
    m_rho, m_u, m_v, m_w, m_p = d_jump
    # dFn/dW + sign M - dD/droe droe/dW, one primitive column at a time; this side's rho moves
    # the whole Roe state, its u, v, w move the Roe u, v, w and H, its p moves H
    half_inv = 0.5 * inv_rho
    scale = weight * half_inv
    mass = rho * qn
    g_rho = axpy(sign, m_rho, (qn, qn * u, qn * v, qn * w, qn * kinetic))
    g_rho = axpy(-half_inv * roe[0], d_rho, g_rho)
    g_rho = axpy(-scale * (u - roe[1]), d_u, g_rho)
    g_rho = axpy(-scale * (v - roe[2]), d_v, g_rho)
    g_rho = axpy(-scale * (w - roe[3]), d_w, g_rho)
    g_rho = axpy(-scale * (kinetic + kinetic - h - roe[4]), d_h, g_rho)
    g_u = axpy(sign, m_u, (rho * nx, rho * nx * u + mass, rho * nx * v, rho * nx * w,
                           rho * nx * h + mass * u))
    g_u = axpy(-weight, d_u, axpy(-weight * u, d_h, g_u))
    g_v = axpy(sign, m_v, (rho * ny, rho * ny * u, rho * ny * v + mass, rho * ny * w,
                           rho * ny * h + mass * v))
    g_v = axpy(-weight, d_v, axpy(-weight * v, d_h, g_v))
    g_w = axpy(sign, m_w, (rho * nz, rho * nz * u, rho * nz * v, rho * nz * w + mass,
                           rho * nz * h + mass * w))
    g_w = axpy(-weight, d_w, axpy(-weight * w, d_h, g_w))
    g_p = (sign * m_p[0], nx + sign * m_p[1], ny + sign * m_p[2], nz + sign * m_p[3],
           GAMMA_OVER_GM1 * qn + sign * m_p[4])
    g_p = axpy(-weight * GAMMA_OVER_GM1 * inv_rho, d_h, g_p)
    return (conservative_row(g_rho[0], g_u[0], g_v[0], g_w[0], g_p[0], side),
            conservative_row(g_rho[1], g_u[1], g_v[1], g_w[1], g_p[1], side),
            conservative_row(g_rho[2], g_u[2], g_v[2], g_w[2], g_p[2], side),
            conservative_row(g_rho[3], g_u[3], g_v[3], g_w[3], g_p[3], side),
            conservative_row(g_rho[4], g_u[4], g_v[4], g_w[4], g_p[4], side))


@zm.func
def conservative_row(g_rho, g_u, g_v, g_w, g_p, side):
    """One row of (1/2) dF/dW dW/dQ from that row of dF/dW (columns rho, u, v, w, p)."""
    _, u, v, w, _, kinetic, _, _, inv_rho = side
    half_inv = 0.5 * inv_rho
    p_part = HALF_GM1 * g_p
    return (0.5 * g_rho - half_inv * (u * g_u + v * g_v + w * g_w) + kinetic * p_part,
            half_inv * g_u - u * p_part, half_inv * g_v - v * p_part, half_inv * g_w - w * p_part,
            p_part)


# ---- the hand-differentiated tangent ------------------------------------------------------------
# One directional derivative dF = d/dt F(QL + t dQL, QR + t dQR, n) at t = 0, the chain rule
# written out piece by piece beside the primal pieces above (forward mode by hand): a thread that
# computes one column of dF/dQL or dF/dQR passes a unit dQ on one side and zeros on the other.
# Each *_tangent takes the primal tuple it differentiates and returns the tangent of every entry
# the later pieces read (a side's tangent has the side tuple's layout; 1/rho's is not needed).

@zm.func
def roe_flux_tangent(ql, qr, dql, dqr, n):
    """d roe_flux_cons(ql, qr, n) along (dql, dqr), differentiated by hand."""
    left, right = cons_side(ql, n), cons_side(qr, n)
    roe = roe_average(left, right, n)
    d_left = cons_side_tangent(dql, left, n)
    d_right = cons_side_tangent(dqr, right, n)
    d_roe = roe_average_tangent(left, right, d_left, d_right, roe, n)
    d_diss = dissipation_tangent(left, right, d_left, d_right, roe, d_roe, n)
    fl = normal_flux_tangent(left, d_left, n)
    fr = normal_flux_tangent(right, d_right, n)
    return (0.5 * (fl[0] + fr[0] - d_diss[0]), 0.5 * (fl[1] + fr[1] - d_diss[1]),
            0.5 * (fl[2] + fr[2] - d_diss[2]), 0.5 * (fl[3] + fr[3] - d_diss[3]),
            0.5 * (fl[4] + fr[4] - d_diss[4]))


@zm.func
def cons_side_tangent(dq, side, n):
    """The tangent of cons_side(q, n) along dq: (rho, u, v, w, p, |u|^2/2, H, q_n)."""
    rho, u, v, w, _, kinetic, h, _, inv_rho = side
    d_rho = dq[0]
    d_u = (dq[1] - u * d_rho) * inv_rho
    d_v = (dq[2] - v * d_rho) * inv_rho
    d_w = (dq[3] - w * d_rho) * inv_rho
    d_kinetic = u * d_u + v * d_v + w * d_w
    d_p = GM1 * (dq[4] - d_rho * kinetic - rho * d_kinetic)
    return (d_rho, d_u, d_v, d_w, d_p, d_kinetic, (dq[4] + d_p - h * d_rho) * inv_rho,
            d_u * n[0] + d_v * n[1] + d_w * n[2])


@zm.func
def roe_average_tangent(left, right, d_left, d_right, roe, n):
    """The tangent of roe_average: (rho, u, v, w, H, |u|^2/2, c, q_n). With the weights
    wl = 1/(1 + r), wr = r wl, r = sqrt(rho_R / rho_L): dr = r (drho_R/rho_R - drho_L/rho_L)/2
    and dwr = -dwl = wl^2 dr."""
    rho, u, v, w, h, _, c, _, weight_l, weight_r = roe
    ratio = rho * left[8]
    d_ratio = 0.5 * ratio * (d_right[0] * right[8] - d_left[0] * left[8])
    d_weight = weight_l * weight_l * d_ratio
    d_u = weight_l * d_left[1] + weight_r * d_right[1] + d_weight * (right[1] - left[1])
    d_v = weight_l * d_left[2] + weight_r * d_right[2] + d_weight * (right[2] - left[2])
    d_w = weight_l * d_left[3] + weight_r * d_right[3] + d_weight * (right[3] - left[3])
    d_h = weight_l * d_left[6] + weight_r * d_right[6] + d_weight * (right[6] - left[6])
    d_kinetic = u * d_u + v * d_v + w * d_w
    return (d_ratio * left[0] + ratio * d_left[0], d_u, d_v, d_w, d_h, d_kinetic,
            HALF_GM1 * (d_h - d_kinetic) * (1.0 / c),   # 1/c: shared with dissipation_tangent
            d_u * n[0] + d_v * n[1] + d_w * n[2])


@zm.func
def dissipation_tangent(left, right, d_left, d_right, roe, d_roe, n):
    """The tangent of D (the five d's of flux_from_sides): through the strengths (jumps and
    Roe state), the speeds (slopes from wave_speeds) and the eigenvectors (Roe state)."""
    rho, u, v, w, h, kinetic, c, qn, _, _ = roe
    dr_rho, dr_u, dr_v, dr_w, dr_h, dr_kinetic, dr_c, dr_qn = d_roe
    j_u, j_v, j_w, j_p, j_qn, a1, a2, a3 = wave_strengths(left, right, roe)
    dj_rho = d_right[0] - d_left[0]
    dj_u, dj_v, dj_w = d_right[1] - d_left[1], d_right[2] - d_left[2], d_right[3] - d_left[3]
    dj_p, dj_qn = d_right[4] - d_left[4], d_right[7] - d_left[7]
    nx, ny, nz = n
    # strengths: a1, a3 = (jump p -+ rho c jump q_n) / (2 c^2), a2 = jump rho - jump p / c^2
    inv_c = 1.0 / c
    inv_c2 = inv_c * inv_c
    d_rc = (dr_rho * c + rho * dr_c) * j_qn + rho * c * dj_qn
    rel_c = 2.0 * dr_c * inv_c                       # d(1/c^2) = -(1/c^2) rel_c
    da1 = 0.5 * (dj_p - d_rc) * inv_c2 - a1 * rel_c
    da3 = 0.5 * (dj_p + d_rc) * inv_c2 - a3 * rel_c
    da2 = dj_rho - (dj_p - j_p * rel_c) * inv_c2
    # amplitudes b = speed * strength, b4 = |q_n| rho for the shear waves
    l1, g1, l2, s2, l3, g3 = wave_speeds(qn, c)
    b1, b2, b3, b4 = l1 * a1, l2 * a2, l3 * a3, l2 * rho
    db1 = g1 * (dr_qn - dr_c) * a1 + l1 * da1
    db2 = s2 * dr_qn * a2 + l2 * da2
    db3 = g3 * (dr_qn + dr_c) * a3 + l3 * da3
    db4 = s2 * dr_qn * rho + l2 * dr_rho
    b13, db13 = b1 + b3, db1 + db3
    d0, dd0 = b13 + b2, db13 + db2
    cbm = c * (b3 - b1)
    dcbm = dr_c * (b3 - b1) + c * (db3 - db1)
    t_u, t_v, t_w = j_u - j_qn * nx, j_v - j_qn * ny, j_w - j_qn * nz   # the shear eigenvector
    dt_u, dt_v, dt_w = dj_u - dj_qn * nx, dj_v - dj_qn * ny, dj_w - dj_qn * nz
    t_e = u * j_u + v * j_v + w * j_w - qn * j_qn
    dt_e = (dr_u * j_u + u * dj_u + dr_v * j_v + v * dj_v + dr_w * j_w + w * dj_w
            - dr_qn * j_qn - qn * dj_qn)
    return (dd0,
            dd0 * u + d0 * dr_u + dcbm * nx + db4 * t_u + b4 * dt_u,
            dd0 * v + d0 * dr_v + dcbm * ny + db4 * t_v + b4 * dt_v,
            dd0 * w + d0 * dr_w + dcbm * nz + db4 * t_w + b4 * dt_w,
            db13 * h + b13 * dr_h + dcbm * qn + cbm * dr_qn + db2 * kinetic + b2 * dr_kinetic
            + db4 * t_e + b4 * dt_e)


@zm.func
def normal_flux_tangent(side, d_side, n):
    """The tangent of Fn = (rho q_n, rho q_n u + p n, rho q_n H) of one side."""
    rho, u, v, w, _, _, h, qn, _ = side
    d_rho, d_u, d_v, d_w, d_p, _, d_h, d_qn = d_side
    mass = rho * qn
    d_mass = d_rho * qn + rho * d_qn
    return (d_mass, d_mass * u + mass * d_u + d_p * n[0], d_mass * v + mass * d_v + d_p * n[1],
            d_mass * w + mass * d_w + d_p * n[2], d_mass * h + mass * d_h)
