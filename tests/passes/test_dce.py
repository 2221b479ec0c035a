"""DCE: unused effect-free ops, branches and loops go; effects and what they use stay."""
from __future__ import annotations

import pytest

from zymo.ir import Module
from zymo.ir.types import Array, bool_, f32, i32
from zymo.ops import arith, atomic, memory, sync, thread, warp
from zymo.passes.dce import DCE

from .helpers import FunctionBuilder, run_checked, text


def kernel(module: Module, **args) -> FunctionBuilder:
    return FunctionBuilder(module, "k", list(args.items()))


def unused_values(m):
    """A dead chain goes in one run, with constants, loads and allocations; the store and
    what it uses stay."""
    k = kernel(m, x=Array(f32, 1), n=i32)
    x, zero = k.args["x"], k.const(0, i32)
    loaded = k.value(memory.Load, x, zero)
    k.value(arith.Mul, k.value(arith.Add, k.args["n"], k.const(7, i32)), k.value(thread.ThreadIdx))
    k.value(memory.Load, x, k.const(1, i32))
    k.value(memory.SharedAlloc, shape=(32,), dtype=f32)
    k.value(memory.LocalAlloc, shape=(4,), dtype=f32)
    k.create(memory.Store, x, zero, loaded)
    k.ret()


def effects_kept(m):
    """Atomics with unused results, barriers, warp ops and calls stay."""
    k = kernel(m, x=Array(f32, 1), v=f32)
    zero = k.const(0, i32)
    k.value(atomic.AtomicAdd, k.args["x"], zero, k.args["v"])
    k.create(sync.Barrier)
    mask = k.value(warp.ActiveMask)
    k.value(warp.ShflDown, mask, k.args["v"], k.const(1, i32))
    k.call("helper", [f32], k.args["v"])
    k.ret()
    helper = FunctionBuilder(m, "helper", [("v", f32)], [f32], kind="device")
    helper.ret(helper.args["v"])


def dead_branches(m):
    """An if with unused results and no effects goes; one with a store or a barrier stays,
    and loses the results nobody uses."""
    k = kernel(m, c=bool_, n=i32, x=Array(i32, 1))
    c, n, x = k.args["c"], k.args["n"], k.args["x"]
    k.if_(c, [i32], lambda: [k.value(arith.Add, n, n)], lambda: [n])

    def store_then_yield():
        k.create(memory.Store, x, n, n)
        return [k.value(arith.Mul, n, n), n]

    def barrier_then_yield():
        k.create(sync.Barrier)
        return [n, k.value(arith.Sub, n, n)]

    k.if_(c, [i32, i32], store_then_yield, barrier_then_yield)
    used = k.if_(c, [i32, i32], lambda: [n, k.value(arith.Neg, n)], lambda: [n, n])
    k.create(memory.Store, x, n, used[1])
    k.ret()


def dead_loops(m):
    """A for with unused results and a pure body (an if included) goes; a for with a store
    stays; a while stays even when pure (it may not terminate), and so does a for around it."""
    k = kernel(m, n=i32, x=Array(i32, 1))
    n, x = k.args["n"], k.args["x"]
    zero, one = k.const(0, i32), k.const(1, i32)
    k.for_(zero, n, one, [zero], lambda i, c: [k.value(arith.Add, c, i)])

    def pure_if_body(i):
        k.if_(k.value(arith.Cmp, i, n, predicate="lt"), [i32], lambda: [i], lambda: [n])
        return []

    k.for_(zero, n, one, [], pure_if_body)

    def store_body(i):
        k.create(memory.Store, x, i, i)
        return []

    k.for_(zero, n, one, [], store_body)

    def while_body(i):
        k.while_([i], lambda c: k.value(arith.Cmp, c, n, predicate="lt"),
                 lambda c: [k.value(arith.Add, c, one)])
        return []

    k.for_(zero, n, one, [], while_body)
    k.ret()


