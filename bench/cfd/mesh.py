"""Tetrahedral box meshes with median-dual edge normals, and the block-CSR Jacobian layout.

The mesh is a Freudenthal (Kuhn) tetrahedralisation of a structured box of nx x ny x nz nodes in
the unit cube: 6 tetrahedra per cell, edges along the 3 axes, the 3 face diagonals and the body
diagonal (interior node degree 14). Interior nodes are jittered, nodes are renumbered by reverse
Cuthill-McKee and edges are sorted by (lower node, higher node), as an edge-based solver such as
FUN3D orders them.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

# Edge directions, each from the lower grid node to the higher one.
DIRECTIONS = ((1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (1, 0, 1), (0, 1, 1), (1, 1, 1))
# Tetrahedron k of a cell walks from corner (0,0,0) to corner (1,1,1) one axis at a time, in the
# axis order of permutation k; the 6 tetrahedra share the body diagonal.
KUHN_PATHS = tuple(itertools.permutations(range(3)))
TET_EDGES = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))


@dataclass
class Mesh:
    """A tetrahedral mesh of the unit cube with its median-dual edge data."""

    shape: tuple[int, int, int]   # grid nodes per axis
    nodes: np.ndarray             # float64 [N, 3]
    edges: np.ndarray             # int32 [E, 2], edges[:, 0] < edges[:, 1], sorted
    normals: np.ndarray           # float64 [E, 3], dual-face area vector from edges[:, 0] to [:, 1]
    tets: np.ndarray              # int32 [T, 4], positively oriented
    boundary: np.ndarray          # bool [N], node on the surface of the box
    boundary_normals: np.ndarray  # float64 [N, 3], outward dual-face area on the box surface


@dataclass
class JacobianLayout:
    """Block-CSR structure of the off-diagonal blocks of the edge-based Jacobian.

    Row i holds one block per neighbour j of node i, in increasing j; the diagonal blocks are
    kept apart (Adiag, [N, 5, 5]). Aoff is [nnz, 5, 5] with nnz = 2 E.
    """

    row_ptr: np.ndarray  # int32 [N + 1]
    col: np.ndarray      # int32 [nnz], neighbour columns, sorted within each row
    off_ij: np.ndarray   # int32 [E], block index of (edges[e, 0], edges[e, 1])
    off_ji: np.ndarray   # int32 [E], block index of (edges[e, 1], edges[e, 0])


def edge_count(nx: int, ny: int, nz: int) -> int:
    """The number of edges of box_mesh(nx, ny, nz), in closed form."""
    return sum((nx - dx) * (ny - dy) * (nz - dz) for dx, dy, dz in DIRECTIONS)


def box_mesh(nx: int, ny: int, nz: int, jitter: float = 0.1, seed: int = 0,
             renumber: bool = True) -> Mesh:
    """The Kuhn mesh of the unit cube with nx x ny x nz nodes; interior nodes are moved by up
    to `jitter` times the spacing along each axis (uniformly at random, from `seed`)."""
    shape = (nx, ny, nz)
    axes = [np.linspace(0.0, 1.0, n) for n in shape]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
    boundary = np.ones(shape, bool)
    boundary[1:-1, 1:-1, 1:-1] = False
    spacing = 1.0 / (np.array(shape) - 1)
    shift = np.random.default_rng(seed).uniform(-jitter, jitter, grid.shape) * spacing
    grid += np.where(boundary[..., None], 0.0, shift)

    ids = np.arange(grid.shape[0] * grid.shape[1] * grid.shape[2], dtype=np.int64)
    ids = ids.reshape(shape)
    edges, normals = _edges_and_normals(grid, ids)
    mesh = Mesh(shape, grid.reshape(-1, 3), edges, normals, _tets(ids), boundary.ravel(),
                _boundary_normals(grid).reshape(-1, 3))
    order = rcm_order(edges, len(mesh.nodes)) if renumber else np.arange(len(mesh.nodes))
    return _renumbered(mesh, order)


def _cells(array: np.ndarray, corner, cells) -> np.ndarray:
    """The view of `array` at `corner` + every cell index (a cell-shaped slice)."""
    return array[tuple(slice(c, c + n) for c, n in zip(corner, cells))]


def _path_corners(path) -> list[tuple[int, ...]]:
    corner = [0, 0, 0]
    corners = [tuple(corner)]
    for axis in path:
        corner[axis] = 1
        corners.append(tuple(corner))
    return corners


def _edges_and_normals(grid: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges per direction (from the lower node) and their median-dual area vectors.

    Within a tetrahedron, the dual face of edge (p, q) is the two triangles (midpoint, face
    centroid, tet centroid) through the faces (p, q, r) and (p, q, s); with m the midpoint its
    area vector is (r - m) x (s - m) / 12, oriented from p to q."""
    shape = ids.shape
    cells = tuple(n - 1 for n in shape)
    normals: dict[tuple[int, ...], np.ndarray] = {
        d: np.zeros((*(n - k for n, k in zip(shape, d)), 3)) for d in DIRECTIONS}
    for path in KUHN_PATHS:
        corners = _path_corners(path)
        points = [_cells(grid, corner, cells) for corner in corners]
        unit = np.array(corners, dtype=float)  # the undistorted cell decides the orientation
        for a, b in TET_EDGES:
            r, s = (t for t in range(4) if t not in (a, b))
            mid = 0.5 * (points[a] + points[b])
            area = np.cross(points[r] - mid, points[s] - mid) / 12.0
            unit_mid = 0.5 * (unit[a] + unit[b])
            sign = np.sign(np.cross(unit[r] - unit_mid, unit[s] - unit_mid) @ (unit[b] - unit[a]))
            direction = tuple(int(x) for x in unit[b] - unit[a])
            _cells(normals[direction], corners[a], cells)[...] += sign * area
    lower, higher, vectors = [], [], []
    for d in DIRECTIONS:
        extent = tuple(n - k for n, k in zip(shape, d))
        lower.append(_cells(ids, (0, 0, 0), extent).ravel())
        higher.append(_cells(ids, d, extent).ravel())
        vectors.append(normals[d].reshape(-1, 3))
    edges = np.stack([np.concatenate(lower), np.concatenate(higher)], axis=1)
    return edges, np.concatenate(vectors)


