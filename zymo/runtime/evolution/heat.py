"""Where a kernel spends its time, for the mutator: the original run once on the reference
interpreter, counting the threads that execute each op (see `zymo.genome.mutate`)."""
from __future__ import annotations

import numpy as np

from ...genome.mutate import op_heat
from .worker import run
from .variant import VariantKernel


def profile(kernel, inputs, launch, seed: int, max_ops: int | None = None
            ) -> dict[str, float]:
    """Heat by op id (the ids edits refer to) of `kernel` on `inputs(rng)`, which should be
    small: the interpreter runs every op for every thread. With `max_ops`, the interpreter
    stops after that many (thread, op) executions and the heat is what it counted so far:
    a partial run of a large input still shows where the time goes (its first blocks, the
    first iterations of its loops)."""
    from ...backend import interp
    from ...diagnostics import StepLimitError
    args = list(inputs(np.random.default_rng(seed)))
    counts: dict = {}
    with interp.settings(counts=counts, max_ops=max_ops):
        try:
            # the variant of no edits: the IR edits are made on, with its op ids
            run(VariantKernel(kernel, ()).on("interp"), launch, args, "interp")
        except StepLimitError:
            if not counts:
                raise
    return op_heat(counts)
