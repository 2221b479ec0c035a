"""Every flux-Jacobian variant of the CFD benchmark assembles the Jacobian the complex-step
reference assembles, on a small mesh (the benchmark's correctness gate, on the CPU)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from bench.cfd import kernels, mesh as meshes, reference as ref
from zymo.backend.nvptx import ptxas


@pytest.fixture(scope="module")
def problem():
    mesh = meshes.box_mesh(5, 4, 4, seed=3)
    layout = meshes.jacobian_layout(mesh)
    Q = ref.free_stream_states(mesh, seed=3, sonic_fraction=0.3)
    return mesh, layout, Q, ref.assemble_reference(mesh, layout, Q)


# The _rN variants differ only in their PTX (.maxnreg); the GPU run gates them.
@pytest.mark.parametrize("name", [name for name in kernels.VARIANTS
                                  if not re.search(r"_r\d+$", name)])
def test_variant_assembles_the_reference_jacobian(problem, name):
    mesh, layout, Q, (diag_ref, off_ref) = problem
    kernel = kernels.VARIANTS[name][0]
    diag = np.zeros_like(diag_ref)
    off = np.zeros_like(off_ref)
    grid, block = kernels.launch_config(name, len(mesh.edges))
    kernel[grid, block](Q, mesh.edges, mesh.normals, layout.off_ij, layout.off_ji, diag, off)
    scale = np.abs(diag_ref).max()
    np.testing.assert_allclose(diag, diag_ref, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(off, off_ref, rtol=1e-6, atol=1e-6 * np.abs(off_ref).max())


# Variants that give each group of threads a run of edges: the benchmark's small gate mesh
# (3,249 edges) once ended on a partial group that lost the last edge's columns.
@pytest.mark.parametrize("name", [name for name, (_, per_edge, _) in kernels.VARIANTS.items()
                                  if isinstance(per_edge, tuple)
                                  and not re.search(r"_r\d+$", name)])
def test_run_variants_cover_the_last_edge(name):
    mesh = meshes.box_mesh(9, 8, 8, seed=5)
    layout = meshes.jacobian_layout(mesh)
    Q = ref.free_stream_states(mesh, seed=5, sonic_fraction=0.3)
    diag_ref, off_ref = ref.assemble_reference(mesh, layout, Q)
    diag, off = np.zeros_like(diag_ref), np.zeros_like(off_ref)
    grid, block = kernels.launch_config(name, len(mesh.edges))
    kernels.VARIANTS[name][0][grid, block](Q, mesh.edges, mesh.normals, layout.off_ij,
                                           layout.off_ji, diag, off)
    np.testing.assert_allclose(diag, diag_ref, rtol=0, atol=1e-12 * np.abs(diag_ref).max())
    np.testing.assert_allclose(off, off_ref, rtol=1e-6, atol=1e-6 * np.abs(off_ref).max())


def test_blocks_only_kernel_equals_complex_step(problem):
    mesh, _, Q, _ = problem
    E = len(mesh.edges)
    JL, JR = np.zeros((E, 5, 5)), np.zeros((E, 5, 5))
    kernels.dn5_2_blocks[-(-E // (kernels.BLOCK // 2)), kernels.BLOCK](Q, mesh.edges,
                                                                        mesh.normals, JL, JR)
    unit = mesh.normals / np.linalg.norm(mesh.normals, axis=1)[:, None]
    _, L, R = ref.complex_step_jacobians(Q[mesh.edges[:, 0]], Q[mesh.edges[:, 1]], unit)
    np.testing.assert_allclose(JL, L, rtol=0, atol=1e-13 * np.abs(L).max())
    np.testing.assert_allclose(JR, R, rtol=0, atol=1e-13 * np.abs(R).max())


# The hand-tangent kernels lower to PTX that ptxas accepts, without spills, with the float64
# atomics and float32 stores of the automatic kernel of the same strategy (the same scatter).
@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("name, automatic", [("hand_10", "dn1_10"),
                                             ("hand_10_runs", "dn1_10_runs")])
def test_hand_tangent_kernels_assemble(name, automatic):
    args = [np.zeros((2, 5)), np.zeros((2, 2), np.int32), np.zeros((2, 3)),
            np.zeros(2, np.int32), np.zeros(2, np.int32), np.zeros((2, 5, 5)),
            np.zeros((2, 5, 5), np.float32)]
    ptx, theirs = (kernels.VARIANTS[k][0].specialize(*args).ptx("sm_90")
                   for k in (name, automatic))
    report = ptxas.assemble(ptx, "sm_90")
    assert report.spill_stores == 0
    assert 0 < report.registers <= 255
    for instruction in ("atom.global.add.f64", "st.global.b32"):
        assert ptx.count(instruction) == theirs.count(instruction) > 0