def _tets(ids: np.ndarray) -> np.ndarray:
    """The 6 tetrahedra of every cell, vertex order swapped where needed to orient them."""
    cells = tuple(n - 1 for n in ids.shape)
    blocks = []
    for path in KUHN_PATHS:
        corners = _path_corners(path)
        unit = np.array(corners, dtype=float)
        if np.linalg.det(unit[1:] - unit[0]) < 0:
            corners[2], corners[3] = corners[3], corners[2]
        blocks.append(np.stack([_cells(ids, c, cells).ravel() for c in corners], axis=1))
    return np.concatenate(blocks)


def _boundary_normals(grid: np.ndarray) -> np.ndarray:
    """Outward median-dual area vectors on the box faces: each surface triangle gives a third
    of its area vector to each of its vertices."""
    result = np.zeros(grid.shape)
    for axis in range(3):
        for side, outward in ((0, -1.0), (grid.shape[axis] - 1, 1.0)):
            index: list[int | slice] = [slice(None)] * 3
            index[axis] = side
            face = grid[tuple(index)]
            share = np.zeros(face.shape)
            cells = tuple(n - 1 for n in face.shape[:2])
            for middle in ((1, 0), (0, 1)):  # the two triangles around the diagonal (0,0)-(1,1)
                corners = ((0, 0), middle, (1, 1))
                p0, p1, p2 = (_cells(face, c, cells) for c in corners)
                area = np.linalg.norm(np.cross(p1 - p0, p2 - p0), axis=-1) / 6.0  # a third each
                for corner in corners:
                    _cells(share, corner, cells)[..., axis] += outward * area
            result[tuple(index)] += share
    return result


