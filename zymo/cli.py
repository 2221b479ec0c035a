"""The `zymo` command: inspect a kernel's IR (`zymo ir`), run the benchmarks (`zymo bench`) and
evolve a kernel as a spec file says (`zymo evolve`)."""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
from pathlib import Path

from .diagnostics import CompileError
from .ir import types as T
from .ir.types import Array

_SCALARS = {t.name: t for t in T.SCALARS}
_SIG_ITEM = re.compile(r"^\s*(\w+)\s*(\[([:,\s1]*)\])?\s*$")


def parse_signature(text: str) -> list:
    """`"f32, f32[:], f32[:, :]"` -> types for `Kernel.specialize` (`float`/`int`: weak)."""
    specs = []
    for item in filter(None, (part.strip() for part in _split_top(text))):
        match = _SIG_ITEM.match(item)
        if not match:
            raise SystemExit(f"zymo: cannot read the type {item!r} (write e.g. f32, i64[:], "
                             f"f64[:, :], float, int)")
        name, dims = match.group(1), match.group(3)
        if name in ("float", "int") and dims is None:
            specs.append(float if name == "float" else int)
            continue
        if name not in _SCALARS:
            raise SystemExit(f"zymo: unknown type {name!r}; known: {', '.join(_SCALARS)}")
        scalar = _SCALARS[name]
        specs.append(scalar if dims is None else Array(scalar, dims.count(":"), "global", "C"))
    return specs


def _split_top(text: str) -> list[str]:
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
    return parts


def load_kernel(target: str):
    path, _, name = target.rpartition(":")
    if not path or not name:
        raise SystemExit(f"zymo: name a kernel as path.py:kernel, not {target!r}")
    file = Path(path)
    if not file.exists():
        raise SystemExit(f"zymo: no such file {path}")
    spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.path.insert(0, str(file.parent.resolve()))
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    if not hasattr(module, name):
        raise SystemExit(f"zymo: {path} defines no {name!r}")
    kernel = getattr(module, name)
    from .runtime.kernel import Kernel
    if not isinstance(kernel, Kernel):
        kernel = Kernel(getattr(kernel, "py_func", kernel))
    return kernel


def cmd_ir(args) -> int:
    kernel = load_kernel(args.target)
    spec = kernel.specialize(*parse_signature(args.sig))
    if args.stage in ("frontend", "all"):
        print(f"// ---- {kernel.__name__}: frontend ----")
        print(spec.ir("frontend"))
    if args.stage in ("opt", "all") or args.print_after:
        from .ir.module import Module  # noqa: F401
        from .ad import expand_derivative_calls
        from .passes.pipeline import run_pipeline
        from .runtime.kernel import _copy_module
        module = run_pipeline(expand_derivative_calls(_copy_module(spec.module)),
                              print_after=args.print_after, stream=sys.stdout)
        if args.stage in ("opt", "all"):
            print(f"// ---- {kernel.__name__}: after passes ----")
            print(module)
    if args.stage in ("codegen", "all"):
        print(f"// ---- {kernel.__name__}: codegen (as the backends lower it) ----")
        print(spec.ir("codegen"))
    if args.stage == "llvm":
        print(spec.llvm("cpu"))
    return 0


_ACTIVITIES = {"const": "Const", "active": "Active", "dup": "Duplicated",
               "noneed": "DuplicatedNoNeed"}


def parse_activities(text: str) -> list:
    """`"active f32, dup f32[:], f32[:]"` -> activities of types for `grad(k).specialize`."""
    from . import ad
    items = []
    for item in filter(None, (part.strip() for part in _split_top(text))):
        word, _, rest = item.partition(" ")
        if word not in _ACTIVITIES:
            word, rest = "const", item
        (spec,) = parse_signature(rest)
        cls = getattr(ad, _ACTIVITIES[word])
        items.append(cls(spec, spec) if word in ("dup", "noneed") else cls(spec))
    return items


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


