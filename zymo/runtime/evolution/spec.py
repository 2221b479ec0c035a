"""The spec file of `zymo evolve`: what to evolve, how, and where the results go.

A spec is a TOML file (Python 3.11 or later) or a JSON file with one table of keys:

    kernel = "kernels.py:wasteful_scale"      # path.py:name of the @zm.kernel
    inputs = "kernels.py:scale_inputs"        # inputs(rng) -> fresh launch arguments
    launch = "kernels.py:scale_launch"        # launch(args) -> (grid, block); or grid = / block =
    check = "kernels.py:compare"              # optional: check(expected, got) -> error
    holdout = "kernels.py:big_inputs"         # optional: inputs for the final, larger validation
    race_check = "kernels.py:small_inputs"    # optional: small inputs for the interpreter's race
                                              # check of variants that claim a speedup
    profile = "kernels.py:small_inputs"       # optional: small inputs the interpreter profiles
                                              # the kernel on, to guide mutations (default: the
                                              # race_check inputs); false: uniform, as GEVO
    derivative = "grad"                       # optional: evolve zm.grad(kernel) or zm.jvp(kernel)
                                              # (inputs then give activities: zm.Duplicated...)
    width = 3                                 # optional, with derivative = "jvp": tangents
    sizes = [1000, 4097]                      # optional: held-out sizes, inputs(rng, size)
    mode = "steady"                           # optional: "generational" (default) or "steady"
    tolerance = 0.0
    population = 64
    generations = 20
    time_budget = 300                         # seconds
    seed = 0
    backend = "cpu"                           # cpu, cuda or interp; default: cuda when present
    workers = 4                               # optional: evaluation processes
    minimize = false                          # GEVO's edit minimization after the search
    checkpoint = "out/run.json"               # default: <spec>.checkpoint.json
    report = "out/report"                     # default: <spec>.report/
    edits = "out/best.edits.json"             # default: <spec>.edits.json

Relative paths are relative to the spec file's folder. Every mistake is a `SpecError` whose text
names the spec file, the key, and what to write instead.
"""
from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

BACKENDS = ("cpu", "cuda", "interp")


class SpecError(Exception):
    """A mistake in a spec file (or a flag), worded for the person who wrote it."""


class Ref(NamedTuple):
    """`path.py:name`, the path resolved."""
    file: Path
    name: str

    def __str__(self) -> str:
        return f"{self.file}:{self.name}"


# key -> (what it must be, an example value as written in the spec)
_KEYS: dict[str, tuple[str, str]] = {
    "kernel": ('"path.py:name" of a @zm.kernel', '"kernels.py:my_kernel"'),
    "inputs": ('"path.py:name" of a function of a numpy Generator that returns the kernel\'s '
               'arguments', '"kernels.py:make_inputs"'),
    "launch": ('"path.py:name" of a function of the argument list that returns (grid, block)',
               '"kernels.py:launch"'),
    "grid": ("a positive integer or a list of 1 to 3 of them", "4"),
    "block": ("a positive integer or a list of 1 to 3 of them", "128"),
    "check": ('"path.py:name" of a function check(expected_args, got_args) -> error',
              '"kernels.py:check"'),
    "holdout": ('"path.py:name" of an inputs function for the final, larger validation',
                '"kernels.py:big_inputs"'),
    "race_check": ('"path.py:name" of an inputs function of small inputs for the race check '
                   'on the interpreter', '"kernels.py:small_inputs"'),
    "profile": ('"path.py:name" of an inputs function of small inputs to profile the kernel '
                'on, or false', '"kernels.py:small_inputs"'),
    "derivative": ('"grad" or "jvp"', '"grad"'),
    "width": ('a positive integer (tangents of derivative = "jvp")', "3"),
    "sizes": ("a list of positive integers (held-out input sizes)", "[1000, 4097]"),
    "mode": ('"generational" or "steady"', '"steady"'),
    "tolerance": ("a number >= 0", "0.0"),
    "population": ("a positive integer", "64"),
    "generations": ("an integer >= 0", "20"),
    "time_budget": ("a positive number of seconds", "300"),
    "seed": ("an integer >= 0", "0"),
    "backend": ('one of "cpu", "cuda", "interp"', '"cpu"'),
    "workers": ("a positive integer", "4"),
    "minimize": ("true or false", "true"),
    "checkpoint": ("a file path", '"out/run.json"'),
    "report": ("a folder path", '"out/report"'),
    "edits": ("a file path", '"out/best.edits.json"'),
}


