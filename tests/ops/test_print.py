"""print() in kernels, as numba's: one line per thread that runs it, integers as %lld/%llu and
floats as %f (C's printf on the CPU, vprintf on the GPU, the same text from the interpreter)."""
from __future__ import annotations

import numpy as np
import pytest

from zymo.backend.nvptx import ptxas
from zymo.diagnostics import CompileError

from . import print_kernels as K

EXPECTED = ["thread 0 of 7 has 0.500000 50 %", "thread 1 of 7 has 1.500000 50 %",
            "thread 2 of 7 has 2.500000 50 %"]


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line]


def test_interpreter_prints_each_thread_in_order(capsys):
    K.show.on("interp")[2, 4](np.arange(8) + 0.5, 7)
    assert _lines(capsys.readouterr().out) == EXPECTED


def test_cpu_prints_through_printf(capfd):
    K.show.on("cpu")[2, 4](np.arange(8) + 0.5, 7)
    assert sorted(_lines(capfd.readouterr().out)) == EXPECTED


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_sep_end_and_unsigned(backend, capfd):
    K.show_sep.on(backend)[1, 1](np.array([1.25], np.float32))
    assert capfd.readouterr().out == "1.250000, 200, -5!\n"


def test_printing_a_tuple_says_what_to_write():
    with pytest.raises(CompileError, match="print\\(\\) of a tuple"):
        K.show_tuple.specialize(np.zeros(2))


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
def test_ptx_calls_vprintf():
    ptx = K.show.specialize(np.zeros(4), 1).ptx("sm_90")
    assert "call.uni (retval0), vprintf" in ptx and ".const .align 1 .b8 zymo_$_str_$_0" in ptx
    ptxas.assemble(ptx, "sm_90")
