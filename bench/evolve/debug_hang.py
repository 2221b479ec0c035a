"""Debug aid: evaluate the never-ending variant of tests/evolve's `spin` in this process (no
worker pool) and dump the Python stack if it is still stuck after 30 s:
`PYTHONPATH=tests python -m bench.evolve.debug_hang`."""
import faulthandler
import sys
import time

import numpy as np

import zymo as zm
from zymo.genome import Operand
from zymo.runtime.evolution.evaluate import evaluate
from zymo.runtime.evolution.validation import Task
from zymo.runtime.evolution.variant import base_ir
from zymo.runtime.kernel import param_of_arg

from evolve.evolve_kernels import spin, spin_inputs

if __name__ == "__main__":
    faulthandler.dump_traceback_later(30, exit=True, file=sys.stderr)
    args = spin_inputs(np.random.default_rng(0))
    base = base_ir(spin, [param_of_arg(a) for a in args])
    step = next(op for op in base.kernel.walk() if op.name == "arith.add"
                and op.results[0].type == zm.i64 and any(a.name == "control.while"
                                                         for a in op.ancestors()))
    edit = Operand("e1", step.id, 1, ("c", "i64", 0))
    print("original", evaluate(Task(spin, (), spin_inputs, None, (1, 64), 1, "cuda")), flush=True)
    began = time.perf_counter()
    print("hang", evaluate(Task(spin, (edit,), spin_inputs, None, (1, 64), 2, "cuda")),
          time.perf_counter() - began, flush=True)
