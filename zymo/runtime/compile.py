"""The compile driver: `compile(job, stop_at)` runs a `Job`'s stages up to `stop_at`, each once.

IR stages: "frontend" (Python -> IR) or "derive" (a transform of the primal's optimized IR),
"optimize" (the pass pipeline), "codegen"; then a target: "cpu", "interp", "cuda",
"cuda-aliased" (without `noalias`, for overlapping arguments) or "ptx-<arch>". Results are kept
on the job, each stage is timed in `job.timings`, and under ZYMO_VERIFY=1 the IR no pass manager
checks (the frontend's, a transform's) is verified. Kernels, `zm.grad`, `zm.jvp`, evolution
variants and the CLI compile through here: the order of the stages is written once."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

from ..diagnostics import LaunchError
from ..frontend import lower_kernel
from ..ir.traits import GridSync
from ..ops.foreign import linked_sources
from ..ir.verifier import check
from ..passes.manager import verify_from_env


@dataclass(frozen=True)
class Step:
    """A stage: `make(job, input, **options)`, `input` being stage `after`'s result (None:
    nothing), timed as `job.timings[timing]` (if not empty)."""

    after: str | None
    make: Callable
    timing: str
    verify: bool = False   # what it makes is checked by no pass manager


def frontend(job, _nothing):
    module = lower_kernel(job.kernel.py_func,
                          list(getattr(job, "signature", None) or job.params),
                          captured=getattr(job, "captured", ()),
                          checked=bool(getattr(job.kernel, "boundscheck", False)),
                          fastmath=bool(getattr(job.kernel, "fastmath", False)))
    link = getattr(job.kernel, "link", ())
    if link:   # numba's cuda.jit(link=...): what the kernel's foreign functions come from
        module.kernel.attrs["link"] = tuple(link)
    return module


def optimize(job, module, **options):
    # derivatives of device functions are built first, so that they are optimized in place;
    # each callee is optimized alone by this same stage before it is differentiated
    from ..ad import expand_derivative_calls
    from ..passes.pipeline import run_pipeline
    return run_pipeline(expand_derivative_calls(module.clone(), _optimize_alone), **options)


def _optimize_alone(module):
    return compile(Job(None, (), {"frontend": module}), "optimize")


def codegen(job, module):
    from ..passes.pipeline import prepare_for_codegen
    return prepare_for_codegen(module, noalias=job.noalias)


PRIMAL = {"frontend": Step(None, frontend, "frontend", verify=True),
          "optimize": Step("frontend", optimize, "passes"),
          "codegen": Step("optimize", codegen, "codegen")}


def derived(timing: str) -> dict[str, Step]:
    """A derivative's stages: `job.derive(ir)` of `job.primal`'s optimized IR, then a kernel's."""
    return {"primal": Step(None, lambda job, _: job.primal.optimized, ""),
            "derive": Step("primal", lambda job, ir: job.derive(ir), timing, verify=True),
            "optimize": Step("derive", optimize, "passes"),
            "codegen": PRIMAL["codegen"]}


class Job:
    """What to compile (a kernel, its parameters, its `steps`) and the results made so far;
    a job whose IR is made elsewhere is given its "frontend" result."""

    steps: dict[str, Step] = PRIMAL
    # whether codegen may take distinct array arguments as apart: a primal kernel's CPU build
    # for overlapping arrays lowers the same IR, so only derivatives (the launch chose the
    # variant by checking the arrays) say so
    noalias = False

    def __init__(self, kernel, params: tuple, results: dict | None = None):
        self.kernel, self.params = kernel, params
        self.results: dict[str, object] = dict(results or {})
        self.timings: dict[str, float] = {}

    @property
    def module(self):
        """The IR before optimization: the frontend's, or the transform's."""
        return compile(self, "derive" if "derive" in self.steps else "frontend")

    @property
    def optimized(self):
        return compile(self, "optimize")

    @property
    def codegen(self):
        """The optimized IR as the backends lower it."""
        return compile(self, "codegen")

    def compiled(self, backend: str):
        return compile(self, backend)


def compile(job: Job, stop_at: str = "codegen", **options):
    """Stage `stop_at`'s result, made after the stages before it; `options` go to that stage
    alone (the CLI's `print_after` and `stream` to "optimize"). A stage is made once per job
    even when several threads ask at once (an evaluation pool of threads compiling one
    kernel): the stages after the frontend work on its IR, which two concurrent runs would
    both change (a search's baseline failed with a KeyError from that)."""
    result = job.results.get(stop_at)
    if result is not None:
        return result
    with _lock_of(job):
        result = job.results.get(stop_at)
        if result is None:
            step = job.steps.get(stop_at) or _target(stop_at)
            source = None if step.after is None else compile(job, step.after)   # timed apart
            start = time.perf_counter()
            result = step.make(job, source, **options)
            if step.timing:
                job.timings[step.timing] = time.perf_counter() - start
            if step.verify and verify_from_env():
                check(result, f"the {stop_at} stage")
            job.results[stop_at] = result
    return result


_locks_made = threading.Lock()


def _lock_of(job: Job) -> threading.RLock:
    """The job's compile lock (re-entrant: a stage compiles the stages before it)."""
    lock = job.__dict__.get("_compile_lock")
    if lock is None:
        with _locks_made:
            lock = job.__dict__.setdefault("_compile_lock", threading.RLock())
    return lock


def _cpu(job, module):
    from ..backend import cpu
    if module.any_op(GridSync):
        # the CPU backend runs blocks independently, a range per core, and cannot hold every
        # block at a grid barrier; the interpreter runs them all in lockstep
        return Interpreted(job, compile(job, "optimize"))
    return cpu.compile(module, boundscheck=job.kernel.boundscheck)


def _cuda(job, _codegen, noalias: bool = True):
    from .cuda import cache, driver   # the disk cache keys on the job's codegen IR
    return cache.compile_program(job, driver.current_device().arch, noalias=noalias,
                                 sources=linked_sources(job.codegen))


class Interpreted:
    """The "interp" target: the optimized IR, run by the reference interpreter."""

    def __init__(self, job, module):
        self.module = module

    def launch(self, grid, block, args, shared: int = 0) -> None:
        from ..backend import interp
        interp.run(self.module, grid, block, args, shared_bytes=shared)


TARGETS = {"cpu": Step("codegen", _cpu, "compile-cpu"),
           "interp": Step("optimize", Interpreted, "compile-interp"),
           "cuda": Step("codegen", _cuda, "compile-cuda"),
           "cuda-aliased": Step("codegen", lambda job, ir: _cuda(job, ir, noalias=False),
                                "compile-cuda-aliased")}


def _target(name: str) -> Step:
    if name.startswith("ptx-"):
        def ptx(job, module, arch=name[len("ptx-"):]):
            from ..backend import nvptx
            return nvptx.compile(module, arch=arch, fastmath=job.kernel.fastmath,
                                 boundscheck=job.kernel.boundscheck,
                                 max_registers=job.kernel.max_registers)
        return Step("codegen", ptx, f"compile-{name}")
    if name not in TARGETS:
        raise LaunchError(f"unknown backend {name!r}")
    return TARGETS[name]
