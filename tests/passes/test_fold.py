"""Fold: constant folding, algebraic identities, constant branches, empty loops, extents."""
from __future__ import annotations

import pytest

from zymo.ir import Module
from zymo.ir.types import Array, bool_, f32, i32, i64
from zymo.ops import arith, math, memory, thread
from zymo.passes.fold import Fold

from .helpers import FunctionBuilder, run_checked, text


def kernel(module: Module, **args) -> FunctionBuilder:
    return FunctionBuilder(module, "k", list(args.items()))


# ---- constants -------------------------------------------------------------------------
def int_chain(m):
    k = kernel(m, out_i32=Array(i32, 1))
    total = k.value(arith.Add, k.const(2, i32), k.const(3, i32))
    k.keep(k.value(arith.Mul, total, k.const(4, i32)))
    k.ret()


def f32_rounding(m):
    k = kernel(m, out_f32=Array(f32, 1))
    k.keep(k.value(arith.Add, k.const(0.1, f32), k.const(0.2, f32)))
    k.ret()


def int_wraps(m):
    k = kernel(m, out_i32=Array(i32, 1))
    k.keep(k.value(arith.Add, k.const(2147483647, i32), k.const(1, i32)))
    k.ret()


def division_by_zero(m):
    k = kernel(m, out_i32=Array(i32, 1), out_f32=Array(f32, 1))
    k.keep(k.value(arith.FloorDiv, k.const(7, i32), k.const(0, i32)),
          k.value(arith.Div, k.const(1.0, f32), k.const(0.0, f32)))
    k.ret()


def compare_and_cast(m):
    k = kernel(m, out_bool=Array(bool_, 1), out_i32=Array(i32, 1))
    k.keep(k.value(arith.Cmp, k.const(1, i32), k.const(2, i32), predicate="lt"),
           k.value(arith.Cast, k.const(-3.7, f32), to=i32))
    k.ret()


def math_function(m):
    k = kernel(m, out_f32=Array(f32, 1))
    k.keep(k.value(math.Sqrt, k.const(2.0, f32)))
    k.ret()


def not_constant(m):
    k = kernel(m, x=Array(i32, 1), out_i32=Array(i32, 1))
    tid = k.value(thread.ThreadIdx)
    loaded = k.value(memory.Load, k.args["x"], k.const(0, i32))
    k.keep(k.value(arith.Add, tid, k.const(1, i32)), loaded)
    k.ret()


# ---- algebra ---------------------------------------------------------------------------
def int_identities(m):
    k = kernel(m, n=i32, out_i32=Array(i32, 1))
    n, zero, one = k.args["n"], k.const(0, i32), k.const(1, i32)
    k.keep(k.value(arith.Add, n, zero), k.value(arith.Add, zero, n),
          k.value(arith.Sub, n, zero), k.value(arith.Mul, one, n),
          k.value(arith.Mul, n, zero), k.value(arith.BitAnd, zero, n))
    k.ret()


def identities_kept(m):
    """0 - n is not n; for floats x + 0.0 and x * 0.0 are not simplified, x * 1.0 is."""
    k = kernel(m, n=i32, x=f32, out_i32=Array(i32, 1), out_f32=Array(f32, 1))
    n, x = k.args["n"], k.args["x"]
    k.keep(k.value(arith.Sub, k.const(0, i32), n), k.value(arith.Add, x, k.const(0.0, f32)),
          k.value(arith.Mul, x, k.const(0.0, f32)), k.value(arith.Mul, x, k.const(1.0, f32)))
    k.ret()


def involutions(m):
    k = kernel(m, x=f32, b=bool_, out_f32=Array(f32, 1), out_bool=Array(bool_, 1))
    once = k.value(arith.Neg, k.args["x"])
    k.keep(k.value(arith.Neg, once), once,
          k.value(arith.Not, k.value(arith.Not, k.args["b"])))
    k.ret()


def casts(m):
    k = kernel(m, n=i32, out_i32=Array(i32, 1), out_i64=Array(i64, 1))
    k.keep(k.value(arith.Cast, k.args["n"], to=i32), k.value(arith.Cast, k.args["n"], to=i64))
    k.ret()


def selects(m):
    k = kernel(m, c=bool_, a=i32, b=i32, out_i32=Array(i32, 1))
    c, a, b = k.args["c"], k.args["a"], k.args["b"]
    k.keep(k.value(arith.Select, k.const(True, bool_), a, b),
          k.value(arith.Select, k.const(False, bool_), a, b),
          k.value(arith.Select, c, a, a), k.value(arith.Select, c, a, b))
    k.ret()


