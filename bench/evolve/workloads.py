"""The evolutionary optimizer's workloads, each what `zm.evolve` needs to search one kernel.

A workload module exposes `WORKLOADS`, a dict of name -> Workload; `bench.evolve.run` and the
tests find them all through `load()`, which imports each module lazily (SIMCoV's generator and
the Smith-Waterman pools are not built for a run that does not use them).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Workload:
    """One kernel to evolve and how to judge it.

    `inputs(rng)` gives fresh launch arguments for one fitness evaluation; `launch` is
    (grid, block) or args -> (grid, block); `check(expected, got)` gives the error of a
    variant's arguments after its launch against the original's (None: zymo's default, the
    largest relative error); a variant is valid when that error is <= `tolerance`, a number or
    a function of the backend (measured there from repeated runs of the original).
    `holdout(rng)` gives the larger held-out input every reported variant must pass, and
    `race_check(rng)` small inputs for the interpreter's race detector (None: skip it)."""
    kernel: object
    launch: object
    inputs: object
    holdout: object
    check: object = None
    tolerance: float = 0.0
    race_check: object = None
    describe: str = ""
    options: dict = field(default_factory=dict)   # other zm.evolve keywords

    def tolerance_on(self, backend: str) -> float:
        return float(self.tolerance(backend) if callable(self.tolerance) else self.tolerance)

    def warm(self, rng) -> None:
        """Build what the inputs cache (pools on disk) before workers start loading them."""
        self.inputs(rng)
        self.holdout(rng)


# module (under bench.evolve) -> the workloads it defines
MODULES = ("smith_waterman", "simcov", "simcov_gevo", "backend_kernels", "rodinia_hotspot3d",
           "rodinia_srad", "rodinia_lud", "rodinia_gaussian", "rodinia_backprop", "rodinia_bfs",
           "rodinia_btree", "rodinia_streamcluster", "rodinia_hotspot", "rodinia_particlefilter")


def load(names=None) -> dict[str, Workload]:
    """Workloads by name (all of them, or those named), in the order asked for."""
    found: dict[str, Workload] = {}
    for module in MODULES:
        try:
            found.update(importlib.import_module(f"bench.evolve.{module}").WORKLOADS)
        except ModuleNotFoundError as error:
            if error.name != f"bench.evolve.{module}":
                raise
    if names is None:
        return found
    missing = [n for n in names if n not in found]
    if missing:
        raise KeyError(f"no workload named {', '.join(missing)}: choose from "
                       f"{', '.join(found)}")
    return {n: found[n] for n in names}
