"""What the reverse transform's plan (`zymo.ad.plan`) decided for a kernel, for the tests that
check which strategy a read's adjoint got."""
from __future__ import annotations

import zymo as zm


def read_modes(kernel, *args, keep=lambda op: True) -> tuple[dict, str]:
    """(line -> the modes the plan gave the reads `keep` accepts on that line, the derivative's
    IR), planned for a fresh copy of `kernel`: a derivation cached by an earlier launch of the
    same signature would not be planned again."""
    import zymo.ad.reverse as reverse
    seen: dict = {}
    original = reverse.plan_accesses

    def spy(*a, **kw):
        found = original(*a, **kw)
        for op, mode in found.read_modes.items():
            if keep(op):
                seen.setdefault(op.loc.line, set()).add(mode)
        return found
    reverse.plan_accesses = spy
    try:
        ir = zm.grad(zm.kernel(kernel.py_func)).specialize(*args).ir()
    finally:
        reverse.plan_accesses = original
    return seen, ir