def self_comparisons(m):
    k = kernel(m, n=i32, x=f32, out_bool=Array(bool_, 1))
    n, x = k.args["n"], k.args["x"]
    k.keep(k.value(arith.Cmp, n, n, predicate="lt"), k.value(arith.Cmp, n, n, predicate="ge"),
          k.value(arith.Cmp, x, x, predicate="eq"))
    k.ret()


def extents(m):
    k = kernel(m, x=Array(f32, 2), out_i64=Array(i64, 1))
    tile = k.value(memory.SharedAlloc, shape=(16, 8), dtype=f32)
    k.keep(k.value(memory.Dim, tile, axis=1), k.value(memory.Dim, k.args["x"], axis=1))
    k.ret()


# ---- control flow ----------------------------------------------------------------------
def constant_if(m):
    """The taken branch's ops (the mul, the store) replace the if; its yield, the results."""
    k = kernel(m, n=i32, out_i32=Array(i32, 1))
    n = k.args["n"]
    taken = k.if_(k.const(True, bool_), [i32],
                  lambda: [k.value(arith.Mul, n, k.const(3, i32))],
                  lambda: [k.value(arith.Sub, n, n)])

    def store_n():
        k.keep(n)
        return []

    def store_taken():
        k.keep(taken[0])
        return []

    k.if_(k.const(False, bool_), [], store_n, store_taken)
    k.ret()


def variable_if(m):
    k = kernel(m, c=bool_, n=i32, out_i32=Array(i32, 1))
    result = k.if_(k.args["c"], [i32], lambda: [k.args["n"]], lambda: [k.const(0, i32)])
    k.keep(result[0])
    k.ret()


def loops(m):
    """Empty ranges go (5..2 step 1, 2..5 step -1); the others stay."""
    k = kernel(m, n=i32, out_i32=Array(i32, 1))
    two, five, one = k.const(2, i32), k.const(5, i32), k.const(1, i32)
    minus_one, zero = k.const(-1, i32), k.const(0, i32)

    def loop(lower, upper, step):
        return k.for_(lower, upper, step, [k.args["n"]],
                      lambda i, c: [k.value(arith.Add, c, i)])[0]

    k.keep(loop(five, two, one), loop(two, five, minus_one), loop(two, five, one),
          loop(five, two, minus_one), loop(zero, k.args["n"], one), loop(two, five, zero))
    k.ret()


def nested_regions(m):
    """Folding reaches into loop bodies and branches; an inner if with a constant condition
    opens up inside the loop."""
    k = kernel(m, n=i32, out_i32=Array(i32, 1))
    zero, one = k.const(0, i32), k.const(1, i32)

    def body(i, total):
        step = k.value(arith.Add, one, one)
        inner = k.if_(k.value(arith.Cmp, one, zero, predicate="gt"), [i32],
                      lambda: [k.value(arith.Mul, i, step)], lambda: [i])[0]
        return [k.value(arith.Add, total, inner)]

    k.keep(k.for_(zero, k.args["n"], one, [zero], body)[0])
    k.ret()


CASES = {
    "int_chain": int_chain,
    "f32_rounding": f32_rounding,
    "int_wraps": int_wraps,
    "division_by_zero": division_by_zero,
    "compare_and_cast": compare_and_cast,
    "math_function": math_function,
    "not_constant": not_constant,
    "int_identities": int_identities,
    "identities_kept": identities_kept,
    "involutions": involutions,
    "casts": casts,
    "selects": selects,
    "self_comparisons": self_comparisons,
    "extents": extents,
    "constant_if": constant_if,
    "variable_if": variable_if,
    "loops": loops,
    "nested_regions": nested_regions,
}

