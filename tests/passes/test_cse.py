"""CSE: pure ops merge within their dominance scope; memory ops never merge."""
from __future__ import annotations

import pytest

from zymo.ir import Module
from zymo.ir.types import Array, bool_, f32, i32, i64, u32
from zymo.ops import arith, atomic, memory, thread, warp
from zymo.passes.cse import CSE

from .helpers import FunctionBuilder, run_checked, text


def kernel(module: Module, **args) -> FunctionBuilder:
    return FunctionBuilder(module, "k", list(args.items()))


def pure_duplicates(m):
    """Equal adds merge, in either order (add is commutative); subs only in the same order."""
    k = kernel(m, a=i32, b=i32, out_i32=Array(i32, 1))
    a, b = k.args["a"], k.args["b"]
    k.keep(k.value(arith.Add, a, b), k.value(arith.Add, b, a), k.value(arith.Add, a, b),
           k.value(arith.Sub, a, b), k.value(arith.Sub, b, a), k.value(arith.Sub, a, b))
    k.ret()


def attributes_differ(m):
    """Predicates and thread axes are part of what an op computes."""
    k = kernel(m, a=i32, out_bool=Array(bool_, 1), out_i32=Array(i32, 1))
    a = k.args["a"]
    k.keep(k.value(arith.Cmp, a, a, predicate="lt"), k.value(arith.Cmp, a, a, predicate="le"),
           k.value(arith.Cmp, a, a, predicate="lt"),
           k.value(thread.ThreadIdx, axis="x"), k.value(thread.ThreadIdx, axis="y"),
           k.value(thread.ThreadIdx, axis="x"))
    k.ret()


def float_constants(m):
    """Equal constants merge; 0.0 and -0.0 do not."""
    k = kernel(m, out_f32=Array(f32, 1))
    k.keep(k.const(0.0, f32), k.const(-0.0, f32), k.const(0.0, f32))
    k.ret()


def int_constants(m):
    """1 of i32 and 1 of i64 do not merge."""
    k = kernel(m, out_i32=Array(i32, 1), out_i64=Array(i64, 1))
    k.keep(k.const(1, i32), k.const(1, i64), k.const(1, i32))
    k.ret()


def memory_ops(m):
    """Loads, atomics, shared allocations and warp ops are not pure: all stay."""
    k = kernel(m, x=Array(f32, 1), out_u32=Array(u32, 1))
    x, zero = k.args["x"], k.const(0, i32)
    first = k.value(memory.Load, x, zero)
    second = k.value(memory.Load, x, zero)
    k.create(memory.Store, x, zero, first)
    k.create(memory.Store, x, zero, first)
    old = k.value(atomic.AtomicAdd, x, zero, second)
    again = k.value(atomic.AtomicAdd, x, zero, second)
    tile = k.value(memory.SharedAlloc, shape=(4,), dtype=f32)
    other = k.value(memory.SharedAlloc, shape=(4,), dtype=f32)
    k.create(memory.Store, tile, zero, old)
    k.create(memory.Store, other, zero, again)
    k.keep(k.value(warp.ActiveMask), k.value(warp.ActiveMask))
    k.ret()


def nested_scopes(m):
    """An op before an if or loop dominates the ops in its regions; an op in one branch
    dominates neither the other branch nor the ops after the if."""
    k = kernel(m, c=bool_, a=i32, b=i32, out_i32=Array(i32, 1))
    a, b = k.args["a"], k.args["b"]
    outer = k.value(arith.Mul, a, b)

    def then():
        return [k.value(arith.Add, k.value(arith.Mul, a, b), k.value(arith.Sub, a, b))]

    def else_():
        return [k.value(arith.Sub, a, b)]

    branch = k.if_(k.args["c"], [i32], then, else_)
    after = k.value(arith.Sub, a, b)
    loop = k.for_(a, b, k.const(1, i32), [outer],
                  lambda i, c: [k.value(arith.Add, c, k.value(arith.Mul, b, a))])
    k.keep(outer, branch[0], after, loop[0])
    k.ret()


CASES = {
    "pure_duplicates": pure_duplicates,
    "attributes_differ": attributes_differ,
    "float_constants": float_constants,
    "int_constants": int_constants,
    "memory_ops": memory_ops,
    "nested_scopes": nested_scopes,
}

