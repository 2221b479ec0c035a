"""The state of a search, which a checkpoint holds: the population of individuals (edit lists
and their fitness), the RNGs' states, the history, the fitness cache and the queued repairs. A
run given an existing checkpoint resumes from it; a crash mid-write leaves the previous one."""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ...genome import dumps, loads
from ...genome.edits import Edit
from .validation import Fitness

INVALID = (math.inf, math.inf)
# the attributes of a State that a checkpoint holds as they are
_SAVED_AS_IS = ("generation", "tags", "baseline", "evaluated", "valid", "history")


class Individual:
    """An edit list and its fitness. Its key (the edit list's JSON, which the fitness cache
    and the batches go by) is written once per edit list: the search asks for it several
    times per child, and writing it was a quarter of the search's own time."""

    __slots__ = ("_edits", "_key", "fitness")

    def __init__(self, edits: tuple[Edit, ...], fitness: Fitness | None = None,
                 key: str | None = None):
        self._edits, self._key, self.fitness = tuple(edits), key, fitness

    @property
    def edits(self) -> tuple[Edit, ...]:
        return self._edits

    @edits.setter
    def edits(self, edits) -> None:
        self._edits, self._key = tuple(edits), None

    @property
    def key(self) -> str:
        if self._key is None:
            self._key = dumps(self._edits)
        return self._key

    @property
    def objectives(self) -> tuple[float, float]:
        f = self.fitness
        return f.objectives() if f is not None and f.valid else INVALID


class State:
    """Everything a run needs to resume: population, RNG states, history, fitness cache."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.generation = 0
        self.population: list[Individual] = []
        self.history: list[dict] = []
        self.baseline = math.inf
        self.tags = 0
        self.evaluated = 0
        self.valid = 0
        self.cache: dict[str, Fitness] = {}
        self.screened: set[str] = set()
        self.repairs: list[tuple[Edit, ...]] = []   # edit lists the next generation evaluates
        self.evaluator_rng = None
        self.elapsed_before = 0.0
        self.rejected: dict[str, set] = {}        # guard -> edit lists (see `guards`)

    def tag(self, prefix: str = "e") -> str:
        self.tags += 1
        return f"{prefix}{self.tags}"

    def record(self, generation: int, evaluator, started: float) -> None:
        runtimes = [p.fitness.runtime for p in self.population if p.fitness and p.fitness.valid]
        session = time.perf_counter() - started   # a resumed run's budget counts from here
        elapsed = self.elapsed_before + session
        self.history.append({
            "generation": generation, "best_runtime": min(runtimes, default=math.inf),
            "median_runtime": float(np.median(runtimes)) if runtimes else math.inf,
            "baseline": self.baseline, "evaluations": evaluator.count,
            "valid_fraction": self.valid / self.evaluated if self.evaluated else 1.0,
            "elapsed": elapsed, "session_elapsed": session,
            "evals_per_second": evaluator.count / max(session, 1e-9),
            "best_edits": min(self.population, key=lambda p: p.objectives).key,
            # this process's CPU seconds (all threads) so far: the search's own cost
            "parent_cpu": time.process_time(),
            "front": [list(p.objectives) for p in self.population],
        })

    def save(self, path, kernel, evaluator) -> None:
        if not path:
            return
        data = {name: getattr(self, name) for name in _SAVED_AS_IS}
        data |= {
            "kernel": kernel.__name__, "rng": self.rng.bit_generator.state,
            "evaluator_rng": evaluator.rng.bit_generator.state,
            "elapsed": self.history[-1]["elapsed"] if self.history else 0.0,
            "population": [{"edits": json.loads(p.key), "fitness": _saved(p.fitness)}
                           for p in self.population],
            "cache": {k: _saved(f) for k, f in evaluator.cache.items()},
            "screened": sorted(evaluator.screened),
            "repairs": [json.loads(dumps(edits)) for edits in self.repairs],
            "rejected": {g: sorted(keys) for g, keys in getattr(evaluator, "rejected",
                                                                {}).items()},
        }
        tmp = Path(f"{path}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)   # a crash mid-write leaves the previous checkpoint

    @classmethod
    def load(cls, path, kernel) -> "State":
        try:
            return cls._read(path, kernel)
        except (ValueError, KeyError, TypeError) as error:
            if isinstance(error, ValueError) and "is a checkpoint of" in str(error):
                raise
            raise ValueError(f"{path} is not a zm.evolve checkpoint ({type(error).__name__}: "
                             f"{error}): name another file, or delete it to start "
                             f"afresh") from error

    @classmethod
    def _read(cls, path, kernel) -> "State":
        data = json.loads(Path(path).read_text())
        if data["kernel"] != kernel.__name__:
            raise ValueError(f"{path} is a checkpoint of {data['kernel']}, not of "
                             f"{kernel.__name__}")
        rng = np.random.default_rng()
        rng.bit_generator.state = data["rng"]
        state = cls(rng)
        for name in _SAVED_AS_IS:
            setattr(state, name, data[name])
        state.elapsed_before = data["elapsed"]
        state.population = [Individual(tuple(loads(json.dumps(p["edits"]))),
                                       _fitness(p["fitness"])) for p in data["population"]]
        state.cache = {k: _fitness(f) for k, f in data["cache"].items()}
        state.screened = set(data.get("screened", ()))
        state.repairs = [tuple(loads(json.dumps(e))) for e in data.get("repairs", ())]
        state.evaluator_rng = data["evaluator_rng"]
        state.rejected = {g: set(keys) for g, keys in data.get("rejected", {}).items()}
        return state


def _saved(fitness: Fitness) -> dict:
    saved = asdict(fitness)
    del saved["spent"]      # how the worker spent its time: the run's, not the search's state
    return saved


def _fitness(saved: dict) -> Fitness:
    return Fitness(**{**saved, "race": tuple(saved.get("race", ())),
                      "paired": tuple(saved.get("paired", ()))})
