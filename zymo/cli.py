"""The `zymo` command: inspect a kernel's IR (`zymo ir`), PTX (`zymo ptx`) and derivatives
(`zymo grad`), check its derivatives against finite differences (`zymo check`), run the
benchmarks (`zymo bench`) and evolve a kernel as a spec file says (`zymo evolve`).

Mistakes on the command line are one line on stderr and exit code 2; errors in the kernel are
compiler diagnostics and exit code 1; Ctrl-C exits 130."""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import os
import re
import signal
import sys
import threading
import traceback
from pathlib import Path

import numpy as np

from . import __version__
from .diagnostics import CompileError, KernelRuntimeError, LaunchError
from .ir import types as T
from .ir.types import Array


class UsageError(Exception):
    """A mistake on the command line, reported as one line `zymo: ...` with exit code 2."""


_SCALARS = {t.name: t for t in T.SCALARS}
# numba's names for the same types, so that signatures written for numba read as they are
_NUMBA_NAMES = {"float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8",
                "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
                "uint32": "u32", "uint64": "u64", "boolean": "bool", "bool_": "bool"}
_SIG_ITEM = re.compile(r"^(\w+)\s*(?:\[(.*)\])?$")
_SIG_EXAMPLE = "write e.g. f32, float32[:], f64[:, :], float, int"


def parse_type(item: str):
    """One type of a signature: `f32`, numba's `float32`, `f32[:]`, `float32[:, ::1]`, or
    `float`/`int` (a Python number: weakly typed, carried as f64/i64)."""
    match = _SIG_ITEM.match(item.strip())
    if not match:
        raise UsageError(f"cannot read the type {item.strip()!r}; {_SIG_EXAMPLE}")
    name, dims = match.group(1), match.group(2)
    if name in ("float", "int"):
        if dims is not None:
            raise UsageError(f"{item.strip()!r}: {name} is a Python number; an array needs an "
                             f"element type, e.g. {'f32' if name == 'float' else 'i32'}[:]")
        return float if name == "float" else int
    scalar = _SCALARS.get(_NUMBA_NAMES.get(name, name))
    if scalar is None:
        raise UsageError(f"unknown type {name!r} in {item.strip()!r}; the types are "
                         f"{', '.join(_SCALARS)} (or numba's float32, int64, uint8, boolean, "
                         f"...), and float, int for Python numbers")
    if dims is None:
        return scalar
    return Array(scalar, _array_rank(item.strip(), dims), "global", "C")


def _array_rank(item: str, dims: str) -> int:
    """The number of dimensions of `[:, :]` (`::1` marks the last one contiguous, as in numba:
    zymo's arrays are C-ordered)."""
    parts = [part.replace(" ", "") for part in dims.split(",")]
    if parts == [""]:
        raise UsageError(f"{item!r}: an array type needs its dimensions, e.g. "
                         f"{item.split('[')[0].strip()}[:] or [:, :]")
    for position, part in enumerate(parts):
        if part == "::1" and position < len(parts) - 1:
            raise UsageError(f"{item!r}: only the last dimension may be contiguous (::1); "
                             f"zymo's arrays are C-ordered")
        if part not in (":", "::1"):
            raise UsageError(f"{item!r}: write each dimension as ':' (or '::1' for the last), "
                             f"not {part!r}")
    if len(parts) > 4:
        raise UsageError(f"{item!r}: arrays have 1 to 4 dimensions, not {len(parts)}")
    return len(parts)


def parse_signature(text: str) -> list:
    """`"f32, f32[:], f32[:, :]"` -> types for `Kernel.specialize` (`float`/`int`: weak)."""
    return [parse_type(item) for item in _items(text)]


