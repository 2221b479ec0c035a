"""Where a kernel spends its time, for the mutator: the original run once on the reference
interpreter, counting the threads that execute each op (see `zymo.evolve.mutate`)."""
from __future__ import annotations

import numpy as np

from ...evolve.mutate import op_heat
from .evaluate import run
from .variant import VariantKernel


def profile(kernel, inputs, launch, seed: int) -> dict[str, float]:
    """Heat by op id (the ids edits refer to) of `kernel` on `inputs(rng)`, which should be
    small: the interpreter runs every op for every thread."""
    from ...backend import interp
    args = list(inputs(np.random.default_rng(seed)))
    counts: dict = {}
    with interp.settings(counts=counts):
        # the variant of no edits: the IR edits are made on, with its op ids
        run(VariantKernel(kernel, ()).on("interp"), launch, args, "interp")
    return op_heat(counts)
