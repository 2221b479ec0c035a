"""Optimization passes over the IR (inline, fold, CSE, DCE, LICM) and the pass manager."""
from .manager import PassManager, Stage
from .pipeline import PASSES, STAGES, default_stages, prepare_for_codegen, run_pipeline

__all__ = ["PASSES", "STAGES", "PassManager", "Stage", "default_stages", "prepare_for_codegen",
           "run_pipeline"]