def _items(text: str) -> list[str]:
    """The comma-separated items of a signature, not splitting inside brackets."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    items = [part.strip() for part in parts]
    if depth != 0 or not all(items):
        raise UsageError(f"cannot read the signature {text!r}; separate the types by commas, "
                         f"{_SIG_EXAMPLE}" if text.strip() else
                         f"empty signature; {_SIG_EXAMPLE}")
    return items


def load_kernel(target: str):
    """The kernel `path.py:name` names (a @zm.kernel, a numba.cuda kernel or a plain function)."""
    path, _, name = target.rpartition(":")
    if not path or not name:
        raise UsageError(f"name a kernel as path.py:kernel, not {target!r}")
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"no such file {path}")
    spec = importlib.util.spec_from_file_location(file.stem, file)
    if spec is None:
        raise UsageError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.parent.resolve()))
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except Exception as error:
        raise UsageError(f"importing {path} failed{_where(error, file)}: "
                         f"{type(error).__name__}: {error}") from None
    if not hasattr(module, name):
        raise UsageError(f"{path} defines no {name!r}")
    kernel = getattr(module, name)
    from .runtime.kernel import Kernel
    if isinstance(kernel, Kernel):
        return kernel
    function = getattr(kernel, "py_func", kernel)
    if not inspect.isfunction(function):
        raise UsageError(f"{target} is not a kernel but {type(kernel).__name__} {kernel!r}")
    return Kernel(function)


def _where(error: BaseException, file: Path) -> str:
    """` (at path.py:line)`: the user's line that raised `error`."""
    if isinstance(error, SyntaxError) and error.lineno:
        return f" (at {file}:{error.lineno})"
    lines = [line for frame, line in traceback.walk_tb(error.__traceback__)
             if Path(frame.f_code.co_filename).resolve() == file.resolve()]
    return f" (at {file}:{lines[-1]})" if lines else ""


def _weak_notes(kernel, spec) -> list[str]:
    """A comment for each parameter that is a Python number (`float`/`int` in --sig): the IR
    carries it as f64/i64, the exact value passed, and it takes the type of what it meets."""
    names = list(inspect.signature(kernel.py_func).parameters)
    notes = []
    for name, param in zip(names, spec.params):
        if param.kind == "weak":
            kind, alone = ("float", "f32") if param.type.is_float else ("int", "i32")
            notes.append(f"// %{name}: a Python {kind}, passed as {param.type}; weakly typed, "
                         f"it takes the type of what it meets ({alone} alone)")
    return notes


def cmd_ir(args) -> int:
    kernel = load_kernel(args.target)
    spec = kernel.specialize(*parse_signature(args.sig))
    if args.stage != "llvm":
        for note in _weak_notes(kernel, spec):
            print(note)
    if args.stage in ("frontend", "all"):
        print(f"// ---- {kernel.__name__}: frontend ----")
        print(spec.ir("frontend"))
    if args.stage in ("opt", "all") or args.print_after:
        from .runtime.compile import compile
        module = compile(spec, "optimize", print_after=args.print_after, stream=sys.stdout)
        if args.stage in ("opt", "all"):
            print(f"// ---- {kernel.__name__}: after passes ----")
            print(module)
    if args.stage in ("codegen", "all"):
        print(f"// ---- {kernel.__name__}: codegen (as the backends lower it) ----")
        print(spec.ir("codegen"))
    if args.stage == "llvm":
        print(spec.llvm("cpu"))
    return 0


def cmd_ptx(args) -> int:
    kernel = load_kernel(args.target)
    print(kernel.specialize(*parse_signature(args.sig)).ptx(arch=args.arch))
    return 0


_ACTIVITIES = {"const": "Const", "active": "Active", "dup": "Duplicated",
               "noneed": "DuplicatedNoNeed"}
_ACTIVITY_ITEM = re.compile(r"^(\w+)\s+(\w.*)$")


def parse_typed_activities(text: str) -> list[tuple[str, object]]:
    """`"active f32, dup f32[:], f32[:]"` -> [("active", f32), ("dup", f32[:]), ("const", ...)]."""
    items = []
    for item in _items(text):
        match = _ACTIVITY_ITEM.match(item)
        if match is None:
            word, rest = "const", item
        elif match.group(1) in _ACTIVITIES:
            word, rest = match.groups()
        else:
            raise UsageError(f"unknown activity {match.group(1)!r} in {item!r}; write one of "
                             f"{', '.join(_ACTIVITIES)} before the type (none: const)")
        items.append((word, parse_type(rest)))
    return items


def parse_activities(text: str) -> list:
    """`"active f32, dup f32[:], f32[:]"` -> activities of types for `grad(k).specialize`."""
    from . import ad
    activities = []
    for word, spec in parse_typed_activities(text):
        cls = getattr(ad, _ACTIVITIES[word])
        activities.append(cls(spec, spec) if word in ("dup", "noneed") else cls(spec))
    return activities


