"""A fuzzing batch: generate, run, shrink the findings, and report them in Markdown."""
from __future__ import annotations

import collections

from .generate import generate
from .run import Outcome, run_batch
from .shrink import shrink, write_regression


class Batch:
    def __init__(self, backends, grad: bool = False, avoid_known: bool = False):
        self.backends, self.grad = tuple(backends), grad
        self.avoid_known = avoid_known
        self.programs: dict = {}
        self.outcomes: list[Outcome] = []
        self.features = collections.Counter()

    def run(self, seeds, timeout: float, time_budget: float | None = None, progress=None):
        programs = (self._program(seed) for seed in seeds)

        def record(program, outcome):
            self.outcomes.append(outcome)
            if progress is not None:
                marks = ",".join(f.kind for f in outcome.findings) or outcome.status
                progress.write(f"seed {program.seed}: {marks} ({outcome.seconds:.1f} s)\n")
        run_batch(programs, self.backends, self.grad, timeout, time_budget, record)

    def _program(self, seed: int):
        program = generate(seed, grad=self.grad, avoid_known=self.avoid_known)
        self.programs[seed] = program
        self.features.update(program.features())
        return program

    def findings(self) -> list:
        return [f for outcome in self.outcomes for f in outcome.findings]

    def shrink_findings(self, budget: float, directory: str | None) -> None:
        """Shrink the first finding of each (kind, backend) per program."""
        for outcome in self.outcomes:
            seen = set()
            for finding in outcome.findings:
                if finding.signature() in seen:
                    continue
                seen.add(finding.signature())
                small = shrink(self.programs[finding.seed], finding, self.backends, budget)
                finding.shrunk = small.kernel_source()
                if directory:
                    finding.regression = write_regression(small, finding, directory,
                                                          self.backends)

    def report(self, seconds: float) -> str:
        # a program with a finding is not "ok", whatever its status
        statuses = collections.Counter("with findings" if o.findings else o.status
                                       for o in self.outcomes)
        findings = self.findings()
        kinds = collections.Counter(f.kind for f in findings)
        lines = ["# zymo fuzz report", "",
                 f"{len(self.outcomes)} programs on {', '.join(self.backends)}"
                 f"{' with derivatives (zm.grad, zm.jvp width 1 and 3)' if self.grad else ''}"
                 f" in {seconds:.0f} s: " + ", ".join(f"{n} {s}" for s, n in statuses.items()),
                 "", "## Programs per feature", "", "| feature | programs |", "|---|---|"]
        run_seeds = {o.seed for o in self.outcomes}
        counts = collections.Counter()
        for seed in run_seeds:
            counts.update(self.programs[seed].features())
        lines += [f"| {feature} | {n} |" for feature, n in sorted(counts.items())]
        lines += ["", "## Findings by class", ""]
        if not findings:
            lines.append("none")
        lines += [f"- {kind}: {n}" for kind, n in sorted(kinds.items())]
        rejected = [o for o in self.outcomes if o.status == "rejected"]
        if rejected:
            lines += ["", "## Rejected programs (a fuzzer bug: the language lacks something "
                      "the generator wrote)", ""]
            lines += [f"- seed {o.seed}: {o.note.splitlines()[0][:300]}" for o in rejected]
        refused = [o for o in self.outcomes if o.status == "grad-unsupported"]
        if refused:
            lines += ["", "## Derivatives zymo refused (a clean error: gaps, not bugs)", ""]
            lines += [f"- seed {o.seed}: {_first_error(o.note)}" for o in refused]
        for finding in findings:
            lines += ["", f"### {finding.kind} on {finding.backend}, seed {finding.seed}", "",
                      "```", finding.message[:1500], "```"]
            if finding.regression:
                lines.append(f"regression: `{finding.regression}`")
            source = finding.shrunk or finding.source
            lines += ["", "```python", source.rstrip(), "```"]
        return "\n".join(lines) + "\n"


def _first_error(note: str) -> str:
    """The first diagnostic of a compile error's text (it may open with "2 errors")."""
    lines = note.splitlines() or [""]
    return next((line for line in lines if "error:" in line), lines[0])[:300]
