"""The pass manager and the default pipeline: stages, fixpoint, verification, printing, timing."""
from __future__ import annotations

import io

import pytest

from zymo.ir import Module
from zymo.ir.types import Array, bool_, f32, i32
from zymo.ir.verifier import VerifyError, check
from zymo.ops import arith, memory
from zymo.passes import PASSES, STAGES, PassManager, Stage, run_pipeline
from zymo.passes.manager import verify_from_env

from .helpers import FunctionBuilder, text


def saxpy_loop() -> Module:
    """for i in range(n): y[i] = axpy(2.0 * 1.0, x[i], y[i]); if False: y[0] = 0.0"""
    module = Module()
    axpy = FunctionBuilder(module, "axpy", [("a", f32), ("x", f32), ("y", f32)], [f32],
                           kind="device")
    axpy.ret(axpy.value(arith.Add, axpy.value(arith.Mul, axpy.args["a"], axpy.args["x"]),
                        axpy.args["y"]))
    k = FunctionBuilder(module, "k", [("n", i32), ("x", Array(f32, 1)), ("y", Array(f32, 1))])
    x, y = k.args["x"], k.args["y"]
    zero, one = k.const(0, i32), k.const(1, i32)

    def body(i):
        scale = k.value(arith.Mul, k.const(2.0, f32), k.const(1.0, f32))
        xi, yi = k.value(memory.Load, x, i), k.value(memory.Load, y, i)
        k.create(memory.Store, y, i, k.call("axpy", [f32], scale, xi, yi)[0])
        return []

    k.for_(zero, k.value(arith.Add, k.args["n"], zero), one, [], body)

    def store_zero():
        k.create(memory.Store, y, zero, k.const(0.0, f32))
        return []

    k.if_(k.const(False, bool_), [], store_zero)
    k.ret()
    return module


def test_default_pipeline():
    module = run_pipeline(saxpy_loop(), verify=True)
    assert str(module) == text("""
        func.func @k(%n: i32, %x: array<f32, 1>, %y: array<f32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = i32, value = 1} : i32
          %2 = arith.constant() {type = f32, value = 2.0} : f32
          control.for(%0, %n, %1) body(%i: i32) {
            %3 = memory.load(%x, %i) : f32
            %4 = memory.load(%y, %i) : f32
            %5 = arith.mul(%2, %3) : f32
            %6 = arith.add(%5, %4) : f32
            memory.store(%y, %i, %6)
            control.yield()
          }
          func.return()
        }
    """)


def test_stop_after_inline():
    module = run_pipeline(saxpy_loop(), verify=True, stop_after="inline")
    printed = str(module)
    assert list(module.functions) == ["k"]
    assert "func.call" not in printed
    assert "arith.add(%n, %0)" in printed  # n + 0: simplify did not run


def test_print_after_one_pass():
    stream = io.StringIO()
    run_pipeline(saxpy_loop(), verify=True, print_after="licm", stream=stream)
    headers = [line for line in stream.getvalue().splitlines() if line.startswith("// -----")]
    assert headers == ["// ----- IR after licm (stage simplify, round 1) -----",
                       "// ----- IR after licm (stage simplify, round 2) -----"]


def test_print_after_all():
    stream = io.StringIO()
    run_pipeline(saxpy_loop(), verify=True, print_after="all", stream=stream)
    headers = [line for line in stream.getvalue().splitlines() if line.startswith("// -----")]
    assert headers[:2] == ["// ----- IR after inline (stage inline, round 1) -----",
                           "// ----- IR after fold (stage simplify, round 1) -----"]
    assert len(headers) == 1 + 2 * 5  # inline, then two rounds of simplify (the second finds
    #                                   nothing to do)


@pytest.mark.parametrize("options, message", [
    ({"print_after": "gvn"},
     "print_after='gvn': expected 'all' or one of inline, fold, cse, dce, last-trip, licm"),
    ({"stop_after": "ad"}, "stop_after='ad': expected one of inline, simplify"),
])
def test_bad_options(options, message):
    with pytest.raises(ValueError) as caught:
        run_pipeline(saxpy_loop(), **options)
    assert str(caught.value) == message


def test_names():
    assert list(PASSES) == ["inline", "fold", "cse", "dce", "last-trip", "licm"]
    assert all(PASSES[name].name == name for name in PASSES)
    assert STAGES == ("inline", "simplify")


class Counter:
    """A pass that changes nothing but says it did `times` times."""

    name = "counter"

    def __init__(self, times: int):
        self.times = times
        self.runs = 0

    def run(self, module: Module) -> bool:
        self.runs += 1
        return self.runs <= self.times


class Breaker:
    """A pass that breaks the IR: the last op of the kernel moves to the front."""

    name = "breaker"

    def run(self, module: Module) -> bool:
        block = module.kernel.regions[0].block
        block.ops.insert(0, block.ops.pop(-2))
        return True


def test_fixpoint_stops_when_nothing_changes():
    counter = Counter(times=2)
    manager = PassManager([Stage("s", [(counter, "test")], fixpoint=True, max_rounds=5)])
    assert manager.run(saxpy_loop()) is True
    assert counter.runs == 3
    assert [(t.stage, t.round, t.pass_name, t.changed) for t in manager.timings] == [
        ("s", 0, "counter", True), ("s", 1, "counter", True), ("s", 2, "counter", False)]
    assert all(t.seconds >= 0 for t in manager.timings)
    assert manager.unconverged == []


def test_fixpoint_cap():
    counter = Counter(times=100)
    manager = PassManager([Stage("s", [(counter, "test")], fixpoint=True, max_rounds=4)])
    manager.run(saxpy_loop())
    assert counter.runs == 4
    assert manager.unconverged == ["s"]


def test_verification_names_the_pass():
    manager = PassManager([Stage("s", [(Breaker(), "test")])], verify=True)
    with pytest.raises(VerifyError) as caught:
        manager.run(saxpy_loop())
    assert str(caught.value).splitlines()[0].endswith(
        "invalid IR after breaker (stage s, round 1): 2 problem(s)")


def test_no_verification_unless_asked():
    module = saxpy_loop()
    PassManager([Stage("s", [(Breaker(), "test")])], verify=False).run(module)
    with pytest.raises(VerifyError):
        check(module)


@pytest.mark.parametrize("variable, value, expected", [
    ("ZYMO_VERIFY", "1", True), ("ZYMO_CHECKS", "1", True), ("ZYMO_VERIFY", "0", False),
])
def test_verify_from_env(monkeypatch, variable, value, expected):
    monkeypatch.delenv("ZYMO_VERIFY", raising=False)
    monkeypatch.delenv("ZYMO_CHECKS", raising=False)
    monkeypatch.setenv(variable, value)
    assert verify_from_env() is expected


def test_report():
    manager = PassManager([Stage("s", [(Counter(times=1), "test")], fixpoint=True,
                                 max_rounds=3)])
    manager.run(saxpy_loop())
    header, row = manager.report().splitlines()
    assert header.split() == ["stage", "pass", "runs", "changed", "ms"]
    assert row.split()[:4] == ["s", "counter", "2", "1"]
