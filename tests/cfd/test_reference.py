"""The NumPy reference: the research note's test vectors (cases A, B, C), the flux's invariants,
the complex-step Jacobians, the assembly and the benchmark states."""
from __future__ import annotations

import numpy as np
import pytest

from bench.cfd import reference as ref
from bench.cfd.mesh import box_mesh, jacobian_layout

# shared/research/forward-mode-and-roe.md, section 1.5; states are (rho, u, v, w, p).
CASE_A = (np.array([1.0, 0.5, 0.2, -0.1, 1 / 1.4]), np.array([0.9, 0.45, 0.25, -0.05, 0.8 / 1.4]),
          np.array([1.0, 2.0, 2.0]) / 3)
CASE_B = (np.array([1.0, 0.0, 0.0, 0.0, 1.0]), np.array([0.125, 0.0, 0.0, 0.0, 0.1]),
          np.array([1.0, 0.0, 0.0]))
CASE_C = (np.array([1.0, 0.1, 0.6, 0.8, 1 / 1.4]), np.array([1.02, 0.1, 0.62, 0.79, 1.03 / 1.4]),
          np.array([0.0, 0.6, 0.8]))
FLUX = {
    "A": [3.0474586224934930e-01, 3.6557387318874091e-01, 4.9256595272264142e-01,
          4.0114219404783663e-01, 7.7945420919586161e-01],
    "B": [3.9066048578596296e-01, 5.5000000000000004e-01, 0.0, 0.0, 1.2958822773731129e+00],
    "C": [9.9956566852976148e-01, 9.9956566852976159e-02, 1.0285677081002784e+00,
          1.3714316129644815e+00, 3.0041248378696297e+00],
}
CASES = {"A": CASE_A, "B": CASE_B, "C": CASE_C}
JACOBIAN_A_LEFT = [
    [0.132169537335, 0.126520447091, 0.370743814693, 0.414798518703, 0.146849013366],
    [-0.088927239564, 0.340365003529, 0.262627835829, 0.308242960775, 0.152050416487],
    [-0.059292581521, 0.024451373409, 0.477030757252, 0.266254448413, 0.197345263711],
    [-0.017949476336, -0.013504760718, 0.095827724892, 0.411794780754, 0.153290559701],
    [-0.385338808172, 0.352155189294, 1.054232509147, 1.185210867691, 0.706574416430]]
JACOBIAN_A_RIGHT = [
    [-0.098909816658, 0.181268945428, 0.261111151249, 0.214413532876, -0.155658727911],
    [-0.027294757792, 0.067809014723, 0.040391279936, 0.032209303281, -0.027273255519],
    [0.043910942114, -0.073417692411, -0.070409872795, -0.091454682849, 0.058613500923],
    [0.085172545210, -0.127798376039, -0.187372078500, -0.117149882381, 0.105311119296],
    [-0.300554460354, 0.390841727451, 0.560868243238, 0.459285072611, -0.299981708426]]


def random_states(rng, count):
    """Primitive states with rho, p in [0.5, 2] and |u| <= 1."""
    direction = rng.normal(size=(count, 3))
    direction /= np.linalg.norm(direction, axis=1)[:, None]
    speed = rng.uniform(0.0, 1.0, count) ** (1 / 3)
    return np.column_stack([rng.uniform(0.5, 2.0, count), speed[:, None] * direction,
                            rng.uniform(0.5, 2.0, count)])


def unit_normals(rng, count):
    n = rng.normal(size=(count, 3))
    return n / np.linalg.norm(n, axis=1)[:, None]


@pytest.mark.parametrize("name", ["A", "B", "C"])
def test_flux_test_vectors(name):
    left, right, n = CASES[name]
    flux = ref.roe_flux_prim(left, right, n)
    np.testing.assert_allclose(flux, FLUX[name], rtol=1e-14, atol=1e-14 * np.abs(FLUX[name]).max())


def test_case_a_roe_state():
    rho, velocity, enthalpy, sound, qn = ref.roe_average(*CASE_A)
    expected = [0.948683298051, 0.475658350975, 0.224341649025, -0.0756583509747, 2.50685758059,
                0.972770366816, 0.257674982359]  # 12 significant digits
    np.testing.assert_allclose([rho, *velocity, enthalpy, sound, qn], expected, rtol=5e-12)


def test_case_a_jacobians():
    left, right, n = CASE_A
    _, d_left, d_right = ref.complex_step_jacobians(ref.prim_to_cons(left),
                                                    ref.prim_to_cons(right), n)
    np.testing.assert_allclose(d_left, JACOBIAN_A_LEFT, rtol=0, atol=6e-13)  # 12 decimals
    np.testing.assert_allclose(d_right, JACOBIAN_A_RIGHT, rtol=0, atol=6e-13)


def test_entropy_fix_fires_in_case_c_only():
    for name, fires in (("A", False), ("B", False), ("C", True)):
        slow, fast = ref.acoustic_speeds(*CASES[name])
        assert (min(slow, fast) < ref.DELTA) == fires


def test_state_conversions_round_trip():
    states = random_states(np.random.default_rng(0), 50)
    np.testing.assert_allclose(ref.cons_to_prim(ref.prim_to_cons(states)), states, rtol=1e-14)


def test_consistency():
    rng = np.random.default_rng(1)
    states, n = random_states(rng, 200), unit_normals(rng, 200)
    np.testing.assert_allclose(ref.roe_flux_prim(states, states, n), ref.normal_flux(states, n),
                               rtol=0, atol=1e-15)


