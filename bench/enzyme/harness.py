"""What the Enzyme-suite ports share on top of the `Case` contract: arrays on a device, the
primal compiled the way `zm.grad` compiles the derivative, the three compiled programs of a
kernel launched without host-side checks (XSBench, RSBench: timings measure the GPU), the
gate from `zm.check_grad`, and the comparison with a CUDA C version."""
from __future__ import annotations

import numpy as np

import zymo as zm
from bench.enzyme.case import Gate
from zymo.runtime.grad import DERIVATIVE_REGISTERS, _tapes, tape_bytes_per_thread
from zymo.runtime.kernel import Specialization, _pass_args, with_max_registers


def backend_of(device: str) -> str:
    return "cpu" if device == "cpu" else "cuda"


def on_device(array, device: str):
    """A copy of `array` where the case runs: a NumPy copy on "cpu", a CuPy array on "cuda"
    (the CUDA C versions take it too). A copy on the CPU as well, so that a state never
    shares memory with the host inputs it was made from (a gradient consumes its seeds)."""
    if device == "cpu":
        return np.array(array)
    import cupy as cp
    return cp.asarray(array)


def zeros(device: str, shape, dtype=np.float64):
    return on_device(np.zeros(shape, dtype), device)


def l2_scrub(cp):
    """A device buffer twice the size of the L2: writing it between timed launches starts
    each from a cold L2, so that what the previous launch (or a seed copy) left there is not
    read for free."""
    l2 = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["l2CacheSize"]
    return cp.empty(2 * max(l2, 1 << 20), cp.uint8)


def keep_seeds(state, shadows) -> None:
    """Keep a copy of each seeded shadow in `shadows` (as they are now) for `reseed`."""
    state.seeds = [(shadow, shadow.copy()) for shadow in shadows]


def reseed(state) -> None:
    """Put the seeds `keep_seeds` kept back into their shadows (queued on the device)."""
    for shadow, seed in state.seeds:
        shadow[...] = seed


def to_host(array) -> np.ndarray:
    return array if isinstance(array, np.ndarray) else array.get()


# the register cap of the gradients timed (`python -m bench.enzyme.run --grad-registers N`,
# or "auto": zm.grad times the candidate caps at each gradient's first launch; LBM's, made by
# zm.Tape, keeps zm.grad's default)
GRAD_REGISTERS: int | str = DERIVATIVE_REGISTERS
# the gradients `gradient_of` made (cleared by the runner before each case): what "auto"
# measured is reported from them
GRADIENTS: list = []


def as_derivative(kernel):
    """The kernel under the register cap the gradients get (a derivative also goes through
    the optimizer once more after the transform, which leaves a primal unchanged): its time
    against the primal's tells the cap's cost from the derivative's. A kernel given its own
    cap keeps it; under "auto", DERIVATIVE_REGISTERS (the largest candidate)."""
    if kernel.max_registers is not None:
        return kernel
    return with_max_registers(kernel, DERIVATIVE_REGISTERS if GRAD_REGISTERS == "auto"
                              else GRAD_REGISTERS)


def gradient_of(kernel, backend: str):
    """`zm.grad` of `kernel` on `backend`, under GRAD_REGISTERS unless it has its own cap."""
    gradient = zm.grad(kernel.on(backend), max_registers=kernel.max_registers or GRAD_REGISTERS)
    GRADIENTS.append(gradient)
    return gradient


def tunings() -> list[str]:
    """What `max_registers="auto"` measured for the gradients made since GRADIENTS was
    cleared, a line per launch signature and shape."""
    return [record.summary() for gradient in GRADIENTS for record in gradient.tuning.values()]


class AsDerivative(Specialization):
    """A specialization of `as_derivative(kernel)` that also takes distinct array arguments
    as `noalias` in code generation, as a derivative whose launch checked that they do not
    overlap does. Only `Programs` launches it: it passes no launch's overlap check, so its
    arrays must be distinct."""

    noalias = True


def launched_specializations(kernel, derivative_kernel, grad_kernel, args) -> dict:
    """The specializations of a case launching kernels through `kernel[config](...)`: the
    primal's and the primal-as-derivative's for `args`, and the gradient's once it ran."""
    out = {"primal": kernel.specialization_for(args),
           "primal as derivative": derivative_kernel.specialization_for(args)}
    spec = getattr(grad_kernel, "last", None)
    if spec is not None:
        out["gradient"] = spec
    return out


def launched_tape_bytes(grad_kernel, args, threads: int) -> int:
    """The tape the gradient kernel's last launch allocated over `threads` threads (0 before
    it ran)."""
    spec = getattr(grad_kernel, "last", None)
    if spec is None:
        return 0
    return tape_bytes_per_thread(spec, args) * threads


