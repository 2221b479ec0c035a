"""A differential fuzzer for zymo: random race-free kernels run on every backend and
differentiated, each result checked against the interpreter and against finite differences.

`generate` builds programs (a small statement grammar), `run` executes and compares them in
worker processes, `shrink` reduces a failing program and writes it as a regression test, and
`python -m zymo.fuzz` runs a batch and reports. zymo's promise is that what it cannot do right
is an error, never a wrong number; any other outcome on a program valid by construction is a
finding.
"""
from __future__ import annotations

from .generate import Program, generate
from .run import Finding, check_kernel, run_batch

__all__ = ["Program", "generate", "Finding", "check_kernel", "run_batch"]
