"""`zm.check_grad` and `zm.check_jvp`: a kernel's derivatives against central finite
differences, and against each other.

The kernel maps its inputs (Active scalars, the contents of Duplicated arrays) to its outputs
(the contents of the Duplicated arrays after the launch). With a random output cotangent w,
one launch of `zm.grad(kernel)` gives Jᵀw for every input; for each input and a few random
directions v, <Jᵀw, v> must equal the central difference of <w, F(p + h v)> in float64. One
launch of `zm.jvp(kernel, width=W)` gives J v for W random directions v at once; each output's
<w, J v> must equal the same central difference. The dot-product test ties the two modes:
<w, J v> = <Jᵀw, v>.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from ..ad import activity_of


@dataclass
class Row:
    argument: int
    kind: str
    reverse: float
    finite_difference: float
    error: float
    ok: bool


@dataclass
class GradReport:
    kernel: str
    backend: str
    rows: list = field(default_factory=list)
    mode: str = "grad"

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(row.ok for row in self.rows)

    def failures(self) -> list:
        return [row for row in self.rows if not row.ok]

    def __str__(self) -> str:
        exact = "<J^T w, v>" if self.mode == "grad" else "<w, J v>"
        lines = [f"check_{self.mode}({self.kernel}) on {self.backend}: "
                 f"{'pass' if self.ok else 'FAIL'}",
                 f"{'arg':>4} {'activity':<12} {exact:>16} {'finite diff.':>16} "
                 f"{'rel. error':>10}  result"]
        for row in self.rows:
            lines.append(f"{row.argument:>4} {row.kind:<12} {row.reverse:>16.9g} "
                         f"{row.finite_difference:>16.9g} {row.error:>10.2e}  "
                         f"{'ok' if row.ok else 'FAIL'}")
        return "\n".join(lines)


def _wide(value):
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value.astype(np.float64)
    if isinstance(value, (float, np.floating)):
        return np.float64(value)
    return copy.deepcopy(value)


class _Problem:
    """The kernel as a function of its inputs, for finite differences in float64."""

    def __init__(self, kernel, grid, block, args, backend, seed, precision):
        activities = [activity_of(a) for a in args]
        widen = _wide if precision == "float64" else copy.deepcopy
        self.activities = activities
        self.primals = [widen(a.value) for a in activities]
        # a scalar with a tangent (forward mode's zm.Duplicated(2.0, 1.0)) is an input only
        self.kinds = ["active" if a.kind in ("dup", "dup_noneed") and np.ndim(a.value) == 0
                      and not hasattr(a.value, "__cuda_array_interface__") else a.kind
                      for a in activities]
        self.launcher = kernel if backend is None else kernel.on(backend)
        self.backend = backend or self.launcher.backend or "cpu"
        self.grid, self.block = grid, block
        self.rng = np.random.default_rng(seed)
        self.inputs = [k for k, kind in enumerate(self.kinds)
                       if kind in ("active", "dup", "dup_noneed")]
        self.outputs = [k for k, kind in enumerate(self.kinds) if kind in ("dup", "dup_noneed")]
        self.weights = {k: self.rng.standard_normal(np.shape(self.primals[k]))
                        for k in self.outputs}
        self.name = getattr(kernel, "__name__", "kernel")

    def there(self, value):
        if self.backend == "cuda" and isinstance(value, np.ndarray):
            from .cuda.arrays import to_device
            return to_device(value)
        return copy.deepcopy(value)

    @staticmethod
    def back(value):
        return value if isinstance(value, np.ndarray) else value.copy_to_host()

    def project(self, k, value) -> float:
        return float(np.vdot(self.weights[k], self.back(value)))

    def run(self, values) -> dict:
        """<w_k, F_k(values)> per output argument k."""
        values = [self.there(v) for v in values]
        self.launcher[self.grid, self.block](*values)
        return {k: self.project(k, values[k]) for k in self.outputs}

    def direction(self, k):
        return self.rng.standard_normal(np.shape(self.primals[k]))

    def scale(self, k) -> float:
        p = self.primals[k]
        return max(1.0, float(np.max(np.abs(p))) if np.size(p) else 1.0)

    def tangent_of(self, k, direction):
        if self.kinds[k] == "active":
            return type(self.primals[k])(direction)
        return self.there(np.asarray(direction).astype(self.primals[k].dtype))

    def central(self, directions: dict, h: float) -> dict:
        """Central differences of every output projection along `directions` (input -> v)."""
        plus, minus = list(self.primals), list(self.primals)
        for k, v in directions.items():
            p = self.primals[k]
            if self.kinds[k] == "active":
                plus[k], minus[k] = type(p)(p + h * v), type(p)(p - h * v)
            else:
                plus[k] = (p + h * v).astype(p.dtype)
                minus[k] = (p - h * v).astype(p.dtype)
        up, down = self.run(plus), self.run(minus)
        return {k: (up[k] - down[k]) / (2 * h) for k in self.outputs}

    def compare(self, exact: float, differences, rtol: float, atol: float):
        """(finite difference, relative error, ok) for the first step that agrees; the wider
        steps are for kernels that round to float32 inside."""
        best = None
        wide = max(rtol, 2e-3)
        for difference, tolerance in differences(((None, rtol), (1e-4, wide), (1e-3, wide))):
            error = abs(difference - exact) / max(abs(difference), abs(exact), 1.0)
            ok = error <= tolerance or abs(difference - exact) <= atol
            if best is None or ok and not best[2] or error < best[1] and not best[2]:
                best = (difference, error, ok)
            if ok:
                break
        return best

    def jvp(self, directions: list[dict]) -> list[dict]:
        """<w_k, (J v_j)_k> per output k, for each direction v_j, from one forward launch."""
        from .jvp import JvpKernel
        from ..ad import BatchDuplicated, Duplicated
        width = len(directions)
        args, tangents = [], {}
        for k, kind in enumerate(self.kinds):
            value = self.there(self.primals[k])
            if k in self.inputs:
                tangents[k] = [self.tangent_of(k, d[k]) for d in directions]
                args.append(Duplicated(value, tangents[k][0]) if width == 1 else
                            BatchDuplicated(value, tangents[k]))
            else:
                args.append(value)
        JvpKernel(self.launcher, width)[self.grid, self.block](*args)
        return [{k: self.project(k, tangents[k][j]) for k in self.outputs}
                for j in range(width)]


def check_grad(kernel, grid, block, *args, backend: str | None = None, directions: int = 2,
               seed: int = 0, step: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-9,
               precision: str = "float64", dot_product: bool = True) -> GradReport:
    """Check `zm.grad(kernel)` at the given arguments (with activities, NumPy values).

    Float arrays and scalars are widened to float64 unless `precision="native"`; each Active
    or Duplicated argument is checked along `directions` random directions. With
    `dot_product`, one more row compares <w, J v> from `zm.jvp` with <Jᵀw, v>."""
    from .grad import GradKernel
    problem = _Problem(kernel, grid, block, args, backend, seed, precision)
    kinds, primals = problem.kinds, problem.primals
    grad_args, shadows = [], {}
    for k, kind in enumerate(kinds):
        value = problem.there(primals[k])
        if kind in ("dup", "dup_noneed"):
            shadows[k] = problem.there(problem.weights[k].astype(primals[k].dtype))
            grad_args.append(type(problem.activities[k])(value, shadows[k]))
        elif kind == "active":
            grad_args.append(problem.activities[k].__class__(value))
        else:
            grad_args.append(value)
    adjoints = iter(GradKernel(problem.launcher)[grid, block](*grad_args))
    reverse = {}
    for k, kind in enumerate(kinds):
        if kind == "active":
            reverse[k] = np.float64(next(adjoints))
        elif kind in ("dup", "dup_noneed"):
            reverse[k] = problem.back(shadows[k]).astype(np.float64)

    report = GradReport(problem.name, problem.backend)
    for k in problem.inputs:
        for _ in range(directions):
            direction = problem.direction(k)
            ad = float(np.vdot(reverse[k], direction))

            def differences(steps, k=k, direction=direction):
                for factor, tolerance in steps:
                    h = (factor or step) * problem.scale(k)
                    yield sum(problem.central({k: direction}, h).values()), tolerance

            fd, error, ok = problem.compare(ad, differences, rtol, atol)
            report.rows.append(Row(k, kinds[k], ad, fd, error, ok))
    if dot_product and problem.inputs and problem.outputs:
        v = {k: problem.direction(k) for k in problem.inputs}
        forward = sum(problem.jvp([v])[0].values())
        backward = sum(float(np.vdot(reverse[k], v[k])) for k in problem.inputs)
        error = abs(forward - backward) / max(abs(forward), abs(backward), 1.0)
        ok = error <= max(rtol, 1e-6 if precision == "float64" else 2e-3)
        report.rows.append(Row(-1, "dot-product", backward, forward, error, ok))
    return report


def check_jvp(kernel, grid, block, *args, width: int = 1, backend: str | None = None,
              seed: int = 0, step: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-9,
              precision: str = "float64") -> GradReport:
    """Check `zm.jvp(kernel, width=width)` at the given arguments: every Active or Duplicated
    input gets `width` random tangents (all perturbed together); each output's projection
    <w, J v> is compared with central finite differences along v, per direction."""
    problem = _Problem(kernel, grid, block, args, backend, seed, precision)
    # each input's direction is scaled to its magnitude, so one step suits all of them
    directions = [{k: problem.direction(k) * problem.scale(k) for k in problem.inputs}
                  for _ in range(width)]
    tangents = problem.jvp(directions)
    report = GradReport(problem.name, problem.backend, mode="jvp")
    for j, v in enumerate(directions):
        cache: dict = {}
        for k in problem.outputs:
            def differences(steps, v=v, k=k):
                for factor, tolerance in steps:
                    h = factor or step
                    if h not in cache:
                        cache[h] = problem.central(v, h)
                    yield cache[h][k], tolerance

            fd, error, ok = problem.compare(tangents[j][k], differences, rtol, atol)
            report.rows.append(Row(k, f"direction {j}", tangents[j][k], fd, error, ok))
    return report