def _renumbered(mesh: Mesh, order: np.ndarray) -> Mesh:
    """`mesh` with node order[k] renamed k, edges reoriented low to high and sorted."""
    count = len(order)
    new_id = np.empty(count, np.int64)
    new_id[order] = np.arange(count)
    edges = new_id[mesh.edges]
    flip = edges[:, 0] > edges[:, 1]
    edges = np.stack([edges.min(axis=1), edges.max(axis=1)], axis=1)
    normals = np.where(flip[:, None], -mesh.normals, mesh.normals)
    by_nodes = np.argsort(edges[:, 0] * count + edges[:, 1], kind="stable")
    return Mesh(mesh.shape, mesh.nodes[order], edges[by_nodes].astype(np.int32),
                normals[by_nodes], new_id[mesh.tets].astype(np.int32), mesh.boundary[order],
                mesh.boundary_normals[order])


def tet_volumes(mesh: Mesh) -> np.ndarray:
    """Signed volume of every tetrahedron (positive for a valid mesh)."""
    corner = mesh.nodes[mesh.tets]
    return np.linalg.det(corner[:, 1:] - corner[:, :1]) / 6.0


# ---- renumbering ----------------------------------------------------------------------------
def rcm_order(edges: np.ndarray, count: int) -> np.ndarray:
    """Reverse Cuthill-McKee order of the nodes: order[new] = old. Uses scipy when present."""
    try:
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import reverse_cuthill_mckee
    except ImportError:
        return cuthill_mckee(edges, count)[::-1].copy()
    both = np.concatenate([edges, edges[:, ::-1]])
    graph = csr_matrix((np.ones(len(both), np.int8), (both[:, 0], both[:, 1])),
                       shape=(count, count))
    return reverse_cuthill_mckee(graph, symmetric_mode=True).astype(np.int64)


def cuthill_mckee(edges: np.ndarray, count: int) -> np.ndarray:
    """Cuthill-McKee order (order[new] = old), one breadth-first level at a time.

    Each component starts at its lowest-degree node; a level's new nodes are numbered in the
    order of their first-numbered parent, and by increasing degree among one parent's children,
    exactly as the node-at-a-time algorithm does."""
    row_ptr, col, _ = adjacency(edges, count)
    degree = np.diff(row_ptr)
    by_degree = np.argsort(degree, kind="stable")
    placed = np.zeros(count, bool)
    order = np.empty(count, np.int64)
    done = 0
    while done < count:
        start = by_degree[~placed[by_degree]][0]
        frontier = np.array([start])
        while frontier.size:
            placed[frontier] = True
            order[done:done + frontier.size] = frontier
            done += frontier.size
            first, counts = row_ptr[frontier], degree[frontier]
            parent = np.repeat(np.arange(frontier.size), counts)
            neighbour = col[np.repeat(first - np.cumsum(counts) + counts, counts)
                            + np.arange(counts.sum())]
            fresh = ~placed[neighbour]
            neighbour, parent = neighbour[fresh], parent[fresh]
            neighbour = neighbour[np.lexsort((degree[neighbour], parent))]
            _, seen_at = np.unique(neighbour, return_index=True)
            frontier = neighbour[np.sort(seen_at)]
    return order


def adjacency(edges: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR adjacency of an undirected graph: row_ptr [count + 1], the neighbours sorted within
    each row, and where each directed edge landed (the edges (i, j), then the (j, i))."""
    rows = np.concatenate([edges[:, 0], edges[:, 1]]).astype(np.int64)
    cols = np.concatenate([edges[:, 1], edges[:, 0]]).astype(np.int64)
    order = np.argsort(rows * count + cols, kind="stable")
    slot = np.empty(len(order), np.int64)
    slot[order] = np.arange(len(order))
    row_ptr = np.zeros(count + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=count), out=row_ptr[1:])
    return row_ptr, cols[order], slot


def bandwidth(edges: np.ndarray) -> int:
    """The largest |i - j| over the edges: the half-bandwidth of the node ordering."""
    return int(np.abs(edges[:, 0].astype(np.int64) - edges[:, 1]).max())


# ---- the Jacobian's block-CSR layout ----------------------------------------------------------
def jacobian_layout(mesh: Mesh) -> JacobianLayout:
    """The block-CSR layout of the off-diagonal blocks, with each edge's two block indices."""
    row_ptr, col, slot = adjacency(mesh.edges, len(mesh.nodes))
    edge_total = len(mesh.edges)
    return JacobianLayout(row_ptr.astype(np.int32), col.astype(np.int32),
                          slot[:edge_total].astype(np.int32), slot[edge_total:].astype(np.int32))
