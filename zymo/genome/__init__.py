"""The genome of evolution (GEVO on zymo's IR): edits that name ops by stable ids and carry
their repairs, their deterministic replay, random mutation, crossover and NSGA-II selection.
Evaluating variants (compile, launch, validate, time) joins the stages: `zymo.runtime.evolution`.
"""
from .edits import Copy, Delete, Edit, Move, Operand, Replace, Swap, dumps, loads, replay  # noqa: F401
from .ids import canonicalize_ids  # noqa: F401
from .mutate import Mutator  # noqa: F401
from .select import (crossover, crowding_distance, nondominated_fronts, nsga2_select,  # noqa: F401
                     tournament)
