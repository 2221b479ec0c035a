"""The pass manager: runs named stages of passes, verifying, printing and timing each pass."""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Protocol, TextIO

from ..ir.module import Module
from ..ir.printer import print_module
from ..ir.verifier import check


class Pass(Protocol):
    """A pass: `name`, and `run(module) -> bool` saying whether it changed the module."""

    name: str

    def run(self, module: Module) -> bool: ...


@dataclass
class Stage:
    """Passes run in order; with `fixpoint`, the list repeats until no pass changes the
    module or `max_rounds` rounds have run. Each pass comes with why it is there."""

    name: str
    passes: list[tuple[Pass, str]]
    fixpoint: bool = False
    max_rounds: int = 1


@dataclass
class Timing:
    stage: str
    round: int
    pass_name: str
    seconds: float
    changed: bool


def verify_from_env() -> bool:
    """`ZYMO_VERIFY=1` (or the style guide's `ZYMO_CHECKS=1`) verifies after every pass."""
    return os.environ.get("ZYMO_VERIFY") == "1" or os.environ.get("ZYMO_CHECKS") == "1"


@dataclass
class PassManager:
    """Runs `stages` on a module. With `verify`, the module is checked before the first pass
    and after every pass (a `VerifyError` names the pass). `print_after` ("all" or a pass
    name) writes the IR after the matching passes to `stream`. Every run is timed."""

    stages: list[Stage]
    verify: bool = False
    print_after: str | None = None
    stream: TextIO | None = None
    timings: list[Timing] = field(default_factory=list)
    unconverged: list[str] = field(default_factory=list)  # fixpoint stages that hit the cap

    def run(self, module: Module, stop_after: str | None = None) -> bool:
        """Run the stages (up to and including `stop_after`); whether any pass changed the IR."""
        if self.verify:
            check(module, "the stage before the passes (their input)")
        changed = False
        for stage in self.stages:
            changed |= self._run_stage(stage, module)
            if stage.name == stop_after:
                break
        return changed

    def _run_stage(self, stage: Stage, module: Module) -> bool:
        changed = False
        for round in range(stage.max_rounds if stage.fixpoint else 1):
            round_changed = False
            for pass_, _why in stage.passes:
                round_changed |= self._run_pass(pass_, stage, round, module)
            changed |= round_changed
            if not round_changed:
                return changed
        if stage.fixpoint:
            self.unconverged.append(stage.name)
        return changed

    def _run_pass(self, pass_: Pass, stage: Stage, round: int, module: Module) -> bool:
        start = time.perf_counter()
        changed = pass_.run(module)
        self.timings.append(Timing(stage.name, round, pass_.name,
                                   time.perf_counter() - start, changed))
        where = f"{pass_.name} (stage {stage.name}, round {round + 1})"
        if self.verify:
            check(module, where)
        if self.print_after in ("all", pass_.name):
            stream = self.stream if self.stream is not None else sys.stderr
            stream.write(f"// ----- IR after {where} -----\n{print_module(module)}\n")
        return changed

    def report(self) -> str:
        """A table of the time spent in each pass, summed over rounds."""
        totals: dict[tuple[str, str], tuple[int, int, float]] = {}
        for t in self.timings:
            runs, changes, seconds = totals.get((t.stage, t.pass_name), (0, 0, 0.0))
            totals[t.stage, t.pass_name] = (runs + 1, changes + t.changed, seconds + t.seconds)
        lines = [f"{'stage':<10} {'pass':<8} {'runs':>4} {'changed':>7} {'ms':>9}"]
        for (stage, name), (runs, changes, seconds) in totals.items():
            lines.append(f"{stage:<10} {name:<8} {runs:>4} {changes:>7} {seconds * 1e3:>9.3f}")
        return "\n".join(lines)