@dataclass(frozen=True)
class EvolveSpec:
    path: Path                          # the spec file, as given
    kernel: Ref
    inputs: Ref
    launch: Ref | None = None
    grid: int | tuple[int, ...] | None = None
    block: int | tuple[int, ...] | None = None
    check: Ref | None = None
    holdout: Ref | None = None
    race_check: Ref | None = None
    profile: Ref | bool = True          # True: the race_check inputs; False: uniform edits
    derivative: str | None = None       # "grad" or "jvp": evolve that derivative of the kernel
    width: int | None = None
    sizes: tuple = ()
    mode: str | None = None             # None: generational
    tolerance: float = 0.0
    population: int = 64
    generations: int = 20
    time_budget: float = 300.0
    seed: int = 0
    backend: str | None = None          # None: cuda when a GPU is present, else cpu
    workers: int | None = None
    minimize: bool = False
    checkpoint: Path = Path("run.checkpoint.json")
    report: Path = Path("run.report")
    edits: Path = Path("run.edits.json")

    def with_overrides(self, **values) -> "EvolveSpec":
        """The spec with the given values (command-line flags) in place of its own; `None`
        means "as the spec says"."""
        return dataclasses.replace(self, **{k: v for k, v in values.items() if v is not None})

    def load(self) -> dict:
        """Import what the spec names: the keyword arguments of `zm.evolve`."""
        from ..kernel import Kernel
        kernel = self._import("kernel", self.kernel)
        if not isinstance(kernel, Kernel):
            if not callable(kernel):
                raise SpecError(f"{self.path}: 'kernel' names {self.kernel.name}, which is "
                                f"{_kind(kernel)}, not a kernel; write {self._example('kernel')}")
            kernel = Kernel(getattr(kernel, "py_func", kernel))
        if self.derivative == "grad":
            from ..grad import GradKernel
            kernel = GradKernel(kernel)
        elif self.derivative == "jvp":
            from ..jvp import JvpKernel
            kernel = JvpKernel(kernel, self.width)
        launch = self._function("launch", self.launch) if self.launch else (self.grid, self.block)
        return dict(kernel=kernel, launch=launch, inputs=self._function("inputs", self.inputs),
                    check=self._function("check", self.check) if self.check else None,
                    holdout=self._function("holdout", self.holdout) if self.holdout else None,
                    race_check=self._function("race_check", self.race_check)
                    if self.race_check else None,
                    profile=self._function("profile", self.profile)
                    if isinstance(self.profile, Ref) else self.profile,
                    sizes=self.sizes, mode=self.mode or "generational",
                    tolerance=self.tolerance, population=self.population,
                    generations=self.generations, time_budget=self.time_budget, seed=self.seed,
                    backend=self.backend, workers=self.workers, checkpoint=self.checkpoint)

    def check_checkpoint(self, resume: bool, kernel_name: str) -> None:
        """A run starts over only where no checkpoint is, and resumes only from one of this
        kernel, so that an earlier run is never overwritten by accident."""
        exists = self.checkpoint.exists()
        if exists and not resume:
            raise SpecError(f"{self.path}: the checkpoint {self.checkpoint} exists from an "
                            f"earlier run; pass --resume to continue it, or delete it (or name "
                            f"another checkpoint in the spec) to start over")
        if resume and not exists:
            raise SpecError(f"{self.path}: no checkpoint {self.checkpoint} to resume from; run "
                            f"without --resume to start")
        if resume:
            try:
                found = json.loads(self.checkpoint.read_text()).get("kernel")
            except (OSError, ValueError, AttributeError) as error:
                raise SpecError(f"{self.path}: cannot read the checkpoint {self.checkpoint} "
                                f"({error}); delete it to start over") from None
            if found != kernel_name:
                raise SpecError(f"{self.path}: the checkpoint {self.checkpoint} is of the "
                                f"kernel {found!r}, not {kernel_name!r}; name another "
                                f"checkpoint in the spec")

    def _example(self, key: str) -> str:
        return _example(self.path, key)

    def _import(self, key: str, ref: Ref):
        module = _import_file(ref.file, self.path, key)
        if not hasattr(module, ref.name):
            raise SpecError(f"{self.path}: '{key}': {ref.file.name} defines no {ref.name!r}")
        return getattr(module, ref.name)

    def _function(self, key: str, ref: Ref):
        found = self._import(key, ref)
        if not callable(found):
            raise SpecError(f"{self.path}: '{key}' names {ref.name}, which is {_kind(found)}, "
                            f"not a function; write {self._example(key)}")
        return found