class Programs:
    """A kernel's primal, primal-as-derivative and gradient programs for one launch shape."""

    def __init__(self, kernel, grid, block, primal_args, grad_args, device):
        self.grid, self.block, self.device = grid, block, device
        backend = self.backend = backend_of(device)
        self.primal_spec = kernel.specialization_for(primal_args)
        self.as_derivative_spec = AsDerivative(as_derivative(kernel), self.primal_spec.params)
        self.primal_call = _pass_args(primal_args, self.primal_spec.params)
        dk = gradient_of(kernel, backend)
        dk[grid, block](*grad_args)          # compiles, picks the variant, runs once
        spec = self.grad_spec = dk.last
        flat = []
        for a in grad_args:
            if isinstance(a, (zm.Duplicated, zm.DuplicatedNoNeed)):
                flat += [a.value, a.shadow]
            else:
                flat.append(a)
        self.tapes = _tapes(spec, backend, grid, block, primal_args)
        flat += self.tapes
        self.grad_runs = [(spec, _pass_args(flat, spec.params), grid)]
        if spec.consume is not None:   # a gathering derivative's second kernel
            cgrid, cargs = spec.consume.configured(grid, flat)
            self.grad_runs.append((spec.consume, _pass_args(cargs, spec.consume.params), cgrid))
        self.primal_args = primal_args
        self._compiled = {}

    def _program(self, spec):
        program = self._compiled.get(id(spec))
        if program is None:
            program = self._compiled[id(spec)] = spec.compiled(self.backend)
        return program

    def primal(self) -> None:
        self._program(self.primal_spec).launch(self.grid, self.block, self.primal_call)

    def primal_as_derivative(self) -> None:
        self._program(self.as_derivative_spec).launch(self.grid, self.block, self.primal_call)

    def gradient(self) -> None:
        for spec, call, grid in self.grad_runs:
            self._program(spec).launch(grid, self.block, call)

    def tape_bytes(self) -> int:
        threads = int(np.prod(self.grid)) * int(np.prod(self.block))
        return tape_bytes_per_thread(self.grad_spec, self.primal_args) * threads

    def specializations(self) -> dict:
        return {"primal": self.primal_spec, "primal as derivative": self.as_derivative_spec,
                "gradient": self.grad_spec}


def program_closures(output: str, cuda_c_output: str) -> dict:
    """The `Case` closures of a case whose state holds its `Programs` as `programs`, and the
    CUDA C version's output apart from zymo's (state attributes named here)."""
    return dict(primal=lambda s: s.programs.primal(),
                primal_as_derivative=lambda s: s.programs.primal_as_derivative(),
                gradient=lambda s: s.programs.gradient(),
                tape_bytes=lambda s: s.programs.tape_bytes(),
                specializations=lambda s: s.programs.specializations(),
                cuda_c_check=lambda s: compare_outputs(s, output, cuda_c_output))


def gate_from_report(report, tolerance: float, detail: str = "") -> Gate:
    """A `Gate` from a `zm.check_grad` report: the worst directional row, the dot-product
    row (zm.jvp's <w, J v> against zm.grad's <J^T w, v>)."""
    directional = [row.error for row in report.rows if row.argument >= 0]
    dot = [row.error for row in report.rows if row.argument < 0]
    return Gate(fd_error=max(directional) if directional else float("inf"),
                dot_error=max(dot) if dot else float("inf"), tolerance=tolerance,
                detail=detail or str(report))


def check(kernel, state, device: str, label: str, rtol: float = 1e-5,
          step: float = 1e-6) -> Gate:
    """`zm.check_grad` in float64 on host copies of the state's `grad_args`, launched as
    `state.blocks` blocks of `state.block`: two random directions per differentiated array
    against central differences, and the dot-product row."""
    args = []
    for a in state.grad_args:
        if isinstance(a, zm.Duplicated):
            value = to_host(a.value)
            args.append(zm.Duplicated(value.copy(), np.zeros_like(value)))
        elif hasattr(a, "shape") and not isinstance(a, np.generic):
            args.append(to_host(a).copy())
        else:
            args.append(a)
    report = zm.check_grad(kernel, state.blocks, state.block, *args,
                           backend=backend_of(device), rtol=rtol, step=step)
    directions = sum(1 for row in report.rows if row.argument >= 0)
    gate = gate_from_report(report, rtol, label)
    gate.detail = f"{label}: {directions} directions, worst FD error {gate.fd_error:.1e}"
    return gate


def merge(gates: list[Gate]) -> Gate:
    return Gate(max(g.fd_error for g in gates), max(g.dot_error for g in gates),
                min(g.tolerance for g in gates), "; ".join(g.detail for g in gates))


def primal_and_cuda_c(state, primal, launch, code: str, restored, outputs) -> tuple:
    """zymo's primal and its CUDA C version (`code`, compiled by NVRTC; `launch(state,
    module)` queues it) run once each from the same state: host copies of the arrays
    `outputs(state)` lists after each run, the arrays in `restored` put back after each."""
    import cupy as cp
    module = cp.RawModule(code=code, options=("-std=c++17",))
    saved = [(a, a.copy()) for a in restored]
    results = []
    for run in (lambda: primal(state), lambda: launch(state, module)):
        run()
        results.append([np.array(to_host(a)) for a in outputs(state)])
        for a, start in saved:
            a[...] = start
    return tuple(results)


def cupy_args(cp, args) -> tuple:
    """Arguments for a CuPy RawKernel: int64 scalars as `long`, arrays as they are."""
    return tuple(a if hasattr(a, "__cuda_array_interface__") else np.int64(a)
                 if isinstance(a, (int, np.integer)) else np.float64(a) for a in args)


def compare_outputs(state, ours: str, theirs: str) -> float:
    a, b = to_host(getattr(state, ours)), to_host(getattr(state, theirs))
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), 1e-300))
