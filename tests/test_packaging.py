"""Packaging: the metadata in pyproject.toml, the floors .ci/run tests, Python 3.10 support."""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import zymo as zm
from zymo.frontend import intrinsics

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _requirement(requirements: list[str], name: str) -> str:
    found = [r for r in requirements if re.match(rf"{re.escape(name)}\s*[<>=!~;\[]", r)]
    assert len(found) == 1, (name, requirements)
    return found[0]


def _floor(requirement: str) -> str:
    match = re.search(r">=\s*([\w.]+)", requirement)
    assert match, requirement
    return match.group(1)


def test_the_floors_are_the_versions_ci_pins():
    """.ci/minimum.txt pins every floor of the dependencies, so .ci/run tests them."""
    pins = {}
    for line in (REPO / ".ci" / "minimum.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = re.match(r"([\w-]+)==([\w.]+)", line).groups()
            pins.setdefault(name, version)   # the first line: the oldest Python's pin
    dependencies = PROJECT["dependencies"]
    for name in ("numpy", "llvmlite", "tomli"):
        floor = _floor(_requirement(dependencies, name))
        assert tuple(map(int, pins[name].split("."))) == \
            tuple(map(int, floor.split("."))) + (0,) * (pins[name].count(".") - floor.count("."))
    assert _floor(_requirement(dependencies, "llvmlite")) == "0.48"   # older ones fail NVPTX
    assert "python_version < '3.11'" in _requirement(dependencies, "tomli")


def test_the_extras():
    extras = PROJECT["optional-dependencies"]
    assert {"cuda", "cuda13", "test", "dask", "plot"} <= set(extras)
    # what zymo/runtime/cuda/driver.py imports and zymo/backend/nvptx/libdevice.py searches
    for name in ("cuda-bindings", "cuda-pathfinder", "nvidia-nvjitlink-cu12",
                 "nvidia-cuda-nvcc-cu12"):
        _requirement(extras["cuda"], name)
    for name in ("cuda-bindings", "cuda-pathfinder", "nvidia-nvjitlink", "nvidia-nvvm"):
        _requirement(extras["cuda13"], name)
    assert "<13" in _requirement(extras["cuda"], "cuda-bindings")


def test_the_metadata():
    assert PROJECT["license"] == "MIT" and (REPO / "LICENSE").read_text().startswith("MIT")
    assert PROJECT["authors"] and PROJECT["urls"]
    versions = {c.rsplit(" ", 1)[-1] for c in PROJECT["classifiers"]
                if c.startswith("Programming Language :: Python :: 3.")}
    assert versions == {"3.10", "3.11", "3.12", "3.13"}
    assert PROJECT["requires-python"] == ">=3.10"


# APIs newer than Python 3.10 (tomllib is imported only with the tomli fallback)
NEWER_APIS = [r"^\s*except\s*\*", r"\bExceptionGroup\b", r"\bTaskGroup\b", r"\bStrEnum\b",
              r"\bdatetime\.UTC\b", r"from typing import [^\n]*\bSelf\b", r"\btyping\.Self\b",
              r"\bmath\.(cbrt|exp2)\(", r"^\s*import tomllib\s*$"]


def test_no_python_311_apis_in_the_package():
    found = []
    for path in sorted((REPO / "zymo").rglob("*.py")):
        text = path.read_text()
        for pattern in NEWER_APIS:
            for match in re.finditer(pattern, text, re.MULTILINE):
                line = text.count("\n", 0, match.start()) + 1
                context = text[match.start():match.start() + 400]
                if "tomllib" in pattern and "import tomli as tomllib" in context:
                    continue
                if "cbrt|exp2" in pattern and path.name == "generate.py":
                    continue   # kernel source the fuzzer writes, not host code
                found.append(f"{path.relative_to(REPO)}:{line}: {match.group(0).strip()}")
    assert not found, found


@pytest.mark.parametrize("name, numpy_fn", [("cbrt", np.cbrt), ("exp2", np.exp2)])
def test_math_standins(name, numpy_fn):
    """Python 3.10's math module has no cbrt or exp2: kernels may still name them, through
    stand-ins that fold constants as the math module would."""
    standin = intrinsics._standin(name, numpy_fn)
    assert standin(27.0) == float(numpy_fn(27.0)) and standin.__name__ == name
    assert intrinsics.python_math(name) is not None
    assert intrinsics.python_math(name) in intrinsics.PYMATH_PATHS
    if name == "exp2":
        with pytest.raises(OverflowError):
            standin(5000.0)
    assert math.isnan(standin(float("nan")))
    assert (name in intrinsics.PYMATH_STANDINS) == (sys.version_info < (3, 11))


@zm.kernel
def _cbrt_exp2(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = math.cbrt(x[i]) + math.exp2(x[i]) + math.cbrt(8.0) + math.exp2(3.0)


def test_kernels_call_cbrt_and_exp2_on_every_python():
    x = np.linspace(-3.0, 3.0, 17)
    y = np.zeros_like(x)
    _cbrt_exp2[1, 32](x, y)
    np.testing.assert_allclose(y, np.cbrt(x) + np.exp2(x) + 10.0, rtol=1e-12)


def test_toml_specs_read_on_every_python(tmp_path):
    """`zymo evolve spec.toml` reads TOML through tomllib, or tomli on Python 3.10."""
    from zymo.runtime.evolution import spec

    path = tmp_path / "s.toml"
    path.write_text('kernel = "k.py:f"\n[budget]\ngenerations = 3\n')
    assert spec._read(path) == {"kernel": "k.py:f", "budget": {"generations": 3}}
    path.write_text("kernel = \n")
    with pytest.raises(spec.SpecError, match="not valid TOML"):
        spec._read(path)


def test_test_modules_outside_packages_have_unique_names():
    """pytest imports a test file in a folder without __init__.py by its bare name: two such
    files with one name stop the collection of the whole suite."""
    tests = Path(__file__).resolve().parent
    seen: dict[str, Path] = {}
    for path in sorted(tests.rglob("test_*.py")):
        if (path.parent / "__init__.py").exists():
            continue
        assert path.name not in seen, f"{path} and {seen[path.name]}: rename one"
        seen[path.name] = path
