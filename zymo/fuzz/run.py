"""Run a program on every backend, compare the results, check its derivatives; in worker
processes with a per-program timeout.

Comparison (against the first backend, the interpreter by default):
- integers and booleans exactly;
- floats within `ulps * eps(dtype) * max(|a|, |b|, MAGNITUDE)`, NaN equal to NaN, where
  `ulps` is 16 for programs of + - * / fma min max only and 512 for programs that call math
  functions (libdevice, LLVM's CPU libm and NumPy differ by a few ulp, and the generator's
  bounded chains carry that along); `MAGNITUDE` (16) is the size of the values the program
  works with (the generator squashes anything larger), so a difference left after a
  cancellation is measured against the operands it came from, not the small result;
- float atomic accumulators within `ulps * eps * (number of threads) * MAGNITUDE` (the order of
  the additions changes the rounding);
- arrays written at atomically claimed slots as sorted multisets (which thread gets which slot
  depends on the interleaving).

Derivatives (programs generated with `grad=True`, float64): `zm.check_grad` (reverse mode
against central finite differences, plus the dot-product test against `zm.jvp`) and
`zm.check_jvp` at widths 1 and 3, on each backend, with float arrays Duplicated.

Outcomes that are not findings: the program runs and agrees; a `CompileError` from every
backend alike is "rejected" (the generator wrote something the language does not have: a
fuzzer bug, counted apart); a clean `CompileError` from `zm.grad`/`zm.jvp` is
"grad-unsupported" (zymo saying it cannot, which is its promise).
"""
from __future__ import annotations

import importlib.util
import os
import pickle
import select
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from dataclasses import dataclass, field

import numpy as np

from .grammar import DTYPES, ArraySpec, Program

MAGNITUDE = 16.0
FINDING_KINDS = ("mismatch-primal", "mismatch-grad", "mismatch-jvp", "crash", "crash-grad",
                 "crash-jvp", "hang", "race-reported", "interp-error", "launch-error")


@dataclass
class Finding:
    kind: str
    seed: int
    backend: str
    message: str
    grad: bool = False
    source: str = ""
    shrunk: str = ""
    regression: str = ""

    def signature(self) -> tuple:
        """What must stay the same while a program shrinks."""
        return (self.kind, self.backend)


@dataclass
class Outcome:
    """The result of one program: findings, plus the non-finding statuses for the report."""
    seed: int
    findings: list = field(default_factory=list)
    status: str = "ok"            # ok, rejected, grad-unsupported
    note: str = ""
    seconds: float = 0.0


# ---- inputs -------------------------------------------------------------------------------------
def _buffer_name(spec: ArraySpec) -> str:
    return spec.base or spec.name


def buffer_layout(program: Program) -> dict[str, tuple[str, int, str]]:
    """buffer name -> (dtype, length, role of its first array)."""
    layout: dict = {}
    for spec in program.arrays:
        name = _buffer_name(spec)
        need = spec.start + (spec.length - 1) * spec.step + 1
        dtype, length, role = layout.get(name, (spec.dtype, 0, spec.role))
        layout[name] = (dtype, max(length, need), role)
    return layout


def make_buffers(program: Program, data_seed: int) -> dict[str, np.ndarray]:
    """Fresh random contents for every buffer, the same for every backend (and for every
    shrinking step: each buffer's numbers come from its own name)."""
    buffers = {}
    for name, (dtype, length, role) in buffer_layout(program).items():
        rng = np.random.default_rng([data_seed, zlib.crc32(name.encode())])
        buffers[name] = _fill(rng, DTYPES[dtype], length, role)
    return buffers


def _fill(rng, dtype, length: int, role: str) -> np.ndarray:
    dtype = np.dtype(dtype)
    if role == "counter":
        return np.zeros(length, dtype)
    if dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, length).astype(dtype)
    if dtype.kind == "b":
        return rng.random(length) < 0.5
    info = np.iinfo(dtype)
    small = rng.integers(max(info.min, -9), 10, length)
    wide = rng.integers(info.min, int(info.max) + 1, length, dtype=dtype)
    special = rng.choice(np.array([info.min, info.max, 0, 1, -1 if info.min else 2],
                                  dtype=np.int64 if info.min else np.uint64), length)
    pick = rng.random(length)
    out = np.where(pick < 0.5, small.astype(dtype), np.where(pick < 0.8, wide,
                                                             special.astype(dtype)))
    return out.astype(dtype)


def arguments(program: Program, buffers: dict, params: list[str], view) -> list:
    """The launch's argument list: array views cut from the buffers by `view(buffer, spec)`."""
    specs = {spec.name: spec for spec in program.arrays}
    scalars = {name: value for name, _, value in program.scalars}
    args = []
    for name in params:
        if name in specs:
            spec = specs[name]
            args.append(view(buffers[_buffer_name(spec)], spec))
        else:
            args.append(scalars[name])
    return args


def host_view(buffer: np.ndarray, spec: ArraySpec) -> np.ndarray:
    stop = spec.start + (spec.length - 1) * spec.step + 1
    return buffer[spec.start:stop:spec.step]


