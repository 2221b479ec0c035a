"""The fuzzer's worker process: `python -m zymo.fuzz.worker BACKENDS (grad|primal)` runs the
programs its parent sends and answers with their outcomes (see `run.Worker`)."""
from __future__ import annotations

import sys

from .run import serve

if __name__ == "__main__":
    serve(tuple(sys.argv[1].split(",")), sys.argv[2] == "grad")
