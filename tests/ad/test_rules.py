"""Every derivative rule in the op registry: structural rules resolve to a transform's handler,
and every differentiable op's JVP and VJP agree with central finite differences in float64
(the JAX `lax_autodiff_test` shape: one table row per op, a test that the table is complete)."""
from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import numpy as np
import pytest

import zymo as zm
from zymo.ad.forward import Forward
from zymo.ad.reverse import Pullback, Reverse
from zymo.ops import arith, complex as complex_ops, math as math_ops, sync, warp
from zymo.ops.adjoints import NonDifferentiable
from zymo.ops.registry import ADJOINT, ALL_OPS, JVP
from zymo.ops.structural import (FORWARD_MODE, REVERSE_MODE, RULES, StructuralRule,
                                 is_structural)

# ---- structural rules ------------------------------------------------------------------------


def _structural(table) -> dict:
    return {op: table.find(op) for op in ALL_OPS if is_structural(table.find(op))}


def test_every_structural_rule_of_an_op_has_a_handler():
    """Each op's structural adjoint rule is the reverse transform's, its structural JVP rule
    the forward transform's, and each resolves to a method of that transform."""
    problems = []
    for table, mode, transforms in ((ADJOINT, REVERSE_MODE, (Reverse, Pullback)),
                                    (JVP, FORWARD_MODE, (Forward,))):
        for op, rule in _structural(table).items():
            if rule.mode != mode:
                problems.append(f"{op.name}: {rule!r} in the {table.name} table")
            for transform in transforms:
                handler = transform.STRUCTURAL.get(rule)
                if handler is None or getattr(transform, handler.__name__) is not handler:
                    problems.append(f"{op.name}: {rule!r} has no handler in {transform.__name__}")
    assert not problems, "\n".join(problems)


def test_every_structural_rule_is_used_by_an_op():
    used = set(_structural(ADJOINT).values()) | set(_structural(JVP).values())
    assert [rule for rule in RULES if rule not in used] == []


def test_structural_rules_are_objects_not_names():
    from zymo.ops import control, memory
    assert isinstance(ADJOINT[memory.Load], StructuralRule)
    assert Reverse.STRUCTURAL[ADJOINT[control.For]] is Reverse.reverse_for
    assert Forward.STRUCTURAL[JVP[control.While]] is Forward.forward_loop


def test_a_transform_without_a_handler_is_an_error_when_defined():
    from zymo.ops.structural import transform
    with pytest.raises(TypeError, match="has no handler for"):
        transform(REVERSE_MODE)(type("Incomplete", (), {}))


