"""Launch each named flux-Jacobian variant once on the benchmark mesh: the program to run under
a profiler (`bash tools/ncu_probe.sh cfd VARIANT...`).

    python -m bench.cfd.probe [--nodes 86 99 102] VARIANT...
"""
from __future__ import annotations

import argparse
import sys

from bench.cfd import kernels, mesh as meshes, reference as ref
from bench.cfd.run import device_arrays, launch


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs=3, default=(86, 99, 102))
    parser.add_argument("variants", nargs="+", choices=sorted(kernels.VARIANTS), metavar="VARIANT")
    args = parser.parse_args()
    import cupy as cp

    mesh = meshes.box_mesh(*args.nodes, seed=0)
    layout = meshes.jacobian_layout(mesh)
    arrays = device_arrays(cp, mesh, layout, ref.free_stream_states(mesh, seed=0))
    diag = cp.zeros((len(mesh.nodes), 5, 5))
    off = cp.zeros((len(layout.col), 5, 5), cp.float32)
    for name in args.variants:
        launch(name, cp, arrays, diag, off, len(mesh.edges))
        cp.cuda.Device().synchronize()
        print(name, "launched", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