def _import_file(file: Path, spec_path: Path, key: str):
    """The module of `file`, imported under its file name with its folder on `sys.path`, so that
    the worker processes (spawned with this `sys.path`) import the same kernel and functions."""
    name = file.stem
    found = sys.modules.get(name)
    if found is not None:
        if Path(getattr(found, "__file__", None) or "").resolve() == file.resolve():
            return found
        where = getattr(found, "__file__", None) or "built in"
        raise SpecError(f"{spec_path}: '{key}': a module named {name!r} is already imported "
                        f"({where}), so {file} cannot be imported under its name; rename the "
                        f"file")
    if file.suffix != ".py":
        raise SpecError(f"{spec_path}: '{key}': {file} is not a Python file: name a .py file "
                        f"and the function in it, e.g. \"kernels.py:name\"")
    folder = str(file.parent.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)  # type: ignore[union-attr]
    except Exception as error:
        del sys.modules[name]
        where = ""
        if isinstance(error, SyntaxError):
            where = f" (line {error.lineno})"
        raise SpecError(f"{spec_path}: '{key}': importing {file} failed{where}: "
                        f"{type(error).__name__}: {error}") from error
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _example(path: Path, key: str) -> str:
    value = _KEYS[key][1]
    return f'"{key}": {value}' if Path(path).suffix == ".json" else f"{key} = {value}"


def _read(path: Path) -> dict:
    if not path.is_file():
        raise SpecError(f"no such spec file {path}")
    text = path.read_text()
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise SpecError(f"{path}: not valid JSON: {error}") from None
        kind = "a JSON object"
    elif path.suffix == ".toml":
        try:
            import tomllib
        except ImportError:   # Python 3.10
            try:
                import tomli as tomllib  # type: ignore[no-redef]
            except ImportError:
                raise SpecError(f"{path}: reading TOML on Python 3.10 needs tomli (pip install "
                                f"tomli), or write the spec as JSON "
                                f"({path.with_suffix('.json').name})") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise SpecError(f"{path}: not valid TOML: {error}") from None
        kind = "a TOML table"
    else:
        raise SpecError(f"{path}: a spec file is .toml or .json, not {path.suffix or 'no suffix'}")
    if not isinstance(data, dict):
        raise SpecError(f"{path}: the spec must be {kind} of keys, not a "
                        f"{type(data).__name__}")
    return data


def _kind(value: Any) -> str:
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _describe(value: Any) -> str:
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "a list", dict: "a table"}
    shown = json.dumps(value) if not isinstance(value, float) else repr(value)
    return f"{shown} ({kinds.get(type(value), type(value).__name__)})"


class _Reader:
    """Takes keys out of the spec's table, each checked and converted."""

    def __init__(self, path: Path, data: dict):
        self.path, self.data = path, data
        self.folder = Path(path).resolve().parent

    def wrong(self, key: str, value: Any, extra: str = "") -> SpecError:
        return SpecError(f"{self.path}: '{key}' must be {_KEYS[key][0]}, not {_describe(value)}"
                         f"{extra}; write {_example(self.path, key)}")

    def missing(self, key: str, extra: str = "") -> SpecError:
        return SpecError(f"{self.path}: missing key '{key}'; write {_example(self.path, key)} "
                         f"({_KEYS[key][0]}){extra}")

    def ref(self, key: str, required: bool = False) -> Ref | None:
        if key not in self.data:
            if required:
                raise self.missing(key)
            return None
        value = self.data[key]
        if not isinstance(value, str):
            raise self.wrong(key, value)
        file, _, name = value.rpartition(":")
        if not file or not name.isidentifier():
            raise self.wrong(key, value)
        resolved = self.resolve(file)
        if not resolved.is_file():
            raise SpecError(f"{self.path}: '{key}': no such file {resolved} (relative paths are "
                            f"relative to the spec file's folder, {self.folder})")
        return Ref(resolved, name)

    def resolve(self, text: str) -> Path:
        path = Path(text).expanduser()
        return path if path.is_absolute() else self.folder / path

    def integer(self, key: str, default: int | None, least: int) -> int | None:
        if key not in self.data:
            return default
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise self.wrong(key, value)
        return value

    def number(self, key: str, default: float, positive: bool) -> float:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                (value <= 0 if positive else value < 0) or value != value:
            raise self.wrong(key, value)
        return float(value)

    def dims(self, key: str) -> int | tuple[int, ...] | None:
        if key not in self.data:
            return None
        value = self.data[key]
        items = value if isinstance(value, list) else [value]
        if not 1 <= len(items) <= 3 or any(isinstance(v, bool) or not isinstance(v, int)
                                           or v < 1 for v in items):
            raise self.wrong(key, value)
        return tuple(items) if isinstance(value, list) else value

    def path_of(self, key: str, default: str) -> Path:
        value = self.data.get(key, default)
        if not isinstance(value, str) or not value:
            raise self.wrong(key, value)
        return self.resolve(value)


