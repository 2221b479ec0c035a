"""Environment switches (ZYMO_DEBUG=1, ZYMO_AD_TILE_REFILL=0, ...), read alike by every stage."""
from __future__ import annotations

import os

OFF = ("0", "false", "no", "off")


def switch(name: str, default: bool) -> bool:
    """Whether the switch `name` is on: `default` when unset or empty, off for "0", "false",
    "no" or "off" (any case), on for anything else."""
    value = os.environ.get(name, "").strip().lower()
    return default if not value else value not in OFF