def bench_dir() -> Path:
    candidates = [os.environ.get("ZYMO_BENCH_DIR"),
                  str(Path(__file__).resolve().parents[1] / "bench"), "bench"]
    for candidate in candidates:
        if candidate and (Path(candidate) / "run.py").exists():
            return Path(candidate)
    raise SystemExit("zymo: cannot find the benchmark suite (bench/run.py); run from a clone "
                     "of the repository or set ZYMO_BENCH_DIR")


def cmd_bench(args) -> int:
    directory = bench_dir()
    sys.path.insert(0, str(directory.parent))
    spec = importlib.util.spec_from_file_location("zymo_bench_run", directory / "run.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.main(quick=args.quick, output=args.output)


def cmd_cache(args) -> int:
    from .runtime.cuda import cache
    if args.action == "clear":
        count = cache.clear()
        print(f"removed {count} cached file(s) from {cache.cache_dir() / 'cuda'}")
    else:
        print(cache.cache_dir())
    return 0


def cmd_evolve(args) -> int:
    from .evolve import dumps
    from .runtime.evolution import evolve
    from .runtime.evolution.spec import SpecError, load_spec
    try:
        spec = load_spec(args.spec).with_overrides(
            time_budget=args.budget, population=args.population, generations=args.generations,
            seed=args.seed, backend=args.backend, workers=args.workers, minimize=args.minimize)
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
    try:
        result = evolve(**options, progress=sys.stderr)
    except (RuntimeError, ValueError) as error:    # the original fails its own validation, ...
        print(f"zymo evolve: {args.spec}: {error}", file=sys.stderr)
        return 2
    minimized = result.minimize() if spec.minimize and result.edits else None
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
    print(f"report: {spec.report / 'report.md'}")
    print(f"checkpoint: {spec.checkpoint} (--resume continues it)")
    return 0


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


def not_yet(name: str):
    def run(args) -> int:
        print(f"zymo {name}: not available yet in this version", file=sys.stderr)
        return 2

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="zymo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    ir = sub.add_parser("ir", help="print a kernel's IR after each stage")
    ir.add_argument("target", help="path.py:kernel")
    ir.add_argument("--sig", required=True,
                    help='argument types, e.g. "float, f32[:], f32[:]" (float/int: Python numbers)')
    ir.add_argument("--stage", choices=["frontend", "opt", "codegen", "all", "llvm"],
                    default="all")
    ir.add_argument("--print-after", default=None, help="a pass name, or 'all'")
    ir.set_defaults(run=cmd_ir)
    bench = sub.add_parser("bench", help="run the benchmark suite and print a table")
    bench.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    bench.add_argument("--output", default=None, help="write the Markdown report here")
    bench.set_defaults(run=cmd_bench)
    cache = sub.add_parser("cache", help="the cache of compiled GPU code")
    cache.add_argument("action", choices=["clear", "dir"],
                       help="clear: delete the cached PTX and cubin; dir: print where they are")
    cache.set_defaults(run=cmd_cache)
    gr = sub.add_parser("grad", help="print a kernel's reverse-mode derivative")
    gr.add_argument("target", help="path.py:kernel")
    gr.add_argument("--sig", required=True,
                    help='activities and types, e.g. "active f32, dup f32[:], const i32[:]" '
                         '(no word: const)')
    gr.add_argument("--show", action="store_true", help="print the derivative's IR (default)")
    gr.add_argument("--stage", choices=["ad", "opt"], default="opt",
                    help="ad: as the transform made it; opt: optimized again")
    gr.add_argument("--ptx", default=None, metavar="ARCH", help="print PTX for ARCH instead")
    gr.set_defaults(run=cmd_grad)
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
    ev.add_argument("--minimize", action=argparse.BooleanOptionalAction, default=None,
                    help="minimize the best edit list and split independent from epistatic "
                         "edits (GEVO's analysis)")
    ev.set_defaults(run=cmd_evolve)
    for name in ("ptx", "check"):
        sub.add_parser(name, help="(not available yet)").set_defaults(run=not_yet(name))
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except CompileError as error:
        print(error, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