def test_rotation_invariance():
    rng = np.random.default_rng(2)
    left, right, n = random_states(rng, 200), random_states(rng, 200), unit_normals(rng, 200)
    rotation, _ = np.linalg.qr(rng.normal(size=(3, 3)))

    def rotate(states):
        turned = states.copy()
        turned[:, 1:4] = states[:, 1:4] @ rotation.T
        return turned

    flux = ref.roe_flux_prim(left, right, n)
    turned = ref.roe_flux_prim(rotate(left), rotate(right), n @ rotation.T)
    np.testing.assert_allclose(turned, rotate(flux), rtol=0, atol=1e-14)


def test_equal_states_jacobians_sum_to_the_physical_one():
    rng = np.random.default_rng(3)
    states, n = ref.prim_to_cons(random_states(rng, 100)), unit_normals(rng, 100)
    _, d_left, d_right = ref.complex_step_jacobians(states, states, n)
    physical = np.empty_like(d_left)
    for k in range(5):
        stepped = states.astype(complex)
        stepped[:, k] += 1e-30j
        physical[:, :, k] = np.imag(ref.normal_flux(ref.cons_to_prim(stepped), n)) / 1e-30
    np.testing.assert_allclose(d_left + d_right, physical, rtol=0, atol=1e-14)


def test_complex_step_matches_finite_differences():
    rng = np.random.default_rng(4)
    left, right = ref.prim_to_cons(random_states(rng, 20)), ref.prim_to_cons(random_states(rng, 20))
    n = unit_normals(rng, 20)
    _, d_left, _ = ref.complex_step_jacobians(left, right, n)
    step = 1e-6
    for k in range(5):
        up, down = left.copy(), left.copy()
        up[:, k] += step
        down[:, k] -= step
        central = (ref.roe_flux_cons(up, right, n) - ref.roe_flux_cons(down, right, n)) / (2 * step)
        np.testing.assert_allclose(d_left[:, :, k], central, rtol=0, atol=1e-7)


@pytest.fixture(scope="module")
def small():
    mesh = box_mesh(4, 3, 3, seed=5)
    return mesh, jacobian_layout(mesh)


def _residual(mesh, Q):
    """R_i = sum of A F over the edges leaving node i minus over those entering it."""
    area = np.linalg.norm(mesh.normals, axis=1)
    flux = area[:, None] * ref.roe_flux_cons(Q[mesh.edges[:, 0]], Q[mesh.edges[:, 1]],
                                             mesh.normals / area[:, None])
    residual = np.zeros(Q.shape, dtype=flux.dtype)
    np.add.at(residual, mesh.edges[:, 0], flux)
    np.add.at(residual, mesh.edges[:, 1], -flux)
    return residual


def test_assembly_is_the_residual_jacobian(small):
    mesh, layout = small
    Q = ref.free_stream_states(mesh, seed=1)
    diagonal, off = ref.assemble_reference(mesh, layout, Q, chunk=40)
    count = len(Q)
    dense = np.empty((count, 5, count, 5))
    for node in range(count):
        for k in range(5):
            stepped = Q.astype(complex)
            stepped[node, k] += 1e-30j
            dense[:, :, node, k] = np.imag(_residual(mesh, stepped)) / 1e-30
    assert diagonal.dtype == np.float64 and off.dtype == np.float32
    np.testing.assert_allclose(diagonal, dense[np.arange(count), :, np.arange(count)], atol=1e-14)
    row_of = np.repeat(np.arange(count), np.diff(layout.row_ptr))
    expected = dense[row_of, :, layout.col].astype(np.float32)
    np.testing.assert_allclose(off, expected, rtol=1e-6, atol=1e-7)
    neighbours = np.zeros((count, count), bool)
    neighbours[row_of, layout.col] = True
    neighbours[np.arange(count), np.arange(count)] = True
    assert np.all(dense[~neighbours[:, None, :, None].repeat(5, 1).repeat(5, 3)] == 0.0)


def test_uniform_state_rows_sum_to_zero_inside(small):
    mesh, layout = small
    Q = np.tile(ref.prim_to_cons(np.array([1.0, 0.5, 0.3, 0.2, 1 / 1.4])), (len(mesh.nodes), 1))
    diagonal, off = ref.assemble_reference(mesh, layout, Q)
    row_sum = diagonal + np.add.reduceat(off.astype(np.float64), layout.row_ptr[:-1], axis=0)
    assert np.abs(row_sum[~mesh.boundary]).max() < 1e-6 * np.abs(diagonal).max()


def test_free_stream_states_exercise_both_branches():
    mesh = box_mesh(10, 10, 10, seed=2)
    states = ref.cons_to_prim(ref.free_stream_states(mesh, seed=4))
    assert np.all(np.abs(states[:, 0] - 1.0) <= 0.1 + 1e-12)
    assert np.all(np.abs(states[:, 4] * ref.GAMMA - 1.0) <= 0.1 + 1e-12)
    area = np.linalg.norm(mesh.normals, axis=1)[:, None]
    slow, fast = ref.acoustic_speeds(states[mesh.edges[:, 0]], states[mesh.edges[:, 1]],
                                     mesh.normals / area)
    fixed = np.minimum(slow, fast) < ref.DELTA
    assert 0.002 < fixed.mean() < 0.2
    assert np.array_equal(ref.free_stream_states(mesh, seed=4), ref.free_stream_states(mesh, 4))