def load_spec(path) -> EvolveSpec:
    """Read and check the spec file at `path` (nothing is imported yet: `EvolveSpec.load`)."""
    path = Path(path)
    data = _read(path)
    for key in data:
        if key not in _KEYS:
            close = difflib.get_close_matches(key, _KEYS, n=1)
            hint = f"did you mean '{close[0]}'?" if close else \
                f"the keys are: {', '.join(_KEYS)}"
            raise SpecError(f"{path}: unknown key '{key}'; {hint}")
    read = _Reader(path, data)
    kernel = read.ref("kernel", required=True)
    inputs = read.ref("inputs", required=True)
    launch = read.ref("launch")
    grid, block = read.dims("grid"), read.dims("block")
    if launch is not None and (grid is not None or block is not None):
        raise SpecError(f"{path}: give either 'launch' or 'grid' and 'block', not both; write "
                        f"{_example(path, 'launch')}, or {_example(path, 'grid')} and "
                        f"{_example(path, 'block')}")
    if launch is None:
        if grid is None and block is None:
            raise read.missing("launch", f", or {_example(path, 'grid')} and "
                                         f"{_example(path, 'block')}")
        for key, value in (("grid", grid), ("block", block)):
            if value is None:
                raise read.missing(key)
    backend = data.get("backend")
    if backend is not None and backend not in BACKENDS:
        raise read.wrong("backend", backend)
    minimize = data.get("minimize", False)
    if not isinstance(minimize, bool):
        raise read.wrong("minimize", minimize)
    derivative = data.get("derivative")
    if derivative is not None and derivative not in ("grad", "jvp"):
        raise read.wrong("derivative", derivative)
    width = read.integer("width", None, 1)
    if width is not None and derivative != "jvp":
        raise SpecError(f"{path}: 'width' is the number of tangents of a forward-mode "
                        f"derivative; write derivative = \"jvp\" with it, or drop it")
    sizes = data.get("sizes", [])
    if not isinstance(sizes, list) or any(isinstance(v, bool) or not isinstance(v, int) or
                                          v < 1 for v in sizes):
        raise read.wrong("sizes", sizes)
    mode = data.get("mode")
    if mode is not None and mode not in ("generational", "steady"):
        raise read.wrong("mode", mode)
    profile = data.get("profile", True)
    if not isinstance(profile, bool):
        profile = read.ref("profile")
    stem = path.stem
    return EvolveSpec(
        path=path, kernel=kernel, inputs=inputs, launch=launch, grid=grid, block=block,
        check=read.ref("check"), holdout=read.ref("holdout"), race_check=read.ref("race_check"),
        profile=profile, derivative=derivative, width=width, sizes=tuple(sizes), mode=mode,
        tolerance=read.number("tolerance", 0.0, positive=False),
        population=read.integer("population", 64, 1),
        generations=read.integer("generations", 20, 0),
        time_budget=read.number("time_budget", 300.0, positive=True),
        seed=read.integer("seed", 0, 0), backend=backend,
        workers=read.integer("workers", None, 1), minimize=minimize,
        checkpoint=read.path_of("checkpoint", f"{stem}.checkpoint.json"),
        report=read.path_of("report", f"{stem}.report"),
        edits=read.path_of("edits", f"{stem}.edits.json"))
