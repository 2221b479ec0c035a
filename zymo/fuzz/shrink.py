"""Reduce a failing program while it still fails the same way, and write it as a regression.

Candidates, tried greedily and repeated until none applies: a smaller launch (one block, 32
threads), deleting a statement (whole blocks first, then one at a time), replacing a compound
statement by one of its bodies, dropping device functions and declarations, and replacing an
expression by a literal or by one of its operands of the same type. "The same way" is the
finding's kind and backend (`Finding.signature`). Every variable is declared at the top, so a
deletion never leaves a use undefined; a candidate that no longer compiles fails differently
and is simply not taken.
"""
from __future__ import annotations

import os
import re
import time

from .grammar import FLOATS, Expr, Program, lit
from .run import Finding, Worker


def _blocks(program: Program):
    """Every statement list of the program (the body and each statement's sub-blocks)."""
    stack = [program.body]
    while stack:
        block = stack.pop()
        yield block
        for stmt in block:
            stack.extend(stmt.blocks())


def _expr_slots(program: Program):
    """(holder, key) for every expression slot in every statement, outermost first."""
    for block in list(_blocks(program)):
        for stmt in block:
            for holder, key in stmt.exprs():
                yield from _walk_slot(holder, key)


def _walk_slot(holder, key):
    yield holder, key
    node = holder[key] if isinstance(holder, list) else getattr(holder, key)
    for k in range(len(node.args)):
        yield from _walk_slot(node.args, k)


def _get(holder, key) -> Expr:
    return holder[key] if isinstance(holder, list) else getattr(holder, key)


def _set(holder, key, value: Expr) -> None:
    if isinstance(holder, list):
        holder[key] = value
    else:
        setattr(holder, key, value)


def candidates(program: Program):
    """Smaller variants of `program`, most reducing first (each a fresh copy)."""
    if program.blocks > 1:
        smaller = program.copy()
        smaller.blocks = 1
        yield smaller
    if program.threads > 32 and not program.width:     # a 2-D block's tiles fix its shape
        smaller = program.copy()
        smaller.threads = 32
        yield smaller
    count = sum(1 for _ in _blocks(program))
    for which in range(count):           # empty a whole block, then single statements
        variant = program.copy()
        block = list(_blocks(variant))[which]
        if len(block) > 1:
            block.clear()
            yield variant
    for which in range(count):
        length = len(list(_blocks(program))[which])
        for index in reversed(range(length)):
            variant = program.copy()
            del list(_blocks(variant))[which][index]
            yield variant
            variant = program.copy()
            block = list(_blocks(variant))[which]
            for replacement in block[index].unwrap():
                other = program.copy()
                target = list(_blocks(other))[which]
                target[index:index + 1] = [s for s in _copy_list(replacement, other, which,
                                                                  index)]
                yield other
    for index in reversed(range(len(program.funcs))):
        variant = program.copy()
        del variant.funcs[index]
        yield variant
    for field in ("decls", "locals_", "shared"):      # unused ones (else: no longer compiles)
        for index in reversed(range(len(getattr(program, field)))):
            variant = program.copy()
            del getattr(variant, field)[index]
            yield variant
    for index in reversed(range(len(program.decls))):
        name, ty, init = program.decls[index]
        if init.args or init.template != lit(0, ty).template:
            variant = program.copy()
            variant.decls[index] = (name, ty, lit(0 if ty not in FLOATS else 1.0, ty))
            yield variant
    slots = sum(1 for _ in _expr_slots(program))
    for which in range(slots):
        node = _get(*list(_expr_slots(program))[which])
        replacements = [child for child in node.args if child.ty == node.ty]
        simple = lit(1 if node.ty != "bool" else True, node.ty)
        if node.args or node.template != simple.template:
            replacements.insert(0, simple)
        for replacement in replacements:
            variant = program.copy()
            holder, key = list(_expr_slots(variant))[which]
            _set(holder, key, replacement)
            yield variant


def _copy_list(replacement, variant: Program, which: int, index: int) -> list:
    """The unwrapped statements, taken from the copy (so the copy does not share them)."""
    import copy
    return copy.deepcopy(replacement)


def shrink(program: Program, finding: Finding, backends, time_budget: float = 120.0,
           timeout: float = 60.0) -> Program:
    """The smallest variant found within `time_budget` seconds that fails like `finding`."""
    worker = Worker(backends, finding.grad)
    wanted = finding.signature()
    deadline = time.perf_counter() + time_budget
    try:
        improved = True
        while improved and time.perf_counter() < deadline:
            improved = False
            for variant in candidates(program):
                if time.perf_counter() > deadline:
                    break
                if variant.module_source() == program.module_source():
                    continue
                outcome = worker.run(variant, timeout if finding.kind != "hang" else 20.0)
                if any(f.signature() == wanted for f in outcome.findings):
                    program = variant
                    improved = True
                    break
    finally:
        worker.stop()
    return program


# ---- regression files --------------------------------------------------------------------------
_TEMPLATE = '''"""Fuzzer regression ({kind}, seed {seed}): {summary}

Found by `python -m zymo.fuzz`; shrunk. {status}"""
from __future__ import annotations

import math  # noqa: F401  (the kernel may call math.*)

import pytest

import zymo as zm
from zymo.fuzz.regression import program_from_json
from zymo.fuzz.run import check_kernel

PROGRAM = program_from_json({program_json!r})


{kernel}

{mark}def test_{name}():
    outcome = check_kernel(kern, PROGRAM, backends={backends!r}, grad={grad!r})
    assert outcome.status != "rejected", outcome.note
    assert not outcome.findings, "\\n".join(f.kind + ": " + f.message for f in outcome.findings)
'''


def write_regression(program: Program, finding: Finding, directory: str, backends,
                     xfail_reason: str | None = None) -> str:
    """A standalone pytest file with the kernel and the comparison that failed."""
    from .regression import program_to_json
    os.makedirs(directory, exist_ok=True)
    name = f"{finding.kind.replace('-', '_')}_{program.seed}"
    summary = re.sub(r"\s+", " ", finding.message)[:200].replace('"""', "'''")
    if xfail_reason is None:        # written for a zymo bug: it fails until someone fixes it
        xfail_reason = f"zymo bug found by the fuzzer ({finding.kind}), not fixed yet"
    mark = (f"@pytest.mark.xfail(strict=True, reason={xfail_reason!r})\n"
            if xfail_reason else "")
    status = ("Not fixed yet: marked xfail." if xfail_reason else "")
    if "cuda" in backends:
        mark = "@pytest.mark.gpu\n" + mark
    text = _TEMPLATE.format(kind=finding.kind, seed=program.seed, summary=summary,
                            status=status, program_json=program_to_json(program),
                            kernel=program.kernel_source(), mark=mark, name=name,
                            backends=tuple(backends), grad=finding.grad)
    path = os.path.join(directory, f"test_{name}.py")
    with open(path, "w") as handle:
        handle.write(text)
    return path
