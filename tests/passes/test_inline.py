"""Inline: calls become the callee's ops with derived ids; recursive functions stay functions."""
from __future__ import annotations

import pytest

from zymo.diagnostics import CompileError, Loc
from zymo.ir import Module
from zymo.ir.types import Array, bool_, f32, i32
from zymo.ops import arith, memory
from zymo.passes.inline import Inline

from .helpers import FunctionBuilder, run_checked, text


def device(module: Module, name: str, args, outputs) -> FunctionBuilder:
    return FunctionBuilder(module, name, args, outputs, kind="device")


def saxpy(m):
    """The design's example: the call goes, and so does the device function."""
    axpy = device(m, "axpy", [("a", f32), ("x", f32), ("y", f32)], [f32])
    axpy.ret(axpy.value(arith.Add, axpy.value(arith.Mul, axpy.args["a"], axpy.args["x"]),
                        axpy.args["y"]))
    k = FunctionBuilder(m, "saxpy", [("a", f32), ("x", Array(f32, 1)), ("y", Array(f32, 1))])
    i = k.const(0, i32)
    xi, yi = k.value(memory.Load, k.args["x"], i), k.value(memory.Load, k.args["y"], i)
    k.create(memory.Store, k.args["y"], i, k.call("axpy", [f32], k.args["a"], xi, yi)[0])
    k.ret()


def nested_calls(m):
    """square is inlined into twice (two calls), twice into the kernel: four copies, each
    with the path of call ids that led to it."""
    square = device(m, "square", [("v", f32)], [f32])
    square.ret(square.value(arith.Mul, square.args["v"], square.args["v"]))
    twice = device(m, "twice", [("v", f32)], [f32])
    inner = twice.call("square", [f32], twice.args["v"])[0]
    twice.ret(twice.call("square", [f32], inner)[0])
    k = FunctionBuilder(m, "k", [("v", f32), ("out", Array(f32, 1))])
    first = k.call("twice", [f32], k.args["v"])[0]
    second = k.call("twice", [f32], first)[0]
    k.create(memory.Store, k.args["out"], k.const(0, i32), second)
    k.ret()


def control_flow(m):
    """A callee with regions and two results, one its own argument, called in a loop."""
    clamp = device(m, "clamp_count", [("v", i32), ("n", i32)], [i32, i32])
    v, n = clamp.args["v"], clamp.args["n"]
    low = clamp.if_(clamp.value(arith.Cmp, v, n, predicate="lt"), [i32],
                    lambda: [v], lambda: [n])[0]
    clamp.ret(low, n)
    k = FunctionBuilder(m, "k", [("n", i32), ("out", Array(i32, 1))])
    zero, one = k.const(0, i32), k.const(1, i32)

    def body(i, total):
        clamped, bound = k.call("clamp_count", [i32, i32], i, k.args["n"])
        return [k.value(arith.Add, total, k.value(arith.Add, clamped, bound))]

    k.create(memory.Store, k.args["out"], zero,
             k.for_(zero, k.args["n"], one, [zero], body)[0])
    k.ret()


def no_kernel(m):
    """A module of device functions only keeps them all (nothing says which is wanted)."""
    leaf = device(m, "leaf", [("v", bool_)], [bool_])
    leaf.ret(leaf.value(arith.Not, leaf.args["v"]))
    top = device(m, "top", [("v", bool_)], [bool_])
    top.ret(top.call("leaf", [bool_], top.args["v"])[0])


CASES = {
    "saxpy": saxpy,
    "nested_calls": nested_calls,
    "control_flow": control_flow,
    "no_kernel": no_kernel,
}

