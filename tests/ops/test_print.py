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


def test_printing_an_array_says_what_to_write():
    with pytest.raises(CompileError, match="print\\(\\) takes numbers, strings and tuples"):
        K.show_array.specialize(np.zeros(2))


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_bools_tuples_and_dim3_print_as_python_prints_them(backend, capfd):
    K.show_structures.on(backend)[1, (2, 1, 1)](np.zeros(1), (1, ((2, 4), 3.0), (4,), True))
    lines = capfd.readouterr().out.splitlines()
    assert lines.count("True False") == 2
    assert lines.count("(1, ((2, 4), 3.000000), (4,), True) (0.000000,)") == 2
    assert sorted(line for line in lines if line.endswith(", 0, 0)")) == ["(0, 0, 0)",
                                                                           "(1, 0, 0)"]
    assert lines.count("") == 2


def test_more_values_than_vprintf_takes_prints_the_format_with_a_warning(capfd):
    with pytest.warns(UserWarning, match="cannot print more than 32 items"):
        K.show_many.on("cpu")[1, 1](np.arange(33))
    assert capfd.readouterr().out.strip() == " ".join(["%lld"] * 33)


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")
def test_ptx_calls_vprintf():
    ptx = K.show.specialize(np.zeros(4), 1).ptx("sm_90")
    assert "call.uni (retval0), vprintf" in ptx and ".const .align 1 .b8 zymo_$_str_$_0" in ptx
    ptxas.assemble(ptx, "sm_90")