def cmd_grad(args) -> int:
    from .runtime.grad import grad
    kernel = load_kernel(args.target)
    spec = grad(kernel).specialize(*parse_activities(args.sig))
    if args.ptx:
        print(spec.ptx(args.ptx))
    else:
        print(f"// ---- grad({kernel.__name__}): {args.stage} ----")
        print(spec.ir(args.stage))
    return 0


def random_arguments(typed: list, size: int, seed: int) -> list:
    """Arguments of the given activities and types, with random values: floats uniform in
    [0.5, 1.5) (away from the zeros of log, sqrt and division), integer arrays indices in
    [0, size), integer scalars `size`; every array dimension has `size` elements."""
    from . import ad
    rng = np.random.default_rng(seed)
    arguments = []
    for word, spec in typed:
        if isinstance(spec, Array):
            shape = (size,) * spec.ndim
            if spec.dtype.is_float:
                value = rng.uniform(0.5, 1.5, shape).astype(spec.dtype.dtype)
            elif spec.dtype.is_bool:
                value = rng.random(shape) < 0.5
            else:
                value = rng.integers(0, size, shape).astype(spec.dtype.dtype)
            shadow = np.zeros_like(value)
        else:
            if spec is float or spec is int:   # a Python number, weakly typed
                value = float(rng.uniform(0.5, 1.5)) if spec is float else size
            else:
                value = spec(rng.uniform(0.5, 1.5) if spec.is_float else
                             True if spec.is_bool else size)
            shadow = type(value)(0)
        if word == "const":
            arguments.append(value)
        else:
            cls = getattr(ad, _ACTIVITIES[word])
            arguments.append(cls(value, shadow) if word in ("dup", "noneed") else cls(value))
    return arguments


def cmd_check(args) -> int:
    import zymo as zm
    kernel = load_kernel(args.target)
    typed = parse_typed_activities(args.sig)
    if not any(word in ("active", "dup", "noneed") for word, _ in typed):
        raise UsageError('nothing to check: mark the inputs and outputs in --sig, e.g. '
                         '"active f64, dup f64[:], dup f64[:]"')
    size = args.size or args.grid[0] * args.block[0]
    arguments = random_arguments(typed, size, args.seed)
    if args.jvp:
        report = zm.check_jvp(kernel, args.grid, args.block, *arguments, width=args.width,
                              backend=args.backend, seed=args.seed)
    else:
        report = zm.check_grad(kernel, args.grid, args.block, *arguments, backend=args.backend,
                               seed=args.seed)
    print(report)
    return 0 if report.ok else 1


def cmd_bench(args) -> int:
    if args.output:
        _check_writable(Path(args.output))
    from .bench import run
    return run(quick=args.quick, output=args.output)


def _check_writable(path: Path) -> None:
    """Fail before a long run, not after it, when its report cannot be written to `path`."""
    folder = path.parent
    if path.is_dir():
        raise UsageError(f"--output {path}: is a folder; name a file, e.g. {path / 'bench.md'}")
    if not folder.is_dir():
        raise UsageError(f"--output {path}: no such folder {folder}")
    if not os.access(folder, os.W_OK) or path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"--output {path}: not writable")


def cmd_cache(args) -> int:
    from .runtime.cuda import cache
    if args.action == "clear":
        count = cache.clear()
        print(f"removed {count} cached file(s) from {cache.cache_dir() / 'cuda'}")
    else:
        print(cache.cache_dir())
    return 0


