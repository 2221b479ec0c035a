"""Imports point one way (style.md, Part 2.1): each stage imports only the stages upstream.

The stages, upstream first: diagnostics; ir; ops and lang; frontend, passes, backend, ad, genome;
runtime/cuda (the CUDA driver, arrays, launches); runtime (kernels, derivatives, zm.Tape,
evolution: the stages joined). Above them the public API (`zymo/__init__.py`, written `import
zymo` or `from zymo import name`) and what uses it like a user does: cli, fuzz, bench, interop,
`__main__`. A stage never imports the API: it names the stage that holds what it needs.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "zymo"   # read as files: nothing is imported
API = "zymo"                     # the package root: the public API
ABOVE = {"__init__", "__main__", "cli", "fuzz", "bench", "interop", "cuda"}   # may import anything
BASE = {"diagnostics", "switches"}
COMPILER = BASE | {"ir", "ops", "lang", "frontend", "passes", "backend", "ad", "genome"}
ALLOWED = {
    "diagnostics": set(),
    "switches": set(),
    "ir": BASE,
    "ops": BASE | {"ir"},
    "lang": BASE | {"ir"},
    "frontend": BASE | {"ir", "ops", "lang"},
    "passes": BASE | {"ir", "ops"},
    "backend": BASE | {"ir", "ops", "backend"},
    "ad": BASE | {"ir", "ops", "passes"},   # derivatives of device functions: optimized first
    "genome": BASE | {"ir", "ops"},
    # the CUDA driver, arrays and launches: kernel parameters (lang.Param), the CPU JIT (native
    # launches), the PTX compiler (cache misses), the error words of compiled kernels
    "runtime.cuda": BASE | {"ir", "lang", "backend"},
    "runtime": COMPILER | {"runtime.cuda"},
}
# Imports that break the rule today, each with the step that removes it. Keep this short.
EXCEPTIONS = {
    # a fresh evolution worker process imports the whole package before its first task (a
    # process entry point, like __main__)
    ("runtime/evolution/worker.py", API): "worker warm-up",
}


def stage_of(path: Path) -> str:
    """The stage of a file of the package: its top folder or module, runtime/cuda apart."""
    return stage_of_module(list(path.relative_to(ROOT).with_suffix("").parts))


def stage_of_module(parts: list[str]) -> str:
    """The stage of the module `zymo.<parts>`; the API for the package root and its names."""
    if not parts or not _exists(parts[:1]) or parts[0] == "__init__":
        return API
    if parts[:2] == ["runtime", "cuda"]:
        return "runtime.cuda"
    return parts[0]


def _exists(parts: list[str]) -> bool:
    path = ROOT.joinpath(*parts)
    return path.is_dir() or path.with_suffix(".py").is_file()


def imported_stages(path: Path) -> set[tuple[str, int]]:
    """(stage, line) for every import of zymo in the file, at any depth (lazy imports too)."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(ROOT.parent).with_suffix("").parts[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = list(base) + (node.module.split(".") if node.module else [])
            else:
                module = node.module.split(".") if node.module else []
            if not module or module[0] != "zymo":
                continue
            for alias in node.names:   # `from .. import lang` imports the stage lang
                named = module[1:] + [alias.name]
                parts = named if _exists(named) else module[1:]
                found.add((stage_of_module(parts), node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "zymo":
                    found.add((stage_of_module(parts[1:]), node.lineno))
    return found


def test_imports_point_upstream():
    problems = []
    for path in sorted(ROOT.rglob("*.py")):
        stage = stage_of(path)
        top = path.relative_to(ROOT).parts[0].removesuffix(".py")
        if top in ABOVE:
            continue
        relative = path.relative_to(ROOT).as_posix()
        if stage not in ALLOWED:
            problems.append(f"{relative}: stage {stage} is new: add it to ALLOWED")
            continue
        for target, line in imported_stages(path):
            if target == stage or target in ALLOWED[stage] or (relative, target) in EXCEPTIONS:
                continue
            problems.append(f"{relative}:{line}: {stage} imports {target}")
    assert not problems, "\n".join(problems)


def test_exceptions_are_still_needed():
    """An exception whose import is gone is removed from EXCEPTIONS."""
    stale = [f"{file} -> {target}" for file, target in EXCEPTIONS
             if not (ROOT / file).exists()
             or target not in {t for t, _ in imported_stages(ROOT / file)}]
    assert not stale, stale


def test_the_rule_sees_bare_imports():
    """`import zymo` and `from zymo import name` are imports of the API, not of nothing."""
    source = ROOT / "frontend" / "resolve.py"
    assert stage_of(source) == "frontend"
    assert stage_of_module([]) == API and stage_of_module(["__version__"]) == API
    assert stage_of_module(["runtime", "cuda", "arrays"]) == "runtime.cuda"
    assert stage_of_module(["runtime", "kernel"]) == "runtime"
