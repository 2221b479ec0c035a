"""The `zymo` command: inspect a kernel's IR (`zymo ir`) and run the benchmarks (`zymo bench`)."""
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
    for name in ("ptx", "evolve", "check"):
        sub.add_parser(name, help="(not available yet)").set_defaults(run=not_yet(name))
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except CompileError as error:
        print(error, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