EXPECTED: dict[str, tuple[bool, str]] = {
    "pure_duplicates": (True, text("""
        func.func @k(%a: i32, %b: i32, %out_i32: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.add(%a, %b) : i32
          %2 = arith.sub(%a, %b) : i32
          %3 = arith.sub(%b, %a) : i32
          memory.store(%out_i32, %0, %1)
          memory.store(%out_i32, %0, %1)
          memory.store(%out_i32, %0, %1)
          memory.store(%out_i32, %0, %2)
          memory.store(%out_i32, %0, %3)
          memory.store(%out_i32, %0, %2)
          func.return()
        }
    """)),
    "attributes_differ": (True, text("""
        func.func @k(%a: i32, %out_bool: array<bool, 1>, %out_i32: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.cmp(%a, %a) {predicate = "lt"} : bool
          %2 = arith.cmp(%a, %a) {predicate = "le"} : bool
          %3 = thread.tid() {axis = "x"} : i32
          %4 = thread.tid() {axis = "y"} : i32
          memory.store(%out_bool, %0, %1)
          memory.store(%out_bool, %0, %2)
          memory.store(%out_bool, %0, %1)
          memory.store(%out_i32, %0, %3)
          memory.store(%out_i32, %0, %4)
          memory.store(%out_i32, %0, %3)
          func.return()
        }
    """)),
    "float_constants": (True, text("""
        func.func @k(%out_f32: array<f32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = f32, value = 0.0} : f32
          %2 = arith.constant() {type = f32, value = -0.0} : f32
          memory.store(%out_f32, %0, %1)
          memory.store(%out_f32, %0, %2)
          memory.store(%out_f32, %0, %1)
          func.return()
        }
    """)),
    "int_constants": (True, text("""
        func.func @k(%out_i32: array<i32, 1>, %out_i64: array<i64, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = i32, value = 1} : i32
          %2 = arith.constant() {type = i64, value = 1} : i64
          memory.store(%out_i32, %0, %1)
          memory.store(%out_i64, %0, %2)
          memory.store(%out_i32, %0, %1)
          func.return()
        }
    """)),
    "memory_ops": (True, text("""
        func.func @k(%x: array<f32, 1>, %out_u32: array<u32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = memory.load(%x, %0) : f32
          %2 = memory.load(%x, %0) : f32
          memory.store(%x, %0, %1)
          memory.store(%x, %0, %1)
          %3 = atomic.add(%x, %0, %2) : f32
          %4 = atomic.add(%x, %0, %2) : f32
          %5 = memory.shared() {dtype = f32, shape = (4)} : array<f32, 1, shared, 4>
          %6 = memory.shared() {dtype = f32, shape = (4)} : array<f32, 1, shared, 4>
          memory.store(%5, %0, %3)
          memory.store(%6, %0, %4)
          %7 = warp.activemask() : u32
          %8 = warp.activemask() : u32
          memory.store(%out_u32, %0, %7)
          memory.store(%out_u32, %0, %8)
          func.return()
        }
    """)),
    "nested_scopes": (True, text("""
        func.func @k(%c: bool, %a: i32, %b: i32, %out_i32: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.mul(%a, %b) : i32
          %2 = control.if(%c) : i32 then {
            %3 = arith.sub(%a, %b) : i32
            %4 = arith.add(%1, %3) : i32
            control.yield(%4)
          } else {
            %5 = arith.sub(%a, %b) : i32
            control.yield(%5)
          }
          %6 = arith.sub(%a, %b) : i32
          %7 = arith.constant() {type = i32, value = 1} : i32
          %8 = control.for(%a, %b, %7, %1) : i32 body(%i: i32, %c0: i32) {
            %9 = arith.add(%c0, %1) : i32
            control.yield(%9)
          }
          memory.store(%out_i32, %0, %1)
          memory.store(%out_i32, %0, %2)
          memory.store(%out_i32, %0, %6)
          memory.store(%out_i32, %0, %8)
          func.return()
        }
    """)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_cse(name):
    module = Module()
    CASES[name](module)
    changed, printed = run_checked(CSE(), module)
    assert (changed, printed) == EXPECTED[name]
