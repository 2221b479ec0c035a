"""The pass pipeline, written once: named stages of (pass, why it is here)."""
from __future__ import annotations

from typing import TextIO

from ..ir.module import Module
from .alias import AnnotatePrivateArrays
from .counted import CountedWhile
from .cse import CSE
from .dce import DCE
from .early import EarlyLoads, MergeIfs
from .fold import Fold
from .inline import Inline
from .lasttrip import LastTrip
from .licm import LICM
from .manager import PassManager, Stage, verify_from_env

# Every pass by name, for the command line (`zymo ir --print-after NAME`).
PASSES = {cls.name: cls for cls in (Inline, Fold, CSE, DCE, LastTrip, LICM)}

SIMPLIFY_ROUNDS = 8


def default_stages() -> list[Stage]:
    return [
        Stage("inline", [
            (Inline(), "device functions disappear, so every later pass sees whole kernels"),
        ]),
        Stage("simplify", [
            (Fold(), "constants and identities first: they feed every other simplification"),
            (CSE(), "merge what folding made equal, before DCE counts uses"),
            (DCE(), "drop what folding and CSE left unused, and dead branches and loops"),
            (LastTrip(), "a loop whose trips all compute the same values runs once, so its "
                         "derivative's reverse sweep does too (LULESH's rep loop)"),
            (LICM(), "hoist invariant pure ops; the next round folds and merges them outside"),
        ], fixpoint=True, max_rounds=SIMPLIFY_ROUNDS),
    ]


STAGES = tuple(stage.name for stage in default_stages())


def codegen_stages(noalias: bool = False) -> list[Stage]:
    """What runs on a copy of the optimized IR just before it is lowered to LLVM: rewrites
    that help the machine but would only get in the way of differentiation and evolution.
    `noalias`: distinct array arguments do not overlap (a derivative whose launch checked)."""
    return [
        Stage("codegen", [
            (CountedWhile(), "a trip count LLVM can unroll and pipeline, where none can wrap"),
            (MergeIfs(), "a derivative's two sweeps under one guard: one block to schedule"),
            (EarlyLoads(noalias), "loads start before the loops ahead of them, not after"),
            (LICM(speculate=True), "also what sits under an if in a loop (math calls LLVM "
                                   "will not speculate)"),
            (DCE(), "the versioned loops leave unused carried values and constants"),
            (AnnotatePrivateArrays(), "which array arguments LLVM may take as noalias"),
        ]),
    ]


def prepare_for_codegen(module: Module, verify: bool | None = None,
                        noalias: bool = False) -> Module:
    """A copy of the optimized `module`, rewritten by the codegen stage."""
    prepared = module.clone()
    PassManager(codegen_stages(noalias), verify=verify_from_env() if verify is None else verify
                ).run(prepared)
    return prepared


def run_pipeline(module: Module, verify: bool | None = None, print_after: str | None = None,
                 stream: TextIO | None = None, stop_after: str | None = None) -> Module:
    """Optimize `module` in place with the default stages and return it.

    `verify=None` follows `ZYMO_VERIFY`; `print_after` is "all" or a pass name (see
    `PASSES`); `stop_after` is a stage name (see `STAGES`).
    """
    if print_after not in (None, "all", *PASSES):
        raise ValueError(f"print_after={print_after!r}: expected 'all' or one of "
                         f"{', '.join(PASSES)}")
    if stop_after not in (None, *STAGES):
        raise ValueError(f"stop_after={stop_after!r}: expected one of {', '.join(STAGES)}")
    manager = PassManager(default_stages(), verify=verify_from_env() if verify is None else verify,
                          print_after=print_after, stream=stream)
    manager.run(module, stop_after=stop_after)
    return module
