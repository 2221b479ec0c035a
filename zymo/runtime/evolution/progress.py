"""The search's progress: one line, updated in place on a terminal as evaluations come back,
plain lines (one per generation, and at most one every `INTERVAL` seconds between) elsewhere,
so that a log stays readable. The line gives the generation, the best speedup in the search's
own timings, the share of valid evaluations, evaluations per second and the time left."""
from __future__ import annotations

import math
import sys
import time

# seconds between plain lines between generations (not on a terminal), and between updates of
# the terminal's line
INTERVAL = 30.0
TTY_INTERVAL = 0.25


def duration(seconds: float) -> str:
    """`45s`, `3m05s`, `2h07m`."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def line(generation: int, generations: int, speedup: float | None, valid: float,
         per_second: float, eta: float | None) -> str:
    """The progress line (the search's timings: a ratio to the original's, not a time to
    quote)."""
    best = f"{speedup:.2f}x" if speedup is not None and math.isfinite(speedup) else "no"
    left = f", ETA {duration(eta)}" if eta is not None and math.isfinite(eta) else ""
    return (f"generation {generation}/{generations}: best {best} the original in the search's "
            f"timings, {valid:.0%} valid, {per_second:.1f} eval/s{left}")


def eta(spent: float, done: float, total: float, budget: float | None,
        budget_spent: float) -> float | None:
    """Seconds left: at this session's rate to `total` units of work (`done` so far in
    `spent` seconds), or to the time budget, whichever comes first."""
    ends = []
    if budget:
        ends.append(max(0.0, budget - budget_spent))
    if done > 0 and total > done:
        ends.append(spent / done * (total - done))
    elif total <= done:
        ends.append(0.0)
    return min(ends) if ends else None


class Progress:
    """Called as `say(entry, generations, budget)` by the search (an entry of the history,
    or a message); `tick(fitness)` for every evaluation back."""

    def __init__(self, stream, generations: int, budget: float | None, population: int):
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.generations, self.budget, self.population = generations, budget, population
        self.state = self.evaluator = None
        self.first = 0
        self.started = time.perf_counter()
        self.shown = time.perf_counter()   # when the last line was written
        self.open = False          # a terminal line waits to be overwritten

    def attach(self, state, evaluator, started: float) -> None:
        self.state, self.evaluator, self.started = state, evaluator, started
        self.first = state.generation      # a resumed run's rate counts from here
        evaluator.on_result = self.tick

    def __call__(self, entry, generations=None, budget=None) -> None:
        if isinstance(entry, str):
            self._write(entry, final=True)
            return
        spent = entry.get("session_elapsed", entry["elapsed"])
        best, original = entry["best_runtime"], entry["baseline"]
        speedup = original / best if math.isfinite(best) and best > 0 else None
        left = eta(spent, entry["generation"] - self.first, self.generations - self.first,
                   self.budget, spent)
        self._write(line(entry["generation"], self.generations, speedup,
                         entry["valid_fraction"], entry["evals_per_second"], left),
                    final=not self.tty)

    def tick(self, fitness) -> None:
        """Between generations: the line as it stands (throttled)."""
        now = time.perf_counter()
        if self.state is None or now - self.shown < (TTY_INTERVAL if self.tty else INTERVAL):
            return
        state, evaluator = self.state, self.evaluator
        spent = now - self.started
        runtimes = [p.fitness.runtime for p in state.population
                    if p.fitness is not None and p.fitness.valid]
        best = min(runtimes, default=math.inf)
        speedup = state.baseline / best if math.isfinite(best) and best > 0 else None
        count = evaluator.count
        valid = state.valid / state.evaluated if state.evaluated else 1.0
        first = self.first
        done = state.generation - first + (state.evaluated % self.population) / self.population
        left = eta(spent, done, self.generations - first, self.budget, spent)
        self._write(line(state.generation, self.generations, speedup, valid,
                         count / max(spent, 1e-9), left), final=not self.tty)

    def close(self) -> None:
        if self.open:
            self.stream.write("\n")
            self.stream.flush()
            self.open = False

    def _write(self, text: str, final: bool) -> None:
        self.shown = time.perf_counter()
        if self.tty:
            self.stream.write(f"\r\x1b[K{text}" + ("\n" if final else ""))
            self.open = not final
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def printer(progress, generations: int, budget: float | None, population: int):
    """The search's `say`: a `Progress` on `progress` (True: stderr; a stream), or silence."""
    if not progress:
        return _Silent()
    stream = progress if hasattr(progress, "write") else sys.stderr
    return Progress(stream, generations, budget, population)


class _Silent:
    def __call__(self, *args) -> None:
        pass

    def attach(self, *args) -> None:
        pass

    def close(self) -> None:
        pass
