"""Every unsupported construct is a CompileError naming file:line:column, what is wrong and
(where one exists) what to write instead; all errors of a kernel are reported at once."""
import math
import re
from pathlib import Path

import numpy as np
import pytest

import zymo as zm

from . import error_kernels

SOURCE = Path(error_kernels.__file__)
MARK = re.compile(r"#\s*E:\s*(.*)$")


def expected_errors() -> dict[str, list[tuple[int, str]]]:
    """kernel name -> [(line, message)] read from the `# E:` marks of error_kernels.py."""
    table: dict[str, list[tuple[int, str]]] = {}
    current = None
    for number, line in enumerate(SOURCE.read_text().splitlines(), start=1):
        header = re.match(r"def (\w+)\(", line)
        if header:
            current = header.group(1)
        match = MARK.search(line)
        if match and current:
            table.setdefault(current, []).append((number, match.group(1).strip()))
    table["calls_recursive"] = table.pop("recursive")  # reported where it is called
    return table


EXPECTED = expected_errors()
ARGS = {"int_pow_runtime": (np.zeros(4, np.int32), np.int32(3))}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_error_message(name):
    kernel = getattr(error_kernels, name)
    args = ARGS.get(name, (np.zeros(4, np.float32),))
    with pytest.raises(zm.CompileError) as info:
        kernel.specialize(*args)
    got = [(d.loc.line, d.message) for d in info.value.diagnostics]
    assert got == EXPECTED[name]
    for diagnostic in info.value.diagnostics:
        assert Path(diagnostic.loc.file) == SOURCE
        text = diagnostic.format()
        assert text.startswith(f"{SOURCE}:{diagnostic.loc.line}:{diagnostic.loc.col}: error: ")
        assert "^" in text  # the source line with a caret under the column


def test_at_least_fifteen_constructs():
    assert len(EXPECTED) >= 15


def test_all_errors_at_once():
    with pytest.raises(zm.CompileError) as info:
        error_kernels.many_errors.specialize(np.zeros(4, np.float32))
    assert len(info.value.diagnostics) == 3
    assert str(info.value).startswith("3 errors")


def test_hint_and_caret_column():
    with pytest.raises(zm.CompileError) as info:
        error_kernels.slicing.specialize(np.zeros(4, np.float32))
    (diagnostic,) = info.value.diagnostics
    text = diagnostic.format()
    source_line, caret_line = text.splitlines()[1:3]
    assert source_line.strip() == ("y = x[::x.shape[0]]  # E: a slice step must be a non-zero "
                                   "integer known at compile time")
    assert caret_line.index("^") - 4 == diagnostic.loc.col - 1
    assert source_line[diagnostic.loc.col - 1 + 4:].startswith("x[::x.shape[0]]")
    assert "hint: write a literal step" in text


def test_error_is_picklable():
    import pickle
    with pytest.raises(zm.CompileError) as info:
        error_kernels.many_errors.specialize(np.zeros(4, np.float32))
    again = pickle.loads(pickle.dumps(info.value))
    assert str(again) == str(info.value)


# misspelled names: the error names what was probably meant (the kernels are here, in a real
# file, because zymo reads their source)
@zm.kernel
def misspelled_intrinsics(x):
    zm.syncthread()
    x[zm.threadIdx.w] = 1.0
    x[1] = math.sinn(1.0)
    x[2] = zm.math.sqrtt(2.0)
    zm.atomic.ad(x, 0, 1.0)


@zm.kernel
def misspelled_names(x):
    value = 1.0  # noqa: F841 - the misspellings are the point
    x[0] = valeu  # noqa: F821
    syncthreads()  # noqa: F821


def test_misspelled_intrinsics_suggest_the_name_meant():
    with pytest.raises(zm.CompileError) as info:
        misspelled_intrinsics.specialize(np.zeros(4, np.float32))
    got = [(d.message, d.hint) for d in info.value.diagnostics]
    assert got == [
        ("zm has no attribute 'syncthread'; did you mean 'syncthreads', 'syncthreads_or' or "
         "'syncthreads_and'?",
         "README.md lists the kernel language zymo supports"),
        # one letter is close to no other: the namespace's few names are listed instead
        ("zm.threadIdx has no attribute 'w'", "zm.threadIdx has x, y and z"),
        ("math has no attribute 'sinn'; did you mean 'sin', 'sinh' or 'asin'?", ""),
        ("zm.math has no attribute 'sqrtt'; did you mean 'sqrt'?", ""),
        ("zm.atomic has no attribute 'ad'; did you mean 'add'?",
         "zm.atomic has add, and_, cas, compare_and_swap, dec, exch, inc, max, min, nanmax, "
         "nanmin, or_, sub and xor"),
    ]


def test_misspelled_names_suggest_locals_and_intrinsics():
    with pytest.raises(zm.CompileError) as info:
        misspelled_names.specialize(np.zeros(4, np.float32))
    assert [d.message for d in info.value.diagnostics] == [
        "name 'valeu' is not defined; did you mean 'value'?",
        "name 'syncthreads' is not defined; did you mean 'zm.syncthreads'?",
    ]


def test_no_suggestion_for_a_name_close_to_nothing():
    from zymo.frontend.resolve import did_you_mean
    assert did_you_mean("not_defined_anywhere", ["x", "value", "range"]) == ""
    assert did_you_mean("rnage", ["x", "value", "range"]) == "; did you mean 'range'?"