class GpuView:
    """A strided window of a `zm.DeviceArray`, through `__cuda_array_interface__` (so two
    arguments can overlap on the GPU as they do on the host)."""

    def __init__(self, base, spec: ArraySpec):
        self.base = base
        itemsize = base.dtype.itemsize
        self.__cuda_array_interface__ = {
            "shape": (spec.length,), "typestr": base.dtype.str,
            "data": (base.data + spec.start * itemsize, False),
            "strides": (spec.step * itemsize,), "version": 3, "stream": 1}


# ---- one backend ---------------------------------------------------------------------------
def launch(kernel, program: Program, backend: str, data_seed: int):
    """Run on `backend`; the buffers after the launch (host arrays)."""
    buffers = make_buffers(program, data_seed)
    params = program.params()
    if backend == "cuda":
        import zymo as zm
        device = {name: zm.to_device(buf) for name, buf in buffers.items()}
        args = arguments(program, device, params, GpuView)
        kernel.on("cuda")[program.blocks, program.block](*args)
        zm.synchronize()
        return {name: buf.copy_to_host() for name, buf in device.items()}
    args = arguments(program, buffers, params, host_view)
    kernel.on(backend)[program.blocks, program.block](*args)
    return buffers


def _classify_exception(error: BaseException, backend: str) -> str:
    from .. import diagnostics as d
    if isinstance(error, d.RaceError):
        return "race-reported"
    if isinstance(error, d.KernelRuntimeError):
        return "interp-error" if backend == "interp" else "crash"
    if isinstance(error, d.LaunchError):
        return "launch-error"
    return "crash"


def _describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    if not isinstance(error, Exception) or type(error).__module__.startswith("zymo.diag"):
        return text[:2000]
    frames = traceback.extract_tb(error.__traceback__)[-3:]
    where = "; ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in frames)
    return f"{text[:1600]} [at {where}]"


# ---- comparison --------------------------------------------------------------------------------
def compare(program: Program, want: dict, got: dict) -> str | None:
    """Why two backends' buffers differ, or None."""
    layout = buffer_layout(program)
    ulps = 512 if program.transcendental or program.funcs else 16
    for name, (dtype, _, role) in layout.items():
        a, b = want[name], got[name]
        if role == "slots":
            a, b = np.sort(a), np.sort(b)
        if np.dtype(DTYPES[dtype]).kind != "f":
            bad = np.flatnonzero(a != b)
        else:
            eps = float(np.finfo(DTYPES[dtype]).eps)
            scale = MAGNITUDE * (program.size * 16 if role == "acc" else 1)
            tolerance = ulps * eps * np.maximum(np.maximum(abs(a), abs(b)), scale)
            with np.errstate(invalid="ignore"):
                close = (abs(a.astype(np.float64) - b) <= tolerance) | (a == b)
            close |= np.isnan(a) & np.isnan(b)
            bad = np.flatnonzero(~close)
        if bad.size:
            k = int(bad[0])
            return (f"{name}[{k}]: {a[k]!r} vs {b[k]!r} ({bad.size} of {a.size} differ"
                    f"{', compared sorted' if role == 'slots' else ''})")
    return None


def check_kernel(kernel, program: Program, backends=("interp", "cpu"), grad: bool = False,
                 data_seed: int | None = None) -> Outcome:
    """Every check on one compiled kernel (the worker calls this; so do regression tests)."""
    from ..diagnostics import CompileError
    data_seed = program.seed if data_seed is None else data_seed
    outcome = Outcome(program.seed)
    results, compile_errors = {}, {}
    for backend in backends:
        try:
            results[backend] = launch(kernel, program, backend, data_seed)
        except CompileError as error:
            compile_errors[backend] = str(error)
        except Exception as error:  # noqa: BLE001 - anything else is what we look for
            kind = _classify_exception(error, backend)
            outcome.findings.append(Finding(kind, program.seed, backend, _describe(error)))
    if compile_errors:
        if len(compile_errors) == len(backends):
            outcome.status, outcome.note = "rejected", next(iter(compile_errors.values()))
            return outcome
        for backend, text in compile_errors.items():
            outcome.findings.append(Finding("crash", program.seed, backend,
                                            "CompileError on this backend only: " + text))
    reference = backends[0]
    if reference in results:
        for backend in backends[1:]:
            if backend in results:
                why = compare(program, results[reference], results[backend])
                if why:
                    outcome.findings.append(Finding("mismatch-primal", program.seed, backend,
                                                    f"{backend} vs {reference}: {why}"))
    if grad and program.grad and not outcome.findings:
        check_derivatives(kernel, program, backends, data_seed, outcome)
    return outcome


def activities(program: Program, buffers: dict) -> list:
    """float arrays Duplicated (zero shadows: check_grad seeds its own), the rest Const."""
    import zymo as zm

    def view(buffer, spec):
        array = host_view(buffer, spec)
        if array.dtype.kind == "f":
            return zm.Duplicated(array, np.zeros_like(array))
        return array
    return arguments(program, buffers, program.params(), view)


