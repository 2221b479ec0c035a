"""`zm.check_grad`: a kernel's reverse-mode derivative against central finite differences.

The kernel maps its inputs (Active scalars, the contents of Duplicated arrays) to its outputs
(the contents of the Duplicated arrays after the launch). With a random output cotangent w,
one launch of `zm.grad(kernel)` gives Jᵀw for every input; for each input and a few random
directions v, <Jᵀw, v> must equal the central difference of <w, F(p + h v)> in float64.
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

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(row.ok for row in self.rows)

    def failures(self) -> list:
        return [row for row in self.rows if not row.ok]

    def __str__(self) -> str:
        lines = [f"check_grad({self.kernel}) on {self.backend}: "
                 f"{'pass' if self.ok else 'FAIL'}",
                 f"{'arg':>4} {'activity':<12} {'<J^T w, v>':>16} {'finite diff.':>16} "
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


def check_grad(kernel, grid, block, *args, backend: str | None = None, directions: int = 2,
               seed: int = 0, step: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-9,
               precision: str = "float64") -> GradReport:
    """Check `zm.grad(kernel)` at the given arguments (with activities, NumPy values).

    Float arrays and scalars are widened to float64 unless `precision="native"`; each Active
    or Duplicated argument is checked along `directions` random directions."""
    from .grad import GradKernel
    activities = [activity_of(a) for a in args]
    widen = _wide if precision == "float64" else copy.deepcopy
    primals = [widen(a.value) for a in activities]
    kinds = [a.kind for a in activities]
    launcher = kernel if backend is None else kernel.on(backend)
    used = backend or launcher.backend or "cpu"
    rng = np.random.default_rng(seed)
    outputs = [k for k, kind in enumerate(kinds) if kind in ("dup", "dup_noneed")]
    weights = {k: rng.standard_normal(np.shape(primals[k])) for k in outputs}

    device = used == "cuda"

    def there(value):
        if device and isinstance(value, np.ndarray):
            from .cuda.arrays import to_device
            return to_device(value)
        return copy.deepcopy(value)

    def back(value):
        return value if isinstance(value, np.ndarray) else value.copy_to_host()

    def run(values) -> float:
        values = [there(v) for v in values]
        launcher[grid, block](*values)
        return sum(float(np.vdot(weights[k], back(values[k]))) for k in outputs)

    grad_args, shadows = [], {}
    for k, kind in enumerate(kinds):
        value = there(primals[k])
        if kind in ("dup", "dup_noneed"):
            shadows[k] = there(weights[k].astype(primals[k].dtype))
            grad_args.append(type(activities[k])(value, shadows[k]))
        elif kind == "active":
            grad_args.append(activities[k].__class__(value))
        else:
            grad_args.append(value)
    adjoints = iter(GradKernel(launcher)[grid, block](*grad_args))
    reverse = {}
    for k, kind in enumerate(kinds):
        if kind == "active":
            reverse[k] = np.float64(next(adjoints))
        elif kind in ("dup", "dup_noneed"):
            reverse[k] = back(shadows[k]).astype(np.float64)

    report = GradReport(getattr(kernel, "__name__", "kernel"), used)
    for k, kind in enumerate(kinds):
        if kind not in ("active", "dup", "dup_noneed"):
            continue
        for _ in range(directions):
            direction = rng.standard_normal(np.shape(primals[k]))
            scale = max(1.0, float(np.max(np.abs(primals[k]))) if np.size(primals[k]) else 1.0)
            ad = float(np.vdot(reverse[k], direction))
            best = None
            # the second, wider step is for kernels that round to float32 inside
            for h, tolerance in ((step * scale, rtol), (1e-3 * scale, max(rtol, 2e-3))):
                fd = _central_difference(run, primals, k, kind, direction, h)
                error = abs(fd - ad) / max(abs(fd), abs(ad), 1.0)
                ok = error <= tolerance or abs(fd - ad) <= atol
                if best is None or ok and not best[2] or error < best[1] and not best[2]:
                    best = (fd, error, ok)
                if ok:
                    break
            report.rows.append(Row(k, kind, ad, best[0], best[1], best[2]))
    return report


def _central_difference(run, primals, k, kind, direction, h) -> float:
    plus, minus = list(primals), list(primals)
    if kind == "active":
        plus[k] = type(primals[k])(primals[k] + h * direction)
        minus[k] = type(primals[k])(primals[k] - h * direction)
    else:
        plus[k] = (primals[k] + h * direction).astype(primals[k].dtype)
        minus[k] = (primals[k] - h * direction).astype(primals[k].dtype)
    return (run(plus) - run(minus)) / (2 * h)