# ---- every differentiable op against finite differences --------------------------------------
# The kernel applies one expression to a = x[i], b = y[i], c = z[i] (float64, drawn from
# `domain`, where the op is smooth) and stores it in out[i]. `ops` may name more than the op
# under test: the op must appear in the kernel's optimized IR.
CASES = {
    arith.Add: ("a + b", (-2, 2)),
    arith.Sub: ("a - b", (-2, 2)),
    arith.Mul: ("a * b", (-2, 2)),
    arith.Div: ("a / (b + 3.0)", (-2, 2)),
    arith.Mod: ("a % (b + 3.0)", (0.1, 1.9)),
    arith.Neg: ("-a * b", (-2, 2)),
    arith.Min: ("min(a, b)", (-2, 2)),
    arith.Max: ("max(a, b)", (-2, 2)),
    arith.Select: ("a * b if a > b else b * c", (-2, 2)),
    arith.Cast: ("zm.f64(zm.f32(a)) * b", (-2, 2)),
    math_ops.Sqrt: ("math.sqrt(a)", (0.5, 2)),
    math_ops.Exp: ("math.exp(a)", (-2, 2)),
    math_ops.Exp2: ("math.exp2(a)", (-2, 2)),
    math_ops.Log: ("math.log(a)", (0.5, 2)),
    math_ops.Log2: ("math.log2(a)", (0.5, 2)),
    math_ops.Log10: ("math.log10(a)", (0.5, 2)),
    math_ops.Log1p: ("math.log1p(a)", (-0.5, 2)),
    math_ops.Expm1: ("math.expm1(a)", (-2, 2)),
    math_ops.Sin: ("math.sin(a)", (-2, 2)),
    math_ops.Cos: ("math.cos(a)", (-2, 2)),
    math_ops.Tan: ("math.tan(a)", (-1.2, 1.2)),
    math_ops.Asin: ("math.asin(a)", (-0.9, 0.9)),
    math_ops.Acos: ("math.acos(a)", (-0.9, 0.9)),
    math_ops.Atan: ("math.atan(a)", (-2, 2)),
    math_ops.Sinh: ("math.sinh(a)", (-2, 2)),
    math_ops.Cosh: ("math.cosh(a)", (-2, 2)),
    math_ops.Tanh: ("math.tanh(a)", (-2, 2)),
    math_ops.Asinh: ("math.asinh(a)", (-2, 2)),
    math_ops.Acosh: ("math.acosh(a + 2.5)", (-1, 1)),
    math_ops.Atanh: ("math.atanh(a)", (-0.9, 0.9)),
    math_ops.Cbrt: ("math.cbrt(a)", (0.5, 2)),
    math_ops.Fabs: ("math.fabs(a) * b", (-2, 2)),
    math_ops.Erf: ("math.erf(a)", (-2, 2)),
    math_ops.Atan2: ("math.atan2(a, b)", (0.5, 2)),
    math_ops.Pow: ("math.pow(a, b)", (0.5, 2)),
    math_ops.Fmod: ("math.fmod(a, b + 3.0)", (0.1, 1.9)),
    math_ops.Copysign: ("math.copysign(a, b)", (-2, 2)),
    math_ops.Hypot: ("math.hypot(a, b)", (-2, 2)),
    math_ops.Fma: ("zm.fma(a, b, c)", (-2, 2)),
    # gamma on both sides of its pole at 0 (digamma's reflection below 1/2, its series above)
    math_ops.Tgamma: ("math.gamma(a) * math.gamma(-b) + math.gamma(c * 9.0)", (0.2, 0.8)),
    math_ops.Lgamma: ("math.lgamma(a) + math.lgamma(b * 8.0) + math.lgamma(-c)", (0.2, 0.9)),
    math_ops.Erfc: ("math.erfc(a)", (-2, 2)),
    math_ops.Remainder: ("math.remainder(a + 5.5, b + 3.0)", (0.1, 0.5)),   # x / y in (1.6, 2)
    math_ops.Nextafter: ("math.nextafter(a, b) * c", (-2, 2)),
    math_ops.Ldexp: ("math.ldexp(a * b, 3) + math.ldexp(c, -2)", (-2, 2)),
    sync.Fence: ("fenced(a, b)", (-2, 2)),
    warp.WarpSync: ("synced(a, b)", (-2, 2)),
    warp.ShflDown: ("zm.shfl_down_sync(-1, a * b, 1)", (-2, 2)),
    warp.ShflUp: ("zm.shfl_up_sync(-1, a * b, 3)", (-2, 2)),
    warp.ShflXor: ("zm.shfl_xor_sync(-1, a * b, 5)", (-2, 2)),
    # complex values inside a real kernel: the derivative follows the (re, im) pairs
    complex_ops.MakeComplex: ("abs(complex(a, b) * complex(c, a) - 0.5j)", (-2, 2)),
    complex_ops.RealPart: ("(complex(a, b) / complex(b, c + 3.0)).real", (-2, 2)),
    complex_ops.ImagPart: ("cmath.sqrt(cmath.exp(complex(a, b)) + c * 1j).imag", (-1, 1)),
}

SOURCE = '''import cmath
import math
import zymo as zm


@zm.func
def fenced(a, b):
    t = a * b
    zm.threadfence()
    return t + a


@zm.func
def synced(a, b):
    t = a * b
    zm.syncwarp()
    return t - a


@zm.kernel
def {name}(x, y, z, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        a = x[i]
        b = y[i]
        c = z[i]
        out[i] = {expression}
'''
_directory = Path(tempfile.mkdtemp(prefix="zymo_rules_"))


def differentiable_ops() -> list:
    """The op classes whose adjoint rule is calculus (not structural, not an absence)."""
    return [op for op in ALL_OPS if ADJOINT.find(op) is not None
            and not isinstance(ADJOINT.find(op), NonDifferentiable)
            and not is_structural(ADJOINT.find(op))]


def test_the_table_names_every_differentiable_op():
    missing = [op.name for op in differentiable_ops() if op not in CASES]
    assert not missing, f"add a row to CASES for {missing}"


def build(op) -> object:
    name = op.name.replace(".", "_")
    path = _directory / f"{name}.py"
    path.write_text(SOURCE.format(name=name, expression=CASES[op][0]))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def arguments(op, seed: int) -> list:
    low, high = CASES[op][1]
    rng = np.random.default_rng(seed)
    n = 64   # two full warps
    inputs = [zm.Duplicated(rng.uniform(low, high, n), np.zeros(n)) for _ in range(3)]
    return [*inputs, zm.Duplicated(np.zeros(n), np.zeros(n))]


@pytest.mark.parametrize("op", list(CASES), ids=lambda op: op.name)
def test_jvp_and_vjp_against_finite_differences(op):
    kernel = build(op)
    args = arguments(op, seed=len(op.name))
    text = kernel.specialize(*[a.value for a in args]).ir()
    assert f" {op.name}" in text, f"the kernel of the row for {op.name} does not use it:\n{text}"
    for backend in ("interp", "cpu"):
        report = zm.check_grad(kernel, 2, 32, *args, backend=backend)
        assert report.ok, str(report)
        report = zm.check_jvp(kernel, 2, 32, *args, width=2, backend=backend)
        assert report.ok, str(report)
