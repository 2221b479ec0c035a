"""The binomial checkpointing schedule (runtime/revolve.py): its cost is the least over all
schedules (a brute-force search over every split says so), the closed form agrees, and carrying
its actions out reverses every step once, from the right state, within the snapshots."""
from __future__ import annotations

from functools import lru_cache

import pytest

from zymo.runtime.revolve import (Advance, Drop, Keep, Restore, Reverse, optimal_cost,
                                  repetitions, schedule)


@lru_cache(maxsize=None)
def fewest(steps: int, snapshots: int) -> int:
    """The least advances over every schedule of the recursive kind: run m steps, keep that
    state, reverse the rest with one state fewer, then the first m with as many."""
    if steps <= 1:
        return 0
    if snapshots == 1:
        return steps - 1 + fewest(steps - 1, 1)
    return min(m + fewest(steps - m, snapshots - 1) + fewest(m, snapshots)
               for m in range(1, steps))


def carry_out(steps: int, snapshots: int) -> tuple[int, int]:
    """Run the schedule on a model of the state: (advances, most states held at once). Fails
    when an action finds a state other than the one it needs."""
    kept = {0}                 # the state before step 0 is the caller's from the start
    current = None             # the step whose state the buffers hold; None: not known
    reversed_, advances, most = [], 0, 1
    for action in schedule(steps, snapshots):
        if isinstance(action, Restore):
            assert action.step in kept, action
            current = action.step
        elif isinstance(action, Advance):
            assert current == action.start and action.stop > action.start, action
            advances += action.stop - action.start
            current = action.stop
        elif isinstance(action, Keep):
            assert current == action.step and action.step not in kept, action
            kept.add(action.step)
            most = max(most, len(kept))
        elif isinstance(action, Drop):
            kept.remove(action.step)
        else:
            assert isinstance(action, Reverse) and current == action.step, action
            reversed_.append(action.step)
            current = None     # the derivative's forward sweep leaves the outputs unknown
    assert reversed_ == list(range(steps - 1, -1, -1))
    return advances, most


@pytest.mark.parametrize("snapshots", [1, 2, 3, 4, 5, 7])
def test_the_closed_form_is_the_least_cost(snapshots):
    for steps in range(0, 48):
        assert optimal_cost(steps, snapshots) == fewest(steps, snapshots), steps


@pytest.mark.parametrize("snapshots", [1, 2, 3, 4, 6, 40])
def test_the_schedule_reaches_the_least_cost_within_the_snapshots(snapshots):
    for steps in range(0, 60):
        advances, most = carry_out(steps, snapshots)
        assert advances == optimal_cost(steps, snapshots), steps
        assert most <= snapshots


def test_known_values():
    # one state: each reversal runs every step before it again, (n - 1) + ... + 1 in all
    assert optimal_cost(150, 1) == 149 * 150 // 2
    # as many states as steps: one sweep keeping each
    assert optimal_cost(150, 150) == optimal_cost(150, 1000) == 149
    # 10 states, 150 steps: C(12, 10) = 66 < 150 <= C(13, 10) = 286, so t = 3, and the
    # cost is 3 * 150 - C(11 + 2, 11)
    assert repetitions(150, 10) == 3
    assert optimal_cost(150, 10) == 3 * 150 - 78 == 372
    assert carry_out(1000, 12)[0] == optimal_cost(1000, 12)


def test_long_programs_need_no_deep_recursion():
    advances, most = carry_out(5000, 5000)
    assert (advances, most) == (4999, 5000)
    assert carry_out(3000, 1)[0] == 2999 * 3000 // 2


def test_bad_arguments():
    with pytest.raises(ValueError, match="snapshots >= 1"):
        schedule(4, 0)
