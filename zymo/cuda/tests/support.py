"""Helpers numba's CUDA tests import from `numba.cuda.tests.support`."""
from __future__ import annotations

import contextlib
import io
import sys


@contextlib.contextmanager
def captured_output(stream_name: str):
    """Within it, `sys.<stream_name>` is a StringIO (yielded)."""
    saved = getattr(sys, stream_name)
    captured = io.StringIO()
    setattr(sys, stream_name, captured)
    try:
        yield captured
    finally:
        setattr(sys, stream_name, saved)


def captured_stdout():
    return captured_output("stdout")


def captured_stderr():
    return captured_output("stderr")
