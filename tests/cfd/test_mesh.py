"""The benchmark mesh: edge counts, degrees, closed dual cells, volumes, renumbering, and the
block-CSR Jacobian layout."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from bench.cfd import mesh as cfd_mesh
from bench.cfd.mesh import box_mesh, edge_count, jacobian_layout, tet_volumes

BOXES = [(2, 2, 2), (3, 4, 5), (6, 5, 4)]


@pytest.fixture(scope="module")
def box():
    return box_mesh(6, 7, 5, jitter=0.1, seed=3)


@pytest.mark.parametrize("shape", BOXES)
@pytest.mark.parametrize("renumber", [False, True])
def test_edge_count_closed_form(shape, renumber):
    mesh = box_mesh(*shape, renumber=renumber)
    assert len(mesh.edges) == edge_count(*shape)
    assert len(mesh.nodes) == np.prod(shape)
    assert len(mesh.tets) == 6 * np.prod(np.array(shape) - 1)


def test_benchmark_size():
    assert edge_count(86, 99, 102) == 5_970_033
    assert 86 * 99 * 102 == 868_428


def test_edges_sorted_and_unique(box):
    edges = box.edges.astype(np.int64)
    assert box.edges.dtype == np.int32 and box.normals.dtype == np.float64
    assert np.all(edges[:, 0] < edges[:, 1])
    key = edges[:, 0] * len(box.nodes) + edges[:, 1]
    assert np.all(np.diff(key) > 0)


def test_interior_degree_14(box):
    degree = np.bincount(box.edges.ravel(), minlength=len(box.nodes))
    assert np.all(degree[~box.boundary] == 14)
    assert np.all(degree[box.boundary] < 14)
    assert box.boundary.sum() == 6 * 7 * 5 - 4 * 5 * 3


def _dual_sum(mesh):
    """The sum of each node's outward interior dual-face area vectors."""
    total = np.zeros((len(mesh.nodes), 3))
    for axis in range(3):
        total[:, axis] += np.bincount(mesh.edges[:, 0], mesh.normals[:, axis], len(mesh.nodes))
        total[:, axis] -= np.bincount(mesh.edges[:, 1], mesh.normals[:, axis], len(mesh.nodes))
    return total


def test_dual_cells_closed(box):
    scale = np.abs(box.normals).max()
    total = _dual_sum(box)
    assert np.abs(total[~box.boundary]).max() < 1e-14 * scale
    assert np.abs(box.boundary_normals[~box.boundary]).max() == 0.0
    assert np.abs(total + box.boundary_normals).max() < 1e-14 * scale  # boundary cells too


def test_normals_point_from_lower_to_higher(box):
    along = np.sum(box.normals * (box.nodes[box.edges[:, 1]] - box.nodes[box.edges[:, 0]]), axis=1)
    assert np.all(along > 0)


def test_volumes_fill_the_box(box):
    volumes = tet_volumes(box)
    assert np.all(volumes > 0)
    assert volumes.sum() == pytest.approx(1.0, rel=1e-13)


def test_jitter_moves_interior_nodes_only():
    plain = box_mesh(5, 4, 6, jitter=0.0, renumber=False)
    moved = box_mesh(5, 4, 6, jitter=0.1, seed=7, renumber=False)
    shift = np.abs(moved.nodes - plain.nodes)
    assert np.all(shift[plain.boundary] == 0.0)
    assert np.all(shift[~plain.boundary].max(axis=1) > 0.0)
    assert np.all(shift <= 0.1 / 3 + 1e-15)  # the smallest spacing is 1/3
    again = box_mesh(5, 4, 6, jitter=0.1, seed=7, renumber=False)
    assert np.array_equal(again.nodes, moved.nodes)


def test_renumbering_keeps_the_mesh(box):
    plain = box_mesh(6, 7, 5, jitter=0.1, seed=3, renumber=False)
    new_id = np.empty(len(plain.nodes), np.int64)
    new_id[np.lexsort(plain.nodes.T)] = np.lexsort(box.nodes.T)  # match nodes by position
    assert np.array_equal(box.nodes[new_id], plain.nodes)
    assert np.array_equal(box.boundary[new_id], plain.boundary)
    edges = new_id[plain.edges]
    flip = edges[:, 0] > edges[:, 1]
    edges = np.sort(edges, axis=1)
    order = np.lexsort((edges[:, 1], edges[:, 0]))
    assert np.array_equal(edges[order], box.edges)
    normals = np.where(flip[:, None], -plain.normals, plain.normals)
    assert np.array_equal(normals[order], box.normals)


def test_cuthill_mckee_without_scipy(monkeypatch):
    plain = box_mesh(7, 6, 5, renumber=False)
    count = len(plain.nodes)
    with_scipy = cfd_mesh.rcm_order(plain.edges, count)
    monkeypatch.setitem(sys.modules, "scipy", None)  # import scipy... now raises ImportError
    monkeypatch.setitem(sys.modules, "scipy.sparse", None)
    monkeypatch.setitem(sys.modules, "scipy.sparse.csgraph", None)
    own = cfd_mesh.rcm_order(plain.edges, count)
    assert np.array_equal(np.sort(own), np.arange(count))

    def bandwidth(order):
        new_id = np.empty(count, np.int64)
        new_id[order] = np.arange(count)
        return cfd_mesh.bandwidth(new_id[plain.edges])

    assert bandwidth(own) <= 1.2 * bandwidth(with_scipy)
    mesh = box_mesh(7, 6, 5)
    assert len(mesh.edges) == edge_count(7, 6, 5)


def test_jacobian_layout(box):
    layout = jacobian_layout(box)
    count, edges = len(box.nodes), box.edges
    assert layout.row_ptr.dtype == layout.col.dtype == layout.off_ij.dtype == np.int32
    assert layout.row_ptr[0] == 0 and layout.row_ptr[-1] == len(layout.col) == 2 * len(edges)
    row_of = np.repeat(np.arange(count), np.diff(layout.row_ptr))
    assert np.all(np.diff(layout.col)[np.diff(row_of) == 0] > 0)  # sorted within each row
    assert np.array_equal(row_of[layout.off_ij], edges[:, 0])
    assert np.array_equal(layout.col[layout.off_ij], edges[:, 1])
    assert np.array_equal(row_of[layout.off_ji], edges[:, 1])
    assert np.array_equal(layout.col[layout.off_ji], edges[:, 0])
    slots = np.concatenate([layout.off_ij, layout.off_ji])
    assert np.array_equal(np.sort(slots), np.arange(len(layout.col)))
