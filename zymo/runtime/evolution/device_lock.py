"""One GPU's exclusive use, shared by the worker processes that evaluate variants on it.

Workers compile variants in parallel but take the GPU one at a time for everything that runs
on it (the original, the variant, the timed launches), so a timing never shares the device with
another worker's kernel. A worker that dies holding the lock (killed for a hang, crashed, or
poisoned by a GPU fault and replaced) cannot release it; the parent, which kills it, releases it
for it (`release_for`), and a waiter that finds the holder gone takes the lock over.
"""
from __future__ import annotations

import multiprocessing
import os
import time


class DeviceLock:
    """Made in the parent; handed to workers only when they are spawned (in `warmup`)."""

    def __init__(self, context=None):
        context = context or multiprocessing.get_context("spawn")
        self._lock = context.Lock()
        self._holder = context.RawValue("q", 0)   # pid of the holder, 0 when free
        # how long the GPU was held in all (killed holders' time included, up to the release
        # for them) and how often it was taken: the lock's own account, beside the workers'
        self._since = context.RawValue("d", 0.0)
        self._held = context.RawValue("d", 0.0)
        self._taken = context.RawValue("q", 0)

    def acquire(self, poll: float = 1.0) -> None:
        suspect = False
        while not self._lock.acquire(timeout=poll):
            holder = self._holder.value
            # holder 0 for a whole poll interval twice: taken by a process killed before it
            # could write its pid
            if (holder and not _alive(holder)) or (holder == 0 and suspect):
                break       # take over the held lock
            suspect = holder == 0
        self._holder.value = os.getpid()
        self._since.value = time.monotonic()
        self._taken.value += 1

    def release(self) -> None:
        if self._holder.value:
            self._held.value += time.monotonic() - self._since.value
        self._holder.value = 0
        try:
            self._lock.release()
        except ValueError:    # released already (two waiters took over a dead holder's lock)
            pass

    def account(self) -> tuple[float, int]:
        """(seconds held, times taken) since the lock was made."""
        return self._held.value, self._taken.value

    def release_for(self, pid: int) -> bool:
        """Release the lock if `pid` (a process just killed) holds it."""
        if pid and self._holder.value == pid:
            self.release()
            return True
        return False

    def __enter__(self) -> "DeviceLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
