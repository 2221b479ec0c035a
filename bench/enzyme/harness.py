"""What the XSBench and RSBench ports share on top of the `Case` contract: arrays on a device,
the three compiled programs of a kernel (primal, primal built as its derivative is, gradient)
launched without host-side checks so that timings measure the GPU, and the gate through
`zm.check_grad`."""
from __future__ import annotations

import numpy as np

import zymo as zm
from bench.enzyme.case import Gate
from zymo.runtime.grad import DERIVATIVE_REGISTERS, _tapes, tape_bytes_per_thread
from zymo.runtime.kernel import Specialization, _pass_args, with_max_registers


def mover(device: str):
    """A function putting a NumPy array on `device` (a CuPy array on the GPU, for the CUDA C
    versions too; a copy on the CPU)."""
    if device == "cuda":
        import cupy as cp
        return cp.asarray
    return np.array


def zeros(device: str, shape, dtype=np.float64):
    return mover(device)(np.zeros(shape, dtype))


def to_host(array) -> np.ndarray:
    return array if isinstance(array, np.ndarray) else array.get()


class AsDerivative(Specialization):
    """The primal compiled as `zm.grad` compiles a derivative: distinct array arguments taken
    as `noalias` in code generation (the derivative's launch checked that they do not overlap)
    and the derivative's register cap; the same passes otherwise."""

    noalias = True


class Programs:
    """A kernel's primal, primal-as-derivative and gradient programs for one launch shape."""

    def __init__(self, kernel, grid, block, primal_args, grad_args, device):
        self.grid, self.block, self.device = grid, block, device
        backend = "cuda" if device == "cuda" else "cpu"
        self.backend = backend
        self.primal_spec = kernel.specialization_for(primal_args)
        capped = with_max_registers(kernel, DERIVATIVE_REGISTERS)
        self.as_derivative_spec = AsDerivative(capped, self.primal_spec.params)
        self.primal_call = _pass_args(primal_args, self.primal_spec.params)
        dk = zm.grad(kernel.on(backend))
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


def check(kernel, state, device: str, label: str, rtol: float = 1e-5,
          step: float = 1e-6) -> Gate:
    """`zm.check_grad` in float64 on the state's host arrays: two random directions per
    differentiated array against central differences, and the dot-product row (`zm.jvp`'s
    <w, J v> against `zm.grad`'s <J^T w, v>)."""
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
        backend="cuda" if device == "cuda" else "cpu", rtol=rtol, step=step)
    fd = [row.error for row in report.rows if row.kind != "dot-product"]
    dot = [row.error for row in report.rows if row.kind == "dot-product"]
    return Gate(max(fd), max(dot) if dot else float("nan"), rtol,
                f"{label}: {len(fd)} directions, worst FD error {max(fd):.1e}")


def merge(gates: list[Gate]) -> Gate:
    return Gate(max(g.fd_error for g in gates), max(g.dot_error for g in gates),
                min(g.tolerance for g in gates), "; ".join(g.detail for g in gates))


def cupy_args(cp, args) -> tuple:
    """Arguments for a CuPy RawKernel: int64 scalars as `long`, arrays as they are."""
    return tuple(a if hasattr(a, "__cuda_array_interface__") else np.int64(a)
                 if isinstance(a, (int, np.integer)) else np.float64(a) for a in args)


def compare_outputs(state, ours: str, theirs: str) -> float:
    a, b = to_host(getattr(state, ours)), to_host(getattr(state, theirs))
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), 1e-300))