def cmd_evolve(args) -> int:
    from .genome import dumps
    from .runtime.evolution import evolve
    from .runtime.evolution.spec import SpecError, load_spec
    try:
        spec = load_spec(args.spec).with_overrides(
            time_budget=args.budget, population=args.population, generations=args.generations,
            seed=args.seed, backend=args.backend, workers=args.workers, minimize=args.minimize,
            mode=args.mode)
        options = spec.load()
        spec.check_checkpoint(args.resume, options["kernel"].__name__)
    except SpecError as error:
        print(f"zymo evolve: {error}", file=sys.stderr)
        return 2
    for path in (spec.checkpoint, spec.edits):
        path.parent.mkdir(parents=True, exist_ok=True)
    print(f"zymo evolve: {'resuming ' if args.resume else ''}{options['kernel'].__name__} "
          f"({spec.kernel.file.name}): population {spec.population}, {spec.generations} "
          f"generations, at most {spec.time_budget:g} s, checkpoint {spec.checkpoint}",
          file=sys.stderr, flush=True)
    with _interrupts_noted() as interrupted:
        try:
            result = evolve(**options, progress=sys.stderr)
        except Exception as error:
            if interrupted:   # Ctrl-C before the first generation: no checkpoint yet
                raise KeyboardInterrupt from error
            if not isinstance(error, (RuntimeError, ValueError)):
                raise
            # the original fails its own validation, ...
            print(f"zymo evolve: {args.spec}: {error}", file=sys.stderr)
            return 2
    # after Ctrl-C the search has saved its checkpoint and returned the best so far: report
    # that, without the minimization's extra evaluations
    minimized = (result.minimize() if spec.minimize and result.edits and not interrupted
                 else None)
    result.report(spec.report, minimized)
    result.best.save(spec.edits)
    original, best = (f"{t * 1e3:.4g} ms" for t in result.runtimes)
    print(f"{result.kernel.__name__}: {result.speedup:.2f}x on {result.backend} ({original} -> "
          f"{best}, side by side), {len(result.edits)} edit(s)")
    if minimized is not None:
        path = spec.edits.with_name(f"{spec.edits.stem}.minimized{spec.edits.suffix}")
        path.write_text(dumps(minimized.edits))
        print(f"minimized to {len(minimized.edits)} edit(s): {path}")
    again = (f"zm.load_variant(zm.{spec.derivative}(kernel), path, activities, launch)"
             if spec.derivative else "zm.load_variant(kernel, path)")
    print(f"edit list: {spec.edits} ({again} reapplies it)")
    print(f"checkpoint: {spec.checkpoint} (--resume continues it)")
    if interrupted:
        print("zymo evolve: interrupted; the checkpoint holds the last finished generation",
              file=sys.stderr, flush=True)
    # last, so that a script (or a person) finds it at the end
    print(f"report: {spec.report / 'report.md'}", flush=True)
    return 130 if interrupted else 0


@contextlib.contextmanager
def _interrupts_noted():
    """Notes a Ctrl-C that the code inside catches itself (`zm.evolve` saves its checkpoint and
    returns what it has), so that the command can still exit 130."""
    seen: list[int] = []
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield seen
        return

    def note(signum, frame):
        seen.append(signum)
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, note)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _count(least: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"expected an integer >= {least}, not {text!r}")
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, not {text!r}")
    return value


def _dims(text: str) -> tuple[int, ...]:
    """A grid or block: `4`, `4,4` or `4x4` (1 to 3 positive integers)."""
    parts = re.split(r"[,x]", text.strip().strip("()"))
    try:
        dims = tuple(int(part) for part in parts)
    except ValueError:
        dims = ()
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"expected 1 to 3 positive integers such as 64 or "
                                         f"8,8, not {text!r}")
    return dims


def _arch(text: str) -> str:
    if not re.fullmatch(r"sm_\d{2,3}[af]?", text):
        raise argparse.ArgumentTypeError(f"expected a GPU architecture such as sm_80 or sm_90, "
                                         f"not {text!r}")
    return text


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line: `zymo ir: the following arguments are required: --sig`."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


SIG_HELP = ('argument types, e.g. "float, f32[:], f32[:, :]": f16, f32, f64, i8 ... i64, u8 ... '
            'u64, bool, or numba\'s float32, int64[:, ::1], boolean ...; float and int are Python '
            'numbers (weakly typed, as a launch with 2.0 or 3 passes them)')
ACTIVITY_HELP = ('activities and types, e.g. "active f64, dup f64[:], const i32[:]": active '
                 '(a scalar whose adjoint is returned), dup (an array with a shadow), noneed, '
                 'const (the default)')


