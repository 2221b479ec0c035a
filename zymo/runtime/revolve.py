"""Binomial checkpointing (Griewank and Walther's revolve, ACM TOMS 26(1), 2000): the order in
which to run, keep, put back and reverse the steps of a program of known length, holding at most
`snapshots` states at once (the initial one among them), so that as few steps as possible run
again.

Reversing `steps` steps with `snapshots` kept states runs some steps more than once. If no step
may run more than `t` times, `snapshots` states reverse at most beta(snapshots, t) =
C(snapshots + t, snapshots) steps; so the fewest runs of any step, `repetitions(steps, snapshots)`,
is the least such `t`, and the fewest steps run again in all is

    optimal_cost(steps, snapshots) = t * steps - beta(snapshots + 1, t - 1)

(counting the runs that advance the state, not the derivative of each step, which runs once).
`schedule` reaches it: it keeps the state at a split point of the steps left, reverses the steps
after it with one state fewer, then those before it with the same number; the split point is
the one where running one more step before it would cost more than it saves after it, found by
bisection on the slopes of `optimal_cost` (each a number of repetitions).

Pure logic: a `Tape` (runtime/tape.py) carries the actions out.
"""
from __future__ import annotations

from math import comb
from typing import NamedTuple


class Advance(NamedTuple):
    """Run steps `start` .. `stop - 1` from the state before `start`."""
    start: int
    stop: int


class Keep(NamedTuple):
    """Keep the current state, the one before `step`."""
    step: int


class Restore(NamedTuple):
    """Put back the state kept before `step`."""
    step: int


class Reverse(NamedTuple):
    """Run the derivative of `step` from the state before it (the current one)."""
    step: int


class Drop(NamedTuple):
    """The state kept before `step` is needed no more."""
    step: int


class _Part(NamedTuple):
    """Steps `start` .. `end - 1` still to reverse, the state before `start` current and kept,
    with `snapshots` states to hold (that one among them)."""
    start: int
    end: int
    snapshots: int


def beta(snapshots: int, repetitions: int) -> int:
    """The most steps `snapshots` states can reverse when no step runs more than `repetitions`
    times."""
    return comb(snapshots + repetitions, snapshots) if repetitions >= 0 else 0


def repetitions(steps: int, snapshots: int) -> int:
    """The fewest runs of the step run most often, over all schedules."""
    t = 0
    while beta(snapshots, t) < steps:
        t += 1
    return t


def optimal_cost(steps: int, snapshots: int) -> int:
    """The fewest steps run again (advances, all told) to reverse `steps` steps."""
    _check(steps, snapshots)
    if steps <= 1:
        return 0
    t = repetitions(steps, snapshots)
    return t * steps - beta(snapshots + 1, t - 1)


def schedule(steps: int, snapshots: int) -> list:
    """The actions reversing steps `steps - 1` down to 0 at `optimal_cost(steps, snapshots)`,
    holding at most `snapshots` states. The state before step 0 is kept from the start (by the
    caller), which is where the first action, `Restore(0)`, takes it from."""
    _check(steps, snapshots)
    if steps == 0:
        return []
    actions: list = [Restore(0)]
    todo: list = [_Part(0, steps, min(snapshots, steps))]
    while todo:
        item = todo.pop()
        if not isinstance(item, _Part):
            actions.append(item)
            continue
        start, end, snaps = item
        if end - start == 1:
            actions.append(Reverse(start))
        elif snaps == 1:      # nothing more to keep: run up to the last step from the start
            actions += [Advance(start, end - 1), Reverse(end - 1), Restore(start)]
            todo.append(_Part(start, end - 1, 1))
        else:
            mid = start + _split(end - start, snaps)
            actions += [Advance(start, mid), Keep(mid)]
            todo += [_Part(start, mid, snaps), Restore(start), Drop(mid),
                     _Part(mid, end, snaps - 1)]
    return actions


def _split(steps: int, snapshots: int) -> int:
    """How many steps to run before keeping the next state (1 .. steps - 1): the least `m`
    where one step more before the split costs at least what it saves after it. The cost
    m + optimal_cost(steps - m, snapshots - 1) + optimal_cost(m, snapshots) is convex in m
    (a sum of convex pieces), so that `m` minimizes it."""
    low, high = 1, steps - 1
    while low < high:
        m = (low + high) // 2
        if 1 + _slope(m + 1, snapshots) >= _slope(steps - m, snapshots - 1):
            high = m
        else:
            low = m + 1
    return low


def _slope(steps: int, snapshots: int) -> int:
    """optimal_cost(steps, snapshots) - optimal_cost(steps - 1, snapshots), for steps >= 2."""
    return repetitions(steps, snapshots)


def _check(steps: int, snapshots: int) -> None:
    if steps < 0 or snapshots < 1:
        raise ValueError(f"a schedule needs steps >= 0 and snapshots >= 1, not {steps} and "
                         f"{snapshots}")
