"""Kernels defined in strings given to exec (numba's tests and users build them so): with
zymo.cuda imported, exec records the string's source for the functions it defines, and
otherwise behaves as Python's."""
from __future__ import annotations

from textwrap import dedent

import numpy as np

from zymo import cuda

SOURCE = dedent("""
    def atomic(res, ary):
        tx = cuda.threadIdx.x
        cuda.atomic.add(res, 0, ary[tx])

    @cuda.jit
    def decorated(x):
        x[0] = 7
""")


def test_a_kernel_from_an_exec_string_compiles():
    namespace = {}
    exec(SOURCE, {"cuda": cuda}, namespace)
    total = np.zeros(1)
    cuda.jit(namespace["atomic"])[1, 8](total, np.arange(8.0))
    assert total[0] == 28
    out = np.zeros(1)
    namespace["decorated"][1, 1](out)
    assert out[0] == 7


def test_exec_keeps_python_semantics():
    namespace = {"x": 5}
    exec("y = x + 1", namespace)
    assert namespace["y"] == 6
    code = compile("z = 2", "<string>", "exec")
    exec(code, namespace)                 # code objects pass through
    assert namespace["z"] == 2
    exec(b"w = 3", namespace)
    assert namespace["w"] == 3
    # annotations: this module's `from __future__ import annotations` applies, as to exec's own
    exec("def f(a: undefined_name): return a", namespace)
    assert namespace["f"].__annotations__ == {"a": "undefined_name"}
