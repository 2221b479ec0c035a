"""Every ```python block of README.md is a complete program, and runs.

Each block is written to a file of its own (zymo reads a kernel's source, so kernels must live
in a real file) and run with this Python in a fresh process, in a temporary folder, under a
time limit. A block whose info string is ```python gpu needs a CUDA GPU: it runs where one is
present and is skipped, saying so, elsewhere. No other block may be left out; the evolution
example is marked `slow` (run by `python -m pytest -m slow`, as CI does).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TIME_LIMIT = 240   # seconds per block (the evolution example runs a small search)

# a fenced block: the fence (``` with any indent), its info string, its lines, the closing fence
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.MULTILINE | re.DOTALL)


def python_blocks() -> list[tuple[int, str, str]]:
    """(line, info string, source) of each ```python block, its indent removed."""
    text = README.read_text()
    blocks = []
    for match in FENCE.finditer(text):
        info = match.group("info").split()
        if not info or info[0] != "python":
            continue
        indent = match.group("indent")
        source = "".join(line[len(indent):] if line.startswith(indent) else line
                         for line in match.group("body").splitlines(keepends=True))
        line = text.count("\n", 0, match.start()) + 1
        blocks.append((line, " ".join(info[1:]), source))
    return blocks


BLOCKS = python_blocks()
# the evolution example spawns workers and runs a small search (a minute on 2 cores)
CASES = [pytest.param(*block, id=f"README.md:{block[0]}",
                      marks=[pytest.mark.slow] if "zm.evolve(" in block[2] else [])
         for block in BLOCKS]


def _gpu_missing() -> str | None:
    from zymo.runtime.cuda import driver
    try:
        return None if driver.is_available() else "no CUDA GPU"
    except Exception as error:   # no cuda-bindings, no driver
        return f"no CUDA GPU ({type(error).__name__})"


def test_the_readme_has_examples():
    assert len(BLOCKS) >= 4
    assert {info for _, info, _ in BLOCKS} <= {"", "gpu"}, "unknown info string"


@pytest.mark.parametrize("line, info, source", CASES)
def test_readme_block_runs(line, info, source, tmp_path):
    if info == "gpu":
        missing = _gpu_missing()
        if missing:
            pytest.skip(f"README.md:{line} is a ```python gpu block: {missing}")
    script = tmp_path / f"readme_line_{line}.py"
    script.write_text(source)
    # the checkout's zymo, whichever folder the test runs from; no test-suite settings leak in
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZYMO_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, script.name], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=TIME_LIMIT)
    assert done.returncode == 0, (f"README.md:{line} failed (exit code {done.returncode}):\n"
                                  f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def test_ci_runs_the_readmes_test_command():
    """.ci/run runs the README's test command as written (both halves of the suite)."""
    text = README.read_text()
    commands = [m.group("body").strip() for m in FENCE.finditer(text)
                if m.group("info").strip() == "bash" and "pytest" in m.group("body")]
    assert len(commands) == 1 and "-m slow" in commands[0], commands
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[0] in (line.strip() for line in ci), \
        f".ci/run does not run the README's test command: {commands[0]}"
