"""The Enzyme GPU suite (SC'21): XSBench, RSBench, LULESH, multi-step LBM and DG, ported to zymo.

Each application is one module exposing `CASE`, a `bench.enzyme.case.Case`; `python -m
bench.enzyme.run` gates and times them (see run.py)."""
