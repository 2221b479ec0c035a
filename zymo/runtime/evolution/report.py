"""The report of a run: what was found, how the search went, which edits matter, the IR diff
of the best variant with the source line of every edit, and plots when matplotlib is present."""
from __future__ import annotations

import difflib
import linecache
import math
from pathlib import Path

import numpy as np

from ...genome.ids import ops_by_id
from ...genome.mutate import REPAIR_TAG
from .guards import GUARDS
from .variant import base_ir


def _ms(seconds) -> str:
    return "invalid" if seconds is None or not math.isfinite(seconds) else f"{seconds * 1e3:.4f}"


def _ratio(original, variant) -> str:
    """`original / variant` as a speedup, "-" where either time is missing."""
    if not (original and variant and math.isfinite(original) and math.isfinite(variant)):
        return "-"
    return f"{original / variant:.2f}x"


# the outcome names of work other than fitness evaluations start with these (Evaluator._result)
OTHER_WORK = {"screen: ": "screens (more fresh inputs, and the interpreter's race check, for "
                          "variants that claim a speedup)",
              "race check: ": "race checks of the candidates after the search"}


def _outcome_table(outcomes: dict) -> list[str]:
    """Where the workers' time went: fitness evaluations by outcome, their total (the
    evaluations at the top), then the other work the workers did, and the sum of all."""
    total = sum(seconds for _, seconds in outcomes.values()) or 1.0

    def row(name, count, seconds, bold=False):
        cells = [name, str(count), f"{seconds:.1f}", f"{seconds / total:.0%}",
                 f"{seconds / max(count, 1):.3f}"]
        if bold:
            cells = [f"**{c}**" for c in cells]
        return "| " + " | ".join(cells) + " |"

    def part(prefix):
        return sorted(((name, count, seconds) for name, (count, seconds) in outcomes.items()
                       if (prefix and name.startswith(prefix)) or
                       (not prefix and not name.startswith(tuple(OTHER_WORK)))),
                      key=lambda item: -item[2])

    lines = ["## Evaluations by outcome", "",
             "Worker seconds per task, from the worker's own clock (a hang counts its time "
             "limit; replacing a worker is not counted: spares start ahead).", "",
             "| outcome | tasks | worker seconds | share | s per task |", "|---|---|---|---|---|"]
    evaluations = part("")
    lines += [row(*item) for item in evaluations]
    lines.append(row("fitness evaluations", sum(c for _, c, _ in evaluations),
                     sum(s for _, _, s in evaluations), bold=True))
    others = 0
    for prefix, what in OTHER_WORK.items():
        found = part(prefix)
        if found:
            others += 1
            lines += [row(*item) for item in found]
            lines.append(row(what, sum(c for _, c, _ in found), sum(s for _, _, s in found),
                             bold=True))
    if others:
        lines.append(row("all tasks", sum(c for c, _ in outcomes.values()),
                         sum(s for _, s in outcomes.values()), bold=True))
    return lines + [""]


def _guard_table(counts: dict) -> list[str]:
    """How many variants (edit lists) each validation guard rejected (`guards`)."""
    if not counts:
        return []
    lines = ["## Validation guards", "",
             "Variants (distinct edit lists) each guard rejected, in the search and the final "
             "checks.", "", "| guard | rejects a variant that | variants rejected |",
             "|---|---|---|"]
    lines += [f"| {guard} | {GUARDS[guard]} | {count} |" for guard, count in counts.items()]
    return lines + [""]


def describe(edit, ops) -> str:
    """`copy 14:13 before 17:9 (k.py:14: s[(t + j) % BLOCK] = 0.0)`."""
    names = " / ".join(edit.names())
    op = ops.get(edit.names()[0]) if edit.names() else None
    where = ""
    if op is not None and op.loc.line:
        source = linecache.getline(op.loc.file, op.loc.line).strip()
        where = f" ({Path(op.loc.file).name}:{op.loc.line}: `{source}`)"
    kind = f"{edit.kind} (race repair)" if edit.tag.startswith(REPAIR_TAG) else edit.kind
    return f"{kind} {names}{where}"