def check_derivatives(kernel, program: Program, backends, data_seed: int,
                      outcome: Outcome) -> None:
    import zymo as zm
    from ..diagnostics import CompileError
    grid, block = program.blocks, program.block
    for backend in backends:
        checks = (("grad", lambda args: zm.check_grad(kernel, grid, block, *args,
                                                      backend=backend, seed=data_seed)),
                  ("jvp", lambda args: zm.check_jvp(kernel, grid, block, *args, width=1,
                                                    backend=backend, seed=data_seed)),
                  ("jvp", lambda args: zm.check_jvp(kernel, grid, block, *args, width=3,
                                                    backend=backend, seed=data_seed)))
        for mode, check in checks:
            args = activities(program, make_buffers(program, data_seed))
            try:
                report = check(args)
            except CompileError as error:
                outcome.status = "grad-unsupported"
                outcome.note = str(error)[:400]
                return
            except Exception as error:  # noqa: BLE001
                outcome.findings.append(Finding("crash-" + mode, program.seed, backend,
                                                _describe(error), grad=True))
                continue
            if not report.ok:
                outcome.findings.append(Finding("mismatch-" + mode, program.seed, backend,
                                                str(report)[-1500:], grad=True))


# ---- worker processes ----------------------------------------------------------------------------
def load_kernel(program: Program, directory: str):
    """Write the program as a module file (zymo reads kernels' source through `inspect`)
    and import it."""
    name = f"zymo_fuzz_{program.seed}_{abs(hash(program.module_source())) % 10**8}"
    path = os.path.join(directory, name + ".py")
    with open(path, "w") as handle:
        handle.write(program.module_source())
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.kern


def run_one(program: Program, backends, grad: bool, directory: str) -> Outcome:
    start = time.perf_counter()
    try:
        kernel = load_kernel(program, directory)
        outcome = check_kernel(kernel, program, tuple(backends), grad)
    except Exception as error:  # noqa: BLE001 - a crash outside any launch
        outcome = Outcome(program.seed, [Finding("crash", program.seed, "-", _describe(error))])
    outcome.seconds = time.perf_counter() - start
    for finding in outcome.findings:
        finding.grad = program.grad
        finding.source = program.module_source()
    return outcome


def _send(stream, value) -> None:
    data = pickle.dumps(value)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _receive(stream):
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    (length,) = struct.unpack("<Q", head)
    return pickle.loads(stream.read(length))


def serve(backends, grad: bool) -> None:
    """The worker's loop: programs in on stdin, outcomes out on the original stdout (the
    kernel-facing code's own prints go to stderr)."""
    results = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    requests = sys.stdin.buffer
    directory = tempfile.mkdtemp(prefix="zymo-fuzz-")
    while True:
        try:
            program = _receive(requests)
        except EOFError:
            return
        _send(results, run_one(program, backends, grad, directory))


class Worker:
    """A process that runs programs one at a time; killed and restarted after a hang or a
    crash of the process itself (a segfault in generated code is a finding too)."""

    def __init__(self, backends, grad: bool):
        self.backends, self.grad = tuple(backends), grad
        self.process = None
        self.start()

    def start(self) -> None:
        command = [sys.executable, "-m", "zymo.fuzz.worker", ",".join(self.backends),
                   "grad" if self.grad else "primal"]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)

    def run(self, program: Program, timeout: float) -> Outcome:
        try:
            _send(self.process.stdin, program)
            ready, _, _ = select.select([self.process.stdout], [], [], timeout)
            if ready:
                return _receive(self.process.stdout)
            kind, message = "hang", f"no result within {timeout:.0f} s"
        except (EOFError, BrokenPipeError, OSError):
            self.process.wait(5)
            kind = "crash"
            message = f"the worker process died (exit code {self.process.returncode})"
        self.stop(kill=True)
        self.start()
        finding = Finding(kind, program.seed, ",".join(self.backends), message,
                          grad=program.grad, source=program.module_source())
        return Outcome(program.seed, [finding], seconds=timeout)

    def stop(self, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


def gpu_available() -> bool:
    """As tests/gpu/conftest.py decides: cuda-bindings importable and a device present."""
    try:
        import cuda.bindings  # noqa: F401
        from ..runtime.cuda import driver
        return driver.device_count() > 0
    except Exception:  # noqa: BLE001 - no bindings, no driver, no device
        return False


def run_batch(programs, backends=("interp", "cpu"), grad: bool = False, timeout: float = 60.0,
              time_budget: float | None = None, on_outcome=None) -> list[Outcome]:
    """Run programs in one worker process; stop early when `time_budget` seconds are spent."""
    worker = Worker(backends, grad)
    start = time.perf_counter()
    outcomes = []
    try:
        for program in programs:
            if time_budget is not None and time.perf_counter() - start > time_budget:
                break
            outcome = worker.run(program, timeout)
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(program, outcome)
    finally:
        worker.stop()
    return outcomes
