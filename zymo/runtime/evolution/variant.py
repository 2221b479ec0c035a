"""A kernel variant: the original kernel's optimized IR with an edit list replayed on it,
optimized again, and launched like any kernel (`variant[grid, block](*args)`)."""
from __future__ import annotations

from ...genome import canonicalize_ids, dumps, replay
from ...passes.pipeline import run_pipeline
from ..compile import PRIMAL, Job, Step
from ..kernel import Kernel, Specialization


def identity(kernel: Kernel):
    """What tells kernels apart in per-process caches (a derivative shares its primal's
    Python function)."""
    return getattr(kernel, "identity", None) or kernel.py_func


def base_ir(kernel: Kernel, params):
    """The IR edits refer to: the original's optimized IR for `params`, with stable ids."""
    return canonicalize_ids(kernel.specialization(tuple(params)).optimized.clone())


class VariantKernel(Kernel):
    def __init__(self, original: Kernel, edits=(), backend: str | None = None,
                 boundscheck: bool | None = None, _shared=None):
        original = getattr(original, "original", original)
        check = original.boundscheck if boundscheck is None else boundscheck
        super().__init__(original.py_func, backend or original.backend, check,
                         original.fastmath, _shared, max_registers=original.max_registers)
        self.original = original
        self.edits = tuple(edits)
        self.launch_class = original.launch_class

    def on(self, backend: str) -> "VariantKernel":
        return VariantKernel(self.original, self.edits, backend, self.boundscheck, self._specs)

    def checked(self, boundscheck: bool = True) -> "VariantKernel":
        """The same variant built with (or without) bounds checks."""
        return VariantKernel(self.original, self.edits, self.backend, boundscheck)

    def _specialize(self, params) -> Specialization:
        return VariantSpecialization(self, params)

    def save(self, path) -> None:
        """Write the edit list as JSON; `zm.load_variant(kernel, path)` re-applies it."""
        with open(path, "w") as file:
            file.write(dumps(self.edits))

    def __reduce__(self):
        return (VariantKernel, (self.original, self.edits, self.backend, self.boundscheck))

    def __repr__(self) -> str:
        return f"<zymo kernel {self.__name__} with {len(self.edits)} edits>"


class VariantSpecialization(Specialization):
    """The compile driver's optimize stage is the replay of the edits on the original's IR."""

    steps = {**PRIMAL, "optimize": Step(None, lambda job, _input: job.replay(), "replay")}

    def __init__(self, kernel: VariantKernel, params):
        base = kernel.original.specialization(tuple(params))
        # a derivative's tapes follow the arguments; the IR before the edits is the original's
        Job.__init__(self, kernel, base.params, {"frontend": base.module})
        self.skipped = 0

    def replay(self):
        optimized, self.skipped = variant_ir(self.kernel.original, self.params,
                                             self.kernel.edits)
        return optimized


_recent: dict = {}


def variant_ir(original: Kernel, params, edits):
    """The re-optimized IR of a variant and the number of skipped edits; the last few are
    kept, since a checked and an unchecked build of one variant share it."""
    key = (identity(original), tuple(p.key() for p in params), edits)
    found = _recent.get(key)
    if found is None:
        replayed = replay(base_ir(original, params), edits)
        found = (run_pipeline(replayed.module), replayed.skipped)
        if len(_recent) >= 8:
            _recent.pop(next(iter(_recent)))
        _recent[key] = found
    return found
