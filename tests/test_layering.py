"""Imports point one way (style.md, Part 2.1): each stage imports only the stages upstream."""
import ast
from pathlib import Path

import zymo

ROOT = Path(zymo.__file__).parent
BASE = {"diagnostics"}
ALLOWED = {
    "diagnostics": set(),
    "ir": BASE,
    "ops": BASE | {"ir"},
    "lang": BASE | {"ir"},
    "frontend": BASE | {"ir", "ops", "lang"},
    "passes": BASE | {"ir", "ops"},
    "backend": BASE | {"ir", "ops", "backend"},
    "ad": BASE | {"ir", "ops", "passes"},   # derivatives of device functions: optimized first
    "genome": BASE | {"ir", "ops"},
}


def stage_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return parts[0]


def imported_stages(path: Path) -> set[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    package = path.relative_to(ROOT.parent).with_suffix("").parts[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = list(base) + (node.module.split(".") if node.module else [])
                names = [alias.name for alias in node.names] if not node.module else []
            else:
                module = node.module.split(".") if node.module else []
                names = []
            if module and module[0] == "zymo":
                if len(module) > 1:
                    found.add((module[1], node.lineno))
                else:
                    found.update((name, node.lineno) for name in names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "zymo" and len(parts) > 1:
                    found.add((parts[1], node.lineno))
    return found


def test_imports_point_upstream():
    problems = []
    for path in sorted(ROOT.rglob("*.py")):
        stage = stage_of(path)
        if stage not in ALLOWED:
            continue  # runtime, cli, tape, interop and the package root join the stages
        for target, line in imported_stages(path):
            if target != stage and target not in ALLOWED[stage]:
                problems.append(f"{path.relative_to(ROOT)}:{line}: {stage} imports {target}")
    assert not problems, "\n".join(problems)
