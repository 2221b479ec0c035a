"""LICM: pure, speculatable, invariant ops leave loops; memory ops and variant ops stay."""
from __future__ import annotations

import numpy as np
import pytest

from zymo.ir import Module
from zymo.ir.types import Array, bool_, f32, i32
from zymo.ops import arith, memory
from zymo.passes.licm import LICM

from .helpers import FunctionBuilder, run_checked, text


def kernel(module: Module, **args) -> FunctionBuilder:
    return FunctionBuilder(module, "k", list(args.items()))


def invariants(m):
    """An invariant chain leaves (with its constant); ops using the induction variable or a
    carried value stay; an invariant load and store stay (memory ops never move)."""
    k = kernel(m, a=i32, b=i32, x=Array(i32, 1))
    a, b, x = k.args["a"], k.args["b"], k.args["x"]
    zero, one = k.const(0, i32), k.const(1, i32)

    def body(i, total):
        scale = k.value(arith.Mul, k.value(arith.Add, a, b), k.const(3, i32))
        loaded = k.value(memory.Load, x, zero)
        k.create(memory.Store, x, one, scale)
        return [k.value(arith.Add, k.value(arith.Add, total, k.value(arith.Mul, i, scale)),
                        loaded)]

    k.create(memory.Store, x, zero, k.for_(zero, a, one, [zero], body)[0])
    k.ret()


def nested_loops(m):
    """What depends on nothing in the nest leaves both loops; what depends on the outer
    induction variable only leaves the inner loop."""
    k = kernel(m, n=i32, x=Array(i32, 1))
    n, x = k.args["n"], k.args["x"]
    zero, one = k.const(0, i32), k.const(1, i32)

    def inner(i):
        def body(j):
            both = k.value(arith.Add, k.value(arith.Mul, i, n), k.value(arith.Mul, n, n))
            k.create(memory.Store, x, k.value(arith.Add, both, j), j)
            return []

        k.for_(zero, n, one, [], body)
        return []

    k.for_(zero, n, one, [], inner)
    k.ret()


def conditional_and_while(m):
    """Speculatable ops leave an if inside a loop, and both regions of a while; a pure op
    that is not speculatable (a constant array) stays."""
    k = kernel(m, c=bool_, n=i32, x=Array(f32, 1))
    c, n, x = k.args["c"], k.args["n"], k.args["x"]
    zero = k.const(0, i32)

    def before(i):
        return k.value(arith.Cmp, i, k.value(arith.Add, n, n), predicate="lt")

    def body(i):
        table = k.value(memory.ConstArray, data=np.arange(4, dtype=np.float32))
        value = k.if_(c, [f32], lambda: [k.value(arith.Div, k.const(1.0, f32),
                                                  k.const(3.0, f32))],
                      lambda: [k.value(memory.Load, table, zero)])[0]
        k.create(memory.Store, x, i, value)
        return [k.value(arith.Add, i, k.const(1, i32))]

    k.while_([zero], before, body)
    k.ret()


CASES = {
    "invariants": invariants,
    "nested_loops": nested_loops,
    "conditional_and_while": conditional_and_while,
}

EXPECTED: dict[str, tuple[bool, str]] = {
    "invariants": (True, text("""
        func.func @k(%a: i32, %b: i32, %x: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = i32, value = 1} : i32
          %2 = arith.add(%a, %b) : i32
          %3 = arith.constant() {type = i32, value = 3} : i32
          %4 = arith.mul(%2, %3) : i32
          %5 = control.for(%0, %a, %1, %0) : i32 body(%i: i32, %c0: i32) {
            %6 = memory.load(%x, %0) : i32
            memory.store(%x, %1, %4)
            %7 = arith.mul(%i, %4) : i32
            %8 = arith.add(%c0, %7) : i32
            %9 = arith.add(%8, %6) : i32
            control.yield(%9)
          }
          memory.store(%x, %0, %5)
          func.return()
        }
    """)),
    "nested_loops": (True, text("""
        func.func @k(%n: i32, %x: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = i32, value = 1} : i32
          %2 = arith.mul(%n, %n) : i32
          control.for(%0, %n, %1) body(%i: i32) {
            %3 = arith.mul(%i, %n) : i32
            %4 = arith.add(%3, %2) : i32
            control.for(%0, %n, %1) body(%i1: i32) {
              %5 = arith.add(%4, %i1) : i32
              memory.store(%x, %5, %i1)
              control.yield()
            }
            control.yield()
          }
          func.return()
        }
    """)),
    "conditional_and_while": (True, text("""
        func.func @k(%c: bool, %n: i32, %x: array<f32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.add(%n, %n) : i32
          %2 = arith.constant() {type = f32, value = 1.0} : f32
          %3 = arith.constant() {type = f32, value = 3.0} : f32
          %4 = arith.div(%2, %3) : f32
          %5 = arith.constant() {type = i32, value = 1} : i32
          %6 = control.while(%0) : i32 before(%7: i32) {
            %8 = arith.cmp(%7, %1) {predicate = "lt"} : bool
            control.condition(%8)
          } body(%9: i32) {
            %10 = memory.const() {data = dense<4 x float32>} : array<f32, 1, const, 4>
            %11 = control.if(%c) : f32 then {
              control.yield(%4)
            } else {
              %12 = memory.load(%10, %0) : f32
              control.yield(%12)
            }
            memory.store(%x, %9, %11)
            %13 = arith.add(%9, %5) : i32
            control.yield(%13)
          }
          func.return()
        }
    """)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_licm(name):
    module = Module()
    CASES[name](module)
    changed, printed = run_checked(LICM(speculate=True), module)
    assert (changed, printed) == EXPECTED[name]


def test_before_differentiation_nothing_leaves_an_if():
    """Without speculation (the optimizing stages) the division stays under its `if`: hoisted,
    its derivative would run where the guard fails. The loop bound's `n + n` still moves."""
    module = Module()
    conditional_and_while(module)
    changed, printed = run_checked(LICM(), module)
    assert changed
    body = printed[printed.index("body("):]
    assert "arith.div" in body[body.index("control.if"):]
    assert "arith.add(%n, %n)" in printed[:printed.index("control.while")]


def test_nothing_to_move():
    module = Module()
    k = kernel(module, n=i32, x=Array(i32, 1))
    zero, one = k.const(0, i32), k.const(1, i32)

    def body(i):
        k.create(memory.Store, k.args["x"], i, k.value(arith.Mul, i, i))
        return []

    k.for_(zero, k.args["n"], one, [], body)
    k.ret()
    changed, _ = run_checked(LICM(), module)
    assert not changed