def build_parser() -> argparse.ArgumentParser:
    from .passes.pipeline import PASSES
    parser = _Parser(prog="zymo", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"zymo {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ir = sub.add_parser("ir", help="print a kernel's IR after each stage")
    ir.add_argument("target", help="path.py:kernel")
    ir.add_argument("--sig", required=True, help=SIG_HELP)
    ir.add_argument("--stage", choices=["frontend", "opt", "codegen", "all", "llvm"],
                    default="all")
    ir.add_argument("--print-after", default=None, choices=["all", *PASSES],
                    help="print the IR after this pass (or all of them)")
    ir.set_defaults(run=cmd_ir)

    ptx = sub.add_parser("ptx", help="print a kernel's PTX (no GPU needed)")
    ptx.add_argument("target", help="path.py:kernel")
    ptx.add_argument("--sig", required=True, help=SIG_HELP)
    ptx.add_argument("--arch", type=_arch, default="sm_90", help="default: sm_90")
    ptx.set_defaults(run=cmd_ptx)

    gr = sub.add_parser("grad", help="print a kernel's reverse-mode derivative")
    gr.add_argument("target", help="path.py:kernel")
    gr.add_argument("--sig", required=True, help=ACTIVITY_HELP)
    gr.add_argument("--show", action="store_true", help="print the derivative's IR (default)")
    gr.add_argument("--stage", choices=["ad", "opt"], default="opt",
                    help="ad: as the transform made it; opt: optimized again")
    gr.add_argument("--ptx", type=_arch, default=None, metavar="ARCH",
                    help="print PTX for ARCH instead")
    gr.set_defaults(run=cmd_grad)

    check = sub.add_parser(
        "check", help="check a kernel's derivatives against finite differences",
        description="Launch zm.grad (or, with --jvp, zm.jvp) of the kernel on random inputs of "
                    "the given types and compare with central finite differences in float64 "
                    "(zm.check_grad / zm.check_jvp); exit code 1 when a row fails. Floats are "
                    "uniform in [0.5, 1.5), integer arrays indices in [0, size), integer "
                    "scalars the size.")
    check.add_argument("target", help="path.py:kernel")
    check.add_argument("--sig", required=True, help=ACTIVITY_HELP)
    check.add_argument("--grid", type=_dims, required=True, help="blocks, e.g. 4 or 4,4")
    check.add_argument("--block", type=_dims, required=True, help="threads, e.g. 64 or 8,8")
    check.add_argument("--size", type=_count(1), metavar="N",
                       help="elements along each array dimension (default: the threads along "
                            "x, grid x block)")
    check.add_argument("--jvp", action="store_true", help="check forward mode (zm.jvp)")
    check.add_argument("--width", type=_count(1), default=1, metavar="W",
                       help="with --jvp: tangents per launch")
    check.add_argument("--seed", type=_count(0), default=0, metavar="N")
    check.add_argument("--backend", choices=["cpu", "interp", "cuda"])
    check.set_defaults(run=cmd_check)

    bench = sub.add_parser("bench", help="run the benchmark suite and print a table")
    bench.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    bench.add_argument("--output", default=None, metavar="FILE",
                       help="also write the Markdown report to FILE")
    bench.set_defaults(run=cmd_bench)

    ev = sub.add_parser("evolve", help="evolve a kernel as a spec file says (GEVO)",
                        description="Evolve a kernel as the spec file (.toml or .json) says; "
                                    "the flags override the spec.")
    ev.add_argument("spec", help="the spec file: kernel, inputs, launch, sizes, outputs")
    ev.add_argument("--budget", type=_seconds, metavar="SECONDS", help="time budget")
    ev.add_argument("--population", type=_count(1), metavar="N")
    ev.add_argument("--generations", type=_count(0), metavar="N")
    ev.add_argument("--seed", type=_count(0), metavar="N")
    ev.add_argument("--backend", choices=["cpu", "cuda", "interp"])
    ev.add_argument("--workers", type=_count(1), metavar="N", help="evaluation processes")
    ev.add_argument("--resume", action="store_true", help="continue from the checkpoint")
    ev.add_argument("--mode", choices=["generational", "steady"],
                    help="steady: each finished evaluation enters the population and a new "
                         "child is submitted (no generation waits for its slowest evaluation)")
    ev.add_argument("--minimize", action=argparse.BooleanOptionalAction, default=None,
                    help="minimize the best edit list and split independent from epistatic "
                         "edits (GEVO's analysis)")
    ev.set_defaults(run=cmd_evolve)

    cache = sub.add_parser("cache", help="the cache of compiled GPU code")
    cache.add_argument("action", choices=["clear", "dir"],
                       help="clear: delete the cached PTX and cubin; dir: print where they are")
    cache.set_defaults(run=cmd_cache)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except UsageError as error:
        print(f"zymo: {error}", file=sys.stderr)
        return 2
    except CompileError as error:
        print(error, file=sys.stderr)
        return 1
    except LaunchError as error:
        print(f"zymo: {error}", file=sys.stderr)
        return 2
    except KernelRuntimeError as error:   # out of bounds, a race, no CUDA driver, ...
        print(f"zymo: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("zymo: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
