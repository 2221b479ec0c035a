"""MergeIfs and EarlyLoads (the codegen stage): adjacent `if`s on one condition become one, and
loads move above the loops before them as far as writes that may alias allow."""
from __future__ import annotations

import numpy as np
import pytest

from zymo.ir import Module
from zymo.ir.types import Array, bool_, f32, i32
from zymo.ops import arith, memory
from zymo.passes.early import EarlyLoads, MergeIfs

from .helpers import FunctionBuilder, run_checked
from .test_semantics import launch


def kernel(module: Module, **args) -> FunctionBuilder:
    return FunctionBuilder(module, "k", list(args.items()))


def two_guards(m):
    """The second `if` reads the first one's result in both branches."""
    k = kernel(m, c=bool_, x=Array(f32, 1))
    c, x = k.args["c"], k.args["x"]
    zero, one, two = k.const(0, i32), k.const(1, i32), k.const(2, i32)
    r = k.if_(c, [f32], lambda: [k.value(arith.Mul, k.value(memory.Load, x, zero),
                                         k.const(2.0, f32))],
              lambda: [k.const(1.0, f32)])[0]

    def then():
        k.create(memory.Store, x, one, k.value(arith.Add, r, k.const(1.0, f32)))
        return []

    def otherwise():
        k.create(memory.Store, x, two, r)
        return []

    k.if_(c, [], then, otherwise)
    k.create(memory.Store, x, k.const(3, i32), r)
    k.ret()


def loads_after_loops(m):
    """`a` follows a loop that writes only a local array; `b` a loop that writes global `x`;
    `c` reads `x` itself."""
    k = kernel(m, n=i32, x=Array(f32, 1), y=Array(f32, 1), t=Array(f32, 1))
    n, x, y, t = (k.args[a] for a in "nxyt")
    zero, one, two = k.const(0, i32), k.const(1, i32), k.const(2, i32)
    scratch = k.value(memory.LocalAlloc, shape=(4,), dtype=f32)

    def fill(i):
        k.create(memory.Store, scratch, zero, k.value(arith.Cast, i, to=f32))
        return []

    def ones(i):
        k.create(memory.Store, x, i, k.const(1.0, f32))
        return []

    k.for_(zero, n, one, [], fill)
    a = k.value(memory.Load, y, zero)
    k.for_(zero, n, one, [], ones)
    b = k.value(memory.Load, y, one)
    c = k.value(memory.Load, x, two)
    a.name_hint, b.name_hint, c.name_hint = "a", "b", "c"
    k.create(memory.Store, t, zero, k.value(arith.Add, k.value(arith.Add, a, b), c))
    k.ret()


def prefetch_after_loop(m):
    """A loop that only copies `y` into a local array, after a loop that writes `x`; a loop
    that writes global memory after it (not a candidate)."""
    k = kernel(m, n=i32, x=Array(f32, 1), y=Array(f32, 1), t=Array(f32, 1))
    n, x, y, t = (k.args[a] for a in "nxyt")
    zero, one, four = k.const(0, i32), k.const(1, i32), k.const(4, i32)
    buf = k.value(memory.LocalAlloc, shape=(4,), dtype=f32)

    def ones(i):
        k.create(memory.Store, x, i, k.const(1.0, f32))
        return []

    def prefetch(i):
        k.create(memory.Store, buf, i, k.value(memory.Load, y, i))
        return []

    def use(i):
        k.create(memory.Store, t, i, k.value(arith.Add, k.value(memory.Load, buf, i),
                                             k.value(memory.Load, x, i)))
        return []

    k.for_(zero, n, one, [], ones)
    k.for_(zero, four, one, [], prefetch)
    k.for_(zero, four, one, [], use)
    k.ret()