def report(result, path=None, analysis=None) -> str:
    args = list(result.inputs(np.random.default_rng(result.seed)))
    spec = result.best.specialization_for(args)
    base = base_ir(result.kernel, spec.params)
    ops = ops_by_id(base)
    history = result.history
    last = history[-1] if history else {}
    # every fitness evaluation of this session, the held-out checks after the search included
    # (the last generation's record predates them): the outcome table's first part sums to it
    evaluations = getattr(result.evaluator, "count", last.get("evaluations", 0))
    lines = [f"# zm.evolve: {result.kernel.__name__} on {result.backend}", ""]
    lines += ["| original ms | best ms | speedup (side by side) | edits | generations | "
              "evaluations | valid | eval/s |", "|---|---|---|---|---|---|---|---|",
              f"| {_ms(result.runtimes[0])} | {_ms(result.runtimes[1])} | "
              f"{result.speedup:.2f}x | {len(result.edits)} | {last.get('generation', 0)} | "
              f"{evaluations} | {last.get('valid_fraction', 0):.0%} | "
              f"{last.get('evals_per_second', 0):.1f} |", ""]
    if result.backend == "cpu":
        lines += ["CPU times are from an evaluation worker, which the default pool runs "
                  "single-threaded (ZYMO_CPU_THREADS=1) so that workers do not share cores; a "
                  "launch on every core may gain less (the original parallelizes too).", ""]
    if result.holdout_rejected:
        reasons: dict = {}
        for _, why in result.holdout_rejected:
            why = why if isinstance(why, str) else f"error {why:.3g}"
            reasons[why] = reasons.get(why, 0) + 1
        lines += [f"{len(result.holdout_rejected)} faster variant(s) failed the held-out input "
                  f"and were not reported: " + "; ".join(
                      f"{count} x {why}" for why, count in sorted(reasons.items(),
                                                                 key=lambda kv: -kv[1])), ""]
    if getattr(result, "not_faster", None):
        edits, speedup = result.not_faster
        lines += [f"The fastest variant that passed every check ({len(edits)} edits) was "
                  f"{speedup:.2f}x side by side, no faster than the original: the original is "
                  f"reported.", ""]
    retimed = getattr(result.evaluator, "retimed", [])
    if retimed:
        claims = [paired / claimed for claimed, paired in retimed if claimed > 0]
        lines += [f"{len(retimed)} would-be leader(s) were timed again beside the original "
                  f"before they could lead; their single evaluations had claimed a median "
                  f"{np.median(claims):.2f}x less time than the paired timing gave "
                  f"(worst {max(claims):.2f}x).", ""]
    outcomes = getattr(result.evaluator, "outcomes", {})
    if outcomes:
        lines += _outcome_table(outcomes)
    lines += _guard_table(getattr(result, "guards", {}))
    baseline = getattr(result.state, "baseline", math.inf)
    lines += ["## Search", "",
              f"Times as the search measured them: each evaluation on fresh inputs, beside the "
              f"other workers' (the original: {_ms(baseline)} ms, the fastest of its first "
              f"evaluations). The table at the top times the original and the best variant "
              f"side by side, in alternation on the same inputs: those are the times to quote.",
              "", "| generation | best ms | speedup | median ms | valid | elapsed s |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {h['generation']} | {_ms(h['best_runtime'])} | "
              f"{_ratio(h['baseline'], h['best_runtime'])} | {_ms(h['median_runtime'])} | "
              f"{h['valid_fraction']:.0%} | {h['elapsed']:.1f} |" for h in history]
    lines += ["", "## Edits of the best variant", ""]
    if analysis is not None:
        lines += [f"Minimized from {len(result.edits)} to {len(analysis.edits)} edits "
                  f"({_ms(analysis.runtime)} ms; original {_ms(analysis.baseline)} ms).", "",
                  "| edit | speedup alone | slowdown when removed | kind |", "|---|---|---|---|"]
        for effect in analysis.effects:
            alone = f"{effect.alone:.2f}x" if effect.alone else "invalid"
            removal = f"{effect.removal:.2f}x" if effect.removal else "invalid"
            kind = "independent" if effect.independent else "epistatic"
            lines.append(f"| {describe(effect.edit, ops)} | {alone} | {removal} | {kind} |")
        if analysis.best_subset is not None:
            lines += ["", f"Best subset of the epistatic edits with the independent ones: "
                          f"{len(analysis.best_subset)} edits, {_ms(analysis.subset_runtime)} ms."]
    else:
        lines += [f"- {describe(edit, ops)}" for edit in result.edits]
    diff = difflib.unified_diff(str(base).splitlines(), str(spec.optimized).splitlines(),
                                "original", "best", lineterm="", n=2)
    lines += ["", "## IR diff (after re-optimization)", "", "```diff", *diff, "```", ""]
    text = "\n".join(lines)
    if path is not None:
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.md").write_text(text + _plots(result, folder))
        result.best.save(folder / "best.edits.json")
    return text


def _plots(result, folder: Path) -> str:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "\nPlots need matplotlib (`pip install zymo[plot]`).\n"
    history = result.history
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([h["generation"] for h in history], [h["best_runtime"] * 1e3 for h in history],
            label="best")
    ax.plot([h["generation"] for h in history], [h["median_runtime"] * 1e3 for h in history],
            label="median")
    ax.axhline(result.state.baseline * 1e3, color="gray", linestyle="--", label="original")
    ax.set_xlabel("generation")
    ax.set_ylabel("runtime (ms)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(folder / "fitness.png", dpi=120)
    plt.close(fig)
    front = np.array([p for p in history[-1]["front"] if math.isfinite(p[0])]) if history \
        else np.zeros((0, 2))
    fig, ax = plt.subplots(figsize=(5, 3.5))
    if len(front):
        ax.scatter(front[:, 0] * 1e3, front[:, 1], s=12)
    ax.set_xlabel("runtime (ms)")
    ax.set_ylabel("error")
    ax.set_title("final population")
    fig.tight_layout()
    fig.savefig(folder / "pareto.png", dpi=120)
    plt.close(fig)
    return "\n![fitness](fitness.png)\n![population](pareto.png)\n"
