"""Helpers the Enzyme-suite ports share: arrays on a device, the gate from `zm.check_grad`,
and the primal compiled the way `zm.grad` compiles the derivative."""
from __future__ import annotations

import numpy as np

from zymo.runtime.grad import DERIVATIVE_REGISTERS
from zymo.runtime.kernel import with_max_registers

from .case import Gate


def on_device(array: np.ndarray, device: str):
    """`array` where the case runs: itself on "cpu", a CuPy copy on "cuda"."""
    if device == "cpu":
        return array
    import cupy as cp
    return cp.asarray(array)


def to_host(array) -> np.ndarray:
    return array if isinstance(array, np.ndarray) else array.get()


def zeros_like(array):
    if isinstance(array, np.ndarray):
        return np.zeros_like(array)
    import cupy as cp
    return cp.zeros_like(array)


def backend_of(device: str) -> str:
    return "cpu" if device == "cpu" else "cuda"


def as_derivative(kernel):
    """The kernel under the register cap `zm.grad` gives derivatives (a derivative also goes
    through the optimizer once more after the transform, which leaves a primal unchanged):
    its time against the primal's tells the cap's cost from the derivative's."""
    if kernel.max_registers is not None:
        return kernel
    return with_max_registers(kernel, DERIVATIVE_REGISTERS)


def gate_from_report(report, tolerance: float, detail: str = "") -> Gate:
    """A `Gate` from a `zm.check_grad` report: the worst directional row, the dot-product
    row (zm.jvp's <w, J v> against zm.grad's <J^T w, v>)."""
    directional = [row.error for row in report.rows if row.argument >= 0]
    dot = [row.error for row in report.rows if row.argument < 0]
    return Gate(fd_error=max(directional) if directional else float("inf"),
                dot_error=max(dot) if dot else float("inf"), tolerance=tolerance,
                detail=detail or str(report))
