"""A program's launch record as JSON, for regression files: the arrays, scalars and launch
shape that `run.check_kernel` needs, without the statements (the file holds the kernel)."""
from __future__ import annotations

import json
from dataclasses import asdict

from .grammar import ArraySpec, Program


def program_to_json(program: Program) -> str:
    params = program.params()
    bases = {spec.base for spec in program.arrays if spec.name in params}
    used = [spec for spec in program.arrays if spec.name in params or spec.name in bases]
    record = {"seed": program.seed, "blocks": program.blocks, "threads": program.threads,
              "width": program.width, "depth": program.depth,
              "arrays": [asdict(spec) for spec in used],
              "scalars": program.scalars, "params": params, "grad": program.grad,
              "transcendental": program.transcendental or bool(program.funcs)}
    return json.dumps(record, separators=(",", ":"))


def program_from_json(text: str) -> Program:
    record = json.loads(text)
    program = Program(record["seed"], record["blocks"], record["threads"], [], [],
                      [ArraySpec(**spec) for spec in record["arrays"]],
                      [tuple(s) for s in record["scalars"]], grad=record["grad"],
                      transcendental=record["transcendental"], width=record.get("width", 0),
                      depth=record.get("depth", 1))
    program.fixed_params = record["params"]
    return program