def carried_values(m):
    """Carried value 0 is used after the loop; 1 feeds only itself (dead); 2 feeds value 0
    (alive); 3 is only passed through (dead); 4 is used in a nested if (kept: the pass does
    not look into nested regions)."""
    k = kernel(m, n=i32, x=Array(i32, 1))
    n, x = k.args["n"], k.args["x"]
    zero, one = k.const(0, i32), k.const(1, i32)

    def body(i, total, dead, feeding, passed, nested):
        c = k.value(arith.Cmp, i, n, predicate="lt")
        return [k.value(arith.Add, total, feeding), k.value(arith.Mul, dead, i),
                k.value(arith.Add, feeding, one), passed,
                k.if_(c, [i32], lambda: [k.value(arith.Add, nested, one)], lambda: [nested])[0]]

    results = k.for_(zero, n, one, [zero, one, n, k.const(5, i32), one], body)
    k.create(memory.Store, x, zero, results[0])
    k.ret()


CASES = {
    "unused_values": unused_values,
    "effects_kept": effects_kept,
    "dead_branches": dead_branches,
    "dead_loops": dead_loops,
    "carried_values": carried_values,
}

EXPECTED: dict[str, tuple[bool, str]] = {
    "unused_values": (True, text("""
        func.func @k(%x: array<f32, 1>, %n: i32) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = memory.load(%x, %0) : f32
          memory.store(%x, %0, %1)
          func.return()
        }
    """)),
    "effects_kept": (False, text("""
        func.func @k(%x: array<f32, 1>, %v: f32) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = atomic.add(%x, %0, %v) : f32
          sync.barrier()
          %2 = warp.activemask() : u32
          %3 = arith.constant() {type = i32, value = 1} : i32
          %4 = warp.shfl_down(%2, %v, %3) : f32
          %5 = func.call(%v) {callee = "helper"} : f32
          func.return()
        }

        func.func @helper(%v1: f32) -> (f32) device {
          func.return(%v1)
        }
    """)),
    "dead_branches": (True, text("""
        func.func @k(%c: bool, %n: i32, %x: array<i32, 1>) kernel {
          control.if(%c) then {
            memory.store(%x, %n, %n)
            control.yield()
          } else {
            sync.barrier()
            control.yield()
          }
          %0 = control.if(%c) : i32 then {
            %1 = arith.neg(%n) : i32
            control.yield(%1)
          } else {
            control.yield(%n)
          }
          memory.store(%x, %n, %0)
          func.return()
        }
    """)),
    "dead_loops": (True, text("""
        func.func @k(%n: i32, %x: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = i32, value = 1} : i32
          control.for(%0, %n, %1) body(%i: i32) {
            memory.store(%x, %i, %i)
            control.yield()
          }
          control.for(%0, %n, %1) body(%i1: i32) {
            %2 = control.while(%i1) : i32 before(%3: i32) {
              %4 = arith.cmp(%3, %n) {predicate = "lt"} : bool
              control.condition(%4)
            } body(%5: i32) {
              %6 = arith.add(%5, %1) : i32
              control.yield(%6)
            }
            control.yield()
          }
          func.return()
        }
    """)),
    "carried_values": (True, text("""
        func.func @k(%n: i32, %x: array<i32, 1>) kernel {
          %0 = arith.constant() {type = i32, value = 0} : i32
          %1 = arith.constant() {type = i32, value = 1} : i32
          %2, %3, %4 = control.for(%0, %n, %1, %0, %n, %1) : i32, i32, i32 body(%i: i32, %c0: i32, %c2: i32, %c4: i32) {
            %5 = arith.cmp(%i, %n) {predicate = "lt"} : bool
            %6 = arith.add(%c0, %c2) : i32
            %7 = arith.add(%c2, %1) : i32
            %8 = control.if(%5) : i32 then {
              %9 = arith.add(%c4, %1) : i32
              control.yield(%9)
            } else {
              control.yield(%c4)
            }
            control.yield(%6, %7, %8)
          }
          memory.store(%x, %0, %2)
          func.return()
        }
    """)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_dce(name):
    module = Module()
    CASES[name](module)
    changed, printed = run_checked(DCE(), module)
    assert (changed, printed) == EXPECTED[name]