EXPECTED: dict[str, tuple[bool, str]] = {
    "saxpy": (True, text("""
        func.func @saxpy(%a: f32, %x: array<f32, 1>, %y: array<f32, 1>) kernel {  // id @saxpy
          %0 = arith.constant() {type = i32, value = 0} : i32  // id saxpy.0
          %1 = memory.load(%x, %0) : f32  // id saxpy.1
          %2 = memory.load(%y, %0) : f32  // id saxpy.2
          %3 = arith.mul(%a, %1) : f32  // id saxpy.3/axpy.0
          %4 = arith.add(%3, %2) : f32  // id saxpy.3/axpy.1
          memory.store(%y, %0, %4)  // id saxpy.4
          func.return()  // id saxpy.5
        }
    """)),
    "nested_calls": (True, text("""
        func.func @k(%v: f32, %out: array<f32, 1>) kernel {  // id @k
          %0 = arith.mul(%v, %v) : f32  // id k.0/twice.0/square.0
          %1 = arith.mul(%0, %0) : f32  // id k.0/twice.1/square.0
          %2 = arith.mul(%1, %1) : f32  // id k.1/twice.0/square.0
          %3 = arith.mul(%2, %2) : f32  // id k.1/twice.1/square.0
          %4 = arith.constant() {type = i32, value = 0} : i32  // id k.2
          memory.store(%out, %4, %3)  // id k.3
          func.return()  // id k.4
        }
    """)),
    "control_flow": (True, text("""
        func.func @k(%n: i32, %out: array<i32, 1>) kernel {  // id @k
          %0 = arith.constant() {type = i32, value = 0} : i32  // id k.0
          %1 = arith.constant() {type = i32, value = 1} : i32  // id k.1
          %2 = control.for(%0, %n, %1, %0) : i32 body(%i: i32, %c0: i32) {  // id k.2
            %3 = arith.cmp(%i, %n) {predicate = "lt"} : bool  // id k.3/clamp_count.0
            %4 = control.if(%3) : i32 then {  // id k.3/clamp_count.1
              control.yield(%i)  // id k.3/clamp_count.2
            } else {
              control.yield(%n)  // id k.3/clamp_count.3
            }
            %5 = arith.add(%4, %n) : i32  // id k.4
            %6 = arith.add(%c0, %5) : i32  // id k.5
            control.yield(%6)  // id k.6
          }
          memory.store(%out, %0, %2)  // id k.7
          func.return()  // id k.8
        }
    """)),
    "no_kernel": (True, text("""
        func.func @leaf(%v: bool) -> (bool) device {  // id @leaf
          %0 = arith.not(%v) : bool  // id leaf.0
          func.return(%0)  // id leaf.1
        }

        func.func @top(%v1: bool) -> (bool) device {  // id @top
          %1 = arith.not(%v1) : bool  // id top.0/leaf.0
          func.return(%1)  // id top.1
        }
    """)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_inline(name):
    module = Module()
    CASES[name](module)
    changed, printed = run_checked(Inline(), module, show_ids=True)
    assert (changed, printed) == EXPECTED[name]


def test_undefined_calls_are_all_reported_and_cycles_kept():
    module = Module()
    k = FunctionBuilder(module, "k", [("v", f32)])
    with k.location(Loc("k.py", 3, 4)):
        k.call("ping", [f32], k.args["v"])
    with k.location(Loc("k.py", 4, 4)):
        k.call("missing", [], k.args["v"])
    with k.location(Loc("k.py", 5, 4)):
        k.call("nowhere", [], k.args["v"])
    k.ret()
    ping = device(module, "ping", [("v", f32)], [f32])
    with ping.location(Loc("k.py", 8, 11)):
        ping.ret(ping.call("pong", [f32], ping.args["v"])[0])
    pong = device(module, "pong", [("v", f32)], [f32])
    with pong.location(Loc("k.py", 12, 11)):
        pong.ret(pong.call("ping", [f32], pong.args["v"])[0])
    with pytest.raises(CompileError) as caught:
        Inline().run(module)
    assert str(caught.value) == text("""
        2 errors
        k.py:4:4: error: call of `missing`, which is not defined
        hint: define it with @zm.func

        k.py:5:4: error: call of `nowhere`, which is not defined
        hint: define it with @zm.func
    """)


def test_recursive_functions_stay_functions():
    """A cycle of calls (mutual recursion here) is kept: its functions and the calls of them;
    a function outside the cycle that a member calls is inlined into it."""
    module = Module()
    k = FunctionBuilder(module, "k", [("v", i32)])
    k.call("ping", [i32], k.args["v"])
    k.ret()
    ping = device(module, "ping", [("v", i32)], [i32])
    ping.ret(ping.call("pong", [i32], ping.call("leaf", [i32], ping.args["v"])[0])[0])
    pong = device(module, "pong", [("v", i32)], [i32])
    pong.ret(pong.call("ping", [i32], pong.args["v"])[0])
    leaf = device(module, "leaf", [("v", i32)], [i32])
    leaf.ret(leaf.args["v"])
    changed, printed = run_checked(Inline(), module)
    assert changed
    assert list(module.functions) == ["k", "ping", "pong"]
    assert printed.count("func.call") == 3   # k -> ping, ping -> pong, pong -> ping


def test_unchanged_without_calls():
    module = Module()
    k = FunctionBuilder(module, "k", [("v", i32)])
    k.ret()
    assert run_checked(Inline(), module)[0] is False
