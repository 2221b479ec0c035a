"""Index forms and host expressions, as the ops' rules give them (`index_form_rule`,
`host_rule` in each op's stanza)."""
from __future__ import annotations

import numpy as np

from zymo.ad.tape import host_value
from zymo.ir import Module
from zymo.ir.types import Array, f32, i16, i32, i64
from zymo.ops import arith, memory, thread
from zymo.passes.indexing import (BlockBase, IndexForms, ThreadAffine, Uniform, VARYING, Wrapped,
                                  host_expression)

from .helpers import FunctionBuilder


def kernel(**args) -> FunctionBuilder:
    return FunctionBuilder(Module(), "k", list(args.items()))


def test_global_index_plus_a_uniform_offset_is_thread_affine():
    k = kernel(n=i32, x=Array(f32, 1))
    n = k.args["n"]
    base = k.value(arith.Mul, k.value(thread.BlockIdx, axis="y"),
                   k.value(thread.BlockDim, axis="y"))
    gid = k.value(arith.Add, k.value(thread.ThreadIdx, axis="y"), base)
    shifted = k.value(arith.Sub, gid, n)
    wide = k.value(arith.Cast, shifted, to=i64)
    narrow = k.value(arith.Cast, shifted, to=i16)
    forms = IndexForms(k.func)
    assert isinstance(forms.form(base), BlockBase) and forms.form(base).axis == "y"
    assert forms.form(gid) == ThreadAffine("y", "gid", ())
    moved = forms.form(shifted)
    assert (moved.axis, moved.base, moved.parts) == ("y", "gid", ((-1, n, True),))
    assert forms.form(wide) == moved          # widening keeps distinct indices distinct
    assert forms.form(narrow) is VARYING      # narrowing may not
    owned = forms.ownership([shifted], "global")
    assert owned is not None and owned.axes == frozenset("y")


def test_wrapped_uniform_and_varying_forms():
    k = kernel(n=i32, x=Array(f32, 1))
    n = k.args["n"]
    tid = k.value(thread.ThreadIdx, axis="x")
    wrapped = k.value(arith.Mod, k.value(arith.Add, tid, k.const(1, i32)), n)
    uniform = k.value(arith.Mul, n, k.value(thread.BlockIdx, axis="x"))
    squared = k.value(arith.Mul, tid, tid)
    loaded = k.value(memory.Load, k.args["x"], tid)
    forms = IndexForms(k.func)
    assert isinstance(forms.form(wrapped), Wrapped) and forms.form(wrapped).modulus is n
    assert isinstance(forms.form(uniform), Uniform) and forms.form(uniform).invariant
    assert forms.form(squared) is VARYING and forms.form(loaded) is VARYING
    owned = forms.ownership([wrapped], "shared")
    assert owned is not None and [w.modulus for w in owned.wraps] == [("arg", 0)]


def test_a_wrap_modulus_is_read_as_the_kernel_reads_it():
    """The launch checks threads <= n with n as it reads it: a modulus through a cast (which
    may narrow it) is not one it can check, so the index is not proven owned."""
    k = kernel(n=i64, x=Array(f32, 1))
    tid = k.value(thread.ThreadIdx, axis="x")
    narrowed = k.value(arith.Mod, tid, k.value(arith.Cast, k.args["n"], to=i32))
    direct = k.value(arith.Mod, k.value(arith.Cast, tid, to=i64), k.args["n"])
    forms = IndexForms(k.func)
    assert isinstance(forms.form(narrowed), Wrapped)
    assert forms.ownership([narrowed], "shared") is None
    assert forms.ownership([direct], "shared").wraps[0].modulus == ("arg", 0)


def test_host_expressions_evaluate_with_the_ops_interp_rules():
    k = kernel(n=i32, x=Array(f32, 2))
    n, x = k.args["n"], k.args["x"]
    rows = k.value(memory.Dim, x, axis=1)
    value = k.value(arith.Max, k.value(arith.FloorDiv, k.value(arith.Sub, k.value(
        arith.Cast, n, to=i64), rows), k.const(-3, i64)), k.const(2, i64))
    tid = k.value(thread.ThreadIdx, axis="x")
    params = k.func.body.block
    expr = host_expression(value, params)
    assert host_expression(rows, params) == ("dim", 1, 1)
    assert host_expression(k.value(arith.Add, n, k.value(arith.Cast, tid, to=i32)),
                           params) is None        # a thread's value is not the launch's
    shape = np.zeros((4, 29)).shape
    sources = {("arg", 0): 7, ("dim", 1, 1): shape[1]}

    def argument(source):
        return source[1] if source[0] == "const" else sources[source]

    assert host_value(expr, argument) == max((7 - 29) // -3, 2)
    assert host_value(expr, lambda source: None) is None
