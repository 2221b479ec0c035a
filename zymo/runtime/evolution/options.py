"""The options of `zm.evolve`, in three groups: how the search breeds and records itself
(`SearchOptions`), what a variant must pass (`ValidationOptions`) and where and how evaluations
run (`ExecutionOptions`). `zm.evolve` takes each group whole (`search=SearchOptions(...)`) or
any field as a keyword (`population=64`), which overrides the group's value."""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, fields, replace

from ...ops.mutations import EDIT_KINDS


MODES = ("generational", "steady")


def _wrong(name: str, wanted: str, value) -> ValueError:
    return ValueError(f"zm.evolve: {name} must be {wanted}, not {value!r}")


@dataclass(frozen=True)
class SearchOptions:
    """GEVO's search (see design.md, Evolution). `profile` guides which ops mutations edit
    (hot ones, see `zymo.genome.mutate`): an inputs function (or (inputs, launch)) of small
    inputs the interpreter profiles the original on; True profiles on the race-check inputs
    when given, else on `inputs` for at most PROFILE_OPS thread-ops; False picks uniformly,
    as GEVO does. `progress`: True prints a line per generation to stderr, a stream prints
    them there (a live line on a terminal, see `progress`)."""
    population: int = 256
    generations: int = 100
    time_budget: float | None = None   # seconds: stop after the generation that exceeds it
    seed: int = 0
    kinds: tuple = EDIT_KINDS          # the edit kinds mutations may make
    crossover_rate: float = 0.7
    mutation_rate: float = 0.3
    initial_edits: int = 3             # the edits of each individual of the first population
    profile: object = True
    checkpoint: str | os.PathLike | None = None   # written per generation; resumed if it exists
    progress: object = True
    # "generational" (GEVO's: each generation waits for its last evaluation) or "steady"
    # (each finished evaluation enters the population and a new child is submitted at once;
    # see `steady`, which also says what a seed fixes there)
    mode: str = "generational"

    def __post_init__(self):
        """The caller's mistakes, named before any work starts."""
        if not isinstance(self.population, int) or self.population < 2:
            raise _wrong("population", "an int of at least 2", self.population)
        if not isinstance(self.generations, int) or self.generations < 0:
            raise _wrong("generations", "an int >= 0", self.generations)
        if isinstance(self.kinds, str) or not len(self.kinds):
            raise _wrong("kinds", "a non-empty list of edit kinds, e.g. ('delete', 'copy')",
                         self.kinds)
        if self.time_budget is not None and not self.time_budget >= 0:
            raise _wrong("time_budget", "seconds >= 0", self.time_budget)
        if self.mode not in MODES:
            raise _wrong("mode", f"one of {', '.join(map(repr, MODES))}", self.mode)


@dataclass(frozen=True)
class ValidationOptions:
    """What a variant must pass. `check(expected_args, got_args) -> error` (default: the max
    relative error over float arrays, exact equality of the others), valid within `tolerance`;
    `holdout`: an inputs function (or (inputs, launch)) for the final, larger validation (the
    default draws fresh inputs from `inputs`); `race_check`: an inputs function of small
    inputs on which the reported variant must run on the reference interpreter, free of data
    races (which a GPU run can miss however often it passes); large enough for two blocks,
    or a race an edit confines to later blocks goes unseen (evolve warns). `sizes`: held-out
    input sizes; with them `inputs` takes a second parameter, `inputs(rng, size)` (the search
    calls `inputs(rng)`, so `size` needs a default: the search's size), and `launch` is a
    function of the arguments; a variant that claims a speedup is checked at every one of
    them before it enters the population, and the reported one again at the end (see
    `guards`)."""
    check: object = None
    tolerance: float = 0.0
    holdout: object = None
    race_check: object = None
    sizes: tuple = ()

    def __post_init__(self):
        if not (isinstance(self.tolerance, (int, float)) and self.tolerance >= 0):
            raise _wrong("tolerance", "a number >= 0", self.tolerance)
        if isinstance(self.sizes, (str, bytes)) or not all(
                isinstance(s, (int, tuple)) and not isinstance(s, bool) for s in self.sizes):
            raise _wrong("sizes", "a list of held-out sizes, e.g. (1000, 4097)", self.sizes)


@dataclass(frozen=True)
class ExecutionOptions:
    """Where evaluations run: `executor` (any `concurrent.futures.Executor`; default: isolated
    worker processes, `workers` of them per GPU or one per core), on `backend` (default: the
    kernel's, else the GPU when there is one). `timeout` limits one evaluation (default: 10
    times the original's evaluation on the CPU, at least 2 s; 20 times and at least 10 s on a
    GPU, where a worker's own kernel time limit catches hangs sooner); each timing is the
    median of `repeats` launches."""
    executor: object = None
    backend: str | None = None
    workers: int | None = None
    timeout: float | None = None
    repeats: int = 5


GROUPS = {"search": SearchOptions, "validation": ValidationOptions,
          "execution": ExecutionOptions}


def gather(groups: dict, keywords: dict) -> tuple:
    """(search, validation, execution): the groups given by name in `groups` (or the
    defaults), each with the `keywords` that name one of its fields set."""
    owner = {field.name: name for name, group in GROUPS.items() for field in fields(group)}
    for keyword in keywords:
        if keyword not in owner:
            close = difflib.get_close_matches(keyword, owner, 1)
            raise TypeError(f"zm.evolve() got an unexpected keyword argument {keyword!r}"
                            + (f"; did you mean {close[0]!r}?" if close else ""))
    made = []
    for name, group in GROUPS.items():
        given = groups.get(name) or group()
        if not isinstance(given, group):
            raise TypeError(f"zm.evolve: {name}= takes a {group.__name__}, not {given!r}")
        made.append(replace(given, **{k: v for k, v in keywords.items() if owner[k] == name}))
    return tuple(made)