def dynamic_shared(m):
    """Two `zm.shared.array(0, ...)` are one memory: a loop writing `a` must stay before the
    load of `b` (helper-found: moved, the GPU read the stale -1)."""
    k = kernel(m, n=i32, x=Array(f32, 1))
    n, x = k.args["n"], k.args["x"]
    zero, one = k.const(0, i32), k.const(1, i32)
    a = k.value(memory.SharedAlloc, shape=(0,), dtype=f32)
    b = k.value(memory.SharedAlloc, shape=(0,), dtype=f32)
    k.create(memory.Store, b, zero, k.const(-1.0, f32))

    def fill(i):
        k.create(memory.Store, a, zero, k.value(arith.Cast, i, to=f32))
        return []

    k.for_(zero, n, one, [], fill)
    v = k.value(memory.Load, b, zero)
    v.name_hint = "v"
    k.create(memory.Store, x, zero, v)
    k.ret()


def test_adjacent_ifs_on_one_condition_merge():
    module = Module()
    two_guards(module)
    changed, printed = run_checked(MergeIfs(), module)
    assert changed and printed.count("control.if") == 1
    merged = printed[printed.index("control.if"):]
    then, otherwise = merged.split("} else {")[:2]
    assert "arith.add" in then and "memory.store(%x, %" in otherwise
    assert "control.yield(%" in then    # the first `if`'s result still leaves the merged one


def _order(printed: str, *needles: str) -> list[int]:
    return [printed.index(needle) for needle in needles]


def test_loads_move_above_loops_that_cannot_write_them():
    module = Module()
    loads_after_loops(module)
    changed, printed = run_checked(EarlyLoads(noalias=False), module)
    assert changed
    first_loop, second_loop = (i for i in range(len(printed))
                               if printed.startswith("control.for", i))
    a, b, c = _order(printed, "%a = ", "%b = ", "%c = ")
    assert a < first_loop                       # past a loop that writes a local array only
    assert b > second_loop and c > second_loop  # x may be y: the write to x stops both


def test_with_noalias_only_writes_to_the_same_array_stop_a_load():
    module = Module()
    loads_after_loops(module)
    changed, printed = run_checked(EarlyLoads(noalias=True), module)
    first_loop, second_loop = (i for i in range(len(printed))
                               if printed.startswith("control.for", i))
    a, b, c = _order(printed, "%a = ", "%b = ", "%c = ")
    assert a < first_loop and b < first_loop
    assert c > second_loop                      # the loop writes x itself


@pytest.mark.parametrize("noalias", [False, True])
def test_dynamic_shared_arrays_are_one_memory(noalias):
    module = Module()
    dynamic_shared(module)
    changed, printed = run_checked(EarlyLoads(noalias), module)
    assert not changed and printed.index("%v = ") > printed.index("control.for")


@pytest.mark.parametrize("noalias", [False, True])
def test_a_loop_that_only_loads_moves_like_a_load(noalias):
    """A derivative's prefetch loops (shadow elements into local arrays) start before the
    forward sweep's loops; with `noalias` past a loop that writes another argument."""
    module = Module()
    prefetch_after_loop(module)
    changed, printed = run_checked(EarlyLoads(noalias), module)
    loops = [printed.index(f"memory.{kind}(%{array}") for kind, array in
             (("store", "x"), ("load", "y"), ("store", "t"))]
    assert changed == noalias
    assert (loops[1] < loops[0]) == noalias and loops[2] > max(loops[:2])


@pytest.mark.parametrize("case, make", [("two_guards", lambda: MergeIfs()),
                                        ("loads_after_loops", lambda: EarlyLoads(True)),
                                        ("prefetch_after_loop", lambda: EarlyLoads(True))])
def test_same_memory(case, make):
    build = {"two_guards": two_guards, "loads_after_loops": loads_after_loops,
             "prefetch_after_loop": prefetch_after_loop}[case]
    original, rewritten = Module(), Module()
    build(original)
    build(rewritten)
    make().run(rewritten)
    for seed in range(4):
        for want, got in zip(launch(original, seed), launch(rewritten, seed)):
            np.testing.assert_array_equal(got, want)
