"""The garbage collector's pace while a search runs in this process.

The search's parent makes and drops whole IR modules (a mutation's trial copy, a proposal's
scratch copy, the replays it keeps by edit list): thousands of objects in reference cycles each.
At CPython's default pace (a young collection every 700 allocations) a copy still in use is
promoted to the oldest generation, and full collections, each traversing the whole heap with the
replays kept, then took 30 % of the parent's time (8 ms per evaluation on SW-V1). Collecting the
young generation every 50,000 allocations lets a copy die young; the older generations keep
their default ratios, so dropped replays are still reclaimed (a few hundred MB at most between
full collections)."""
from __future__ import annotations

import contextlib
import gc

YOUNG_ALLOCATIONS = 50_000


@contextlib.contextmanager
def search_pace():
    """The collector's pace for a search, the caller's restored after it (a pace the caller
    set higher is kept)."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], YOUNG_ALLOCATIONS), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