EXPECTED: dict[str, tuple[bool, str]] = {
    "int_chain": (True, text("""
        func.func @k(%out_i32: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = i32, value = 2} : i32
          %2 = arith.constant() {type = i32, value = 3} : i32
          %3 = arith.constant() {type = i32, value = 5} : i32
          %4 = arith.constant() {type = i32, value = 4} : i32
          %5 = arith.constant() {type = i32, value = 20} : i32
          memory.store(%out_i32, %0, %5)
          func.return()
        }
    """)),
    "f32_rounding": (True, text("""
        func.func @k(%out_f32: array<f32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = f32, value = 0.1} : f32
          %2 = arith.constant() {type = f32, value = 0.2} : f32
          %3 = arith.constant() {type = f32, value = 0.30000001192092896} : f32
          memory.store(%out_f32, %0, %3)
          func.return()
        }
    """)),
    "int_wraps": (True, text("""
        func.func @k(%out_i32: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = i32, value = 2147483647} : i32
          %2 = arith.constant() {type = i32, value = 1} : i32
          %3 = arith.constant() {type = i32, value = -2147483648} : i32
          memory.store(%out_i32, %0, %3)
          func.return()
        }
    """)),
    "division_by_zero": (True, text("""
        func.func @k(%out_i32: array<i32, 1>, %out_f32: array<f32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = i32, value = 7} : i32
          %2 = arith.constant() {type = i32, value = 0} : i32
          %3 = arith.constant() {type = i32, value = 0} : i32
          %4 = arith.constant() {type = f32, value = 1.0} : f32
          %5 = arith.constant() {type = f32, value = 0.0} : f32
          %6 = arith.constant() {type = f32, value = inf} : f32
          memory.store(%out_i32, %0, %3)
          memory.store(%out_f32, %0, %6)
          func.return()
        }
    """)),
    "compare_and_cast": (True, text("""
        func.func @k(%out_bool: array<bool, 1>, %out_i32: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = i32, value = 1} : i32
          %2 = arith.constant() {type = i32, value = 2} : i32
          %3 = arith.constant() {type = bool, value = true} : bool
          %4 = arith.constant() {type = f32, value = -3.7} : f32
          %5 = arith.constant() {type = i32, value = -3} : i32
          memory.store(%out_bool, %0, %3)
          memory.store(%out_i32, %0, %5)
          func.return()
        }
    """)),
    "math_function": (True, text("""
        func.func @k(%out_f32: array<f32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = f32, value = 2.0} : f32
          %2 = arith.constant() {type = f32, value = 1.4142135381698608} : f32
          memory.store(%out_f32, %0, %2)
          func.return()
        }
    """)),
    "not_constant": (False, text("""
        func.func @k(%x: array<i32, 1>, %out_i32: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = thread.tid() : i32
          %2 = arith.constant() {type = i32, value = 0} : i32
          %3 = memory.load(%x, %2) : i32
          %4 = arith.constant() {type = i32, value = 1} : i32
          %5 = arith.add(%1, %4) : i32
          memory.store(%out_i32, %0, %5)
          memory.store(%out_i32, %0, %3)
          func.return()
        }
    """)),
    "int_identities": (True, text("""
        func.func @k(%n: i32, %out_i32: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = i32, value = 0} : i32
          %2 = arith.constant() {type = i32, value = 1} : i32
          memory.store(%out_i32, %0, %n)
          memory.store(%out_i32, %0, %n)
          memory.store(%out_i32, %0, %n)
          memory.store(%out_i32, %0, %n)
          memory.store(%out_i32, %0, %1)
          memory.store(%out_i32, %0, %1)
          func.return()
        }
    """)),
    "identities_kept": (True, text("""
        func.func @k(%n: i32, %x: f32, %out_i32: array<i32, 1>, %out_f32: array<f32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = i32, value = 0} : i32
          %2 = arith.sub(%1, %n) : i32
          %3 = arith.constant() {type = f32, value = 0.0} : f32
          %4 = arith.add(%x, %3) : f32
          %5 = arith.constant() {type = f32, value = 0.0} : f32
          %6 = arith.mul(%x, %5) : f32
          %7 = arith.constant() {type = f32, value = 1.0} : f32
          memory.store(%out_i32, %0, %2)
          memory.store(%out_f32, %0, %4)
          memory.store(%out_f32, %0, %6)
          memory.store(%out_f32, %0, %x)
          func.return()
        }
    """)),
    "involutions": (True, text("""
        func.func @k(%x: f32, %b: bool, %out_f32: array<f32, 1>, %out_bool: array<bool, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.neg(%x) : f32
          %2 = arith.not(%b) : bool
          memory.store(%out_f32, %0, %x)
          memory.store(%out_f32, %0, %1)
          memory.store(%out_bool, %0, %b)
          func.return()
        }
    """)),
    "casts": (True, text("""
        func.func @k(%n: i32, %out_i32: array<i32, 1>, %out_i64: array<i64, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.cast(%n) {to = i64} : i64
          memory.store(%out_i32, %0, %n)
          memory.store(%out_i64, %0, %1)
          func.return()
        }
    """)),
    "selects": (True, text("""
        func.func @k(%c: bool, %a: i32, %b: i32, %out_i32: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = bool, value = true} : bool
          %2 = arith.constant() {type = bool, value = false} : bool
          %3 = arith.select(%c, %a, %b) : i32
          memory.store(%out_i32, %0, %a)
          memory.store(%out_i32, %0, %b)
          memory.store(%out_i32, %0, %a)
          memory.store(%out_i32, %0, %3)
          func.return()
        }
    """)),
    "self_comparisons": (True, text("""
        func.func @k(%n: i32, %x: f32, %out_bool: array<bool, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = bool, value = false} : bool
          %2 = arith.constant() {type = bool, value = true} : bool
          %3 = arith.cmp(%x, %x) {predicate = "eq"} : bool
          memory.store(%out_bool, %0, %1)
          memory.store(%out_bool, %0, %2)
          memory.store(%out_bool, %0, %3)
          func.return()
        }
    """)),
    "extents": (True, text("""
        func.func @k(%x: array<f32, 2>, %out_i64: array<i64, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = memory.shared() {dtype = f32, shape = (16, 8)} : array<f32, 2, shared, 16x8>
          %2 = arith.constant() {type = i64, value = 8} : i64
          %3 = memory.dim(%x) {axis = 1} : i64
          memory.store(%out_i64, %0, %2)
          memory.store(%out_i64, %0, %3)
          func.return()
        }
    """)),
    "constant_if": (True, text("""
        func.func @k(%n: i32, %out_i32: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = bool, value = true} : bool
          %2 = arith.constant() {type = i32, value = 3} : i32
          %3 = arith.mul(%n, %2) : i32
          %4 = arith.constant() {type = bool, value = false} : bool
          memory.store(%out_i32, %0, %3)
          func.return()
        }
    """)),
    "variable_if": (False, text("""
        func.func @k(%c: bool, %n: i32, %out_i32: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = control.if(%c) : i32 then {
            control.yield(%n)
          } else {
            %2 = arith.constant() {type = i32, value = 0} : i32
            control.yield(%2)
          }
          memory.store(%out_i32, %0, %1)
          func.return()
        }
    """)),
    "loops": (True, text("""
        func.func @k(%n: i32, %out_i32: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = i32, value = 2} : i32
          %2 = arith.constant() {type = i32, value = 5} : i32
          %3 = arith.constant() {type = i32, value = 1} : i32
          %4 = arith.constant() {type = i32, value = -1} : i32
          %5 = arith.constant() {type = i32, value = 0} : i32
          %6 = control.for(%1, %2, %3, %n) : i32 body(%i: i32, %c0: i32) {
            %7 = arith.add(%c0, %i) : i32
            control.yield(%7)
          }
          %8 = control.for(%2, %1, %4, %n) : i32 body(%i1: i32, %c01: i32) {
            %9 = arith.add(%c01, %i1) : i32
            control.yield(%9)
          }
          %10 = control.for(%5, %n, %3, %n) : i32 body(%i2: i32, %c02: i32) {
            %11 = arith.add(%c02, %i2) : i32
            control.yield(%11)
          }
          %12 = control.for(%1, %2, %5, %n) : i32 body(%i3: i32, %c03: i32) {
            %13 = arith.add(%c03, %i3) : i32
            control.yield(%13)
          }
          memory.store(%out_i32, %0, %n)
          memory.store(%out_i32, %0, %n)
          memory.store(%out_i32, %0, %6)
          memory.store(%out_i32, %0, %8)
          memory.store(%out_i32, %0, %10)
          memory.store(%out_i32, %0, %12)
          func.return()
        }
    """)),
    "nested_regions": (True, text("""
        func.func @k(%n: i32, %out_i32: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = i32, value = 0} : i32
          %2 = arith.constant() {type = i32, value = 1} : i32
          %3 = control.for(%1, %n, %2, %1) : i32 body(%i: i32, %c0: i32) {
            %4 = arith.constant() {type = i32, value = 2} : i32
            %5 = arith.constant() {type = bool, value = true} : bool
            %6 = arith.mul(%i, %4) : i32
            %7 = arith.add(%c0, %6) : i32
            control.yield(%7)
          }
          memory.store(%out_i32, %0, %3)
          func.return()
        }
    """)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fold(name):
    module = Module()
    CASES[name](module)
    changed, printed = run_checked(Fold(), module)
    assert (changed, printed) == EXPECTED[name]
