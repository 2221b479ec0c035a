"""Fuzzer tests: the GPU batch is marked `gpu` and skipped without a GPU, as in tests/gpu."""
from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    from zymo.fuzz.run import gpu_available
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="no GPU (cuda-bindings, driver or device missing)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
