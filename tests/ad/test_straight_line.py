"""Hypothesis: random straight-line float programs, their gradients against finite differences."""
from __future__ import annotations

import importlib.util
import itertools
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zymo as zm

UNARY = ["math.sin({})", "math.cos({})", "math.tanh({})", "math.exp(0.3 * {})",
         "math.sqrt(1.0 + {} * {})", "-{}", "math.atan({})", "math.log(2.0 + math.sin({}))"]
BINARY = ["{} + {}", "{} - {}", "{} * {}", "{} / (1.5 + math.cos({}))", "min({}, {})",
          "max({}, {})", "({} if {} > 0.1 else 0.5 * {})", "math.hypot({}, {})"]

_directory = Path(tempfile.mkdtemp(prefix="zymo_straight_line_"))
_count = itertools.count()


@st.composite
def programs(draw):
    names = ["xi", "yi", "a"]
    lines = []
    for k in range(draw(st.integers(2, 7))):
        if draw(st.booleans()):
            form = draw(st.sampled_from(UNARY))
            operand = draw(st.sampled_from(names))
            expr = form.format(*[operand] * form.count("{}"))
        else:
            form = draw(st.sampled_from(BINARY))
            operands = [draw(st.sampled_from(names)) for _ in range(2)]
            if form.count("{}") == 3:
                operands.append(operands[0])
            expr = form.format(*operands)
        lines.append(f"t{k} = {expr}")
        names.append(f"t{k}")
    return lines, names[-1]


def build(lines, result):
    body = "\n".join("        " + line for line in lines)
    source = (f"import math\nimport zymo as zm\n\n\n@zm.kernel\ndef program(x, y, a, out):\n"
              f"    i = zm.grid(1)\n    if i < x.shape[0]:\n        xi = x[i]\n        yi = y[i]\n"
              f"{body}\n        out[i] = {result}\n")
    path = _directory / f"program_{next(_count)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.program


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2**31 - 1))
def test_random_programs(program, seed):
    lines, result = program
    kernel = build(lines, result)
    rng = np.random.default_rng(seed)
    n = 40
    x, y = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    for backend in ("interp", "cpu"):
        report = zm.check_grad(kernel, 1, 64, zm.Duplicated(x, np.zeros(n)),
                               zm.Duplicated(y, np.zeros(n)), zm.Active(0.7),
                               zm.Duplicated(np.zeros(n), np.zeros(n)), backend=backend,
                               seed=seed)
        assert report.ok, "\n".join(lines) + "\n" + str(report)
