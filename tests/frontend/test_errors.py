"""Every unsupported construct is a CompileError naming file:line:column, what is wrong and
(where one exists) what to write instead; all errors of a kernel are reported at once."""
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
    assert source_line.strip() == "y = x[1:3]  # E: slices are not supported in kernels"
    assert caret_line.index("^") - 4 == diagnostic.loc.col - 1
    assert source_line[diagnostic.loc.col - 1 + 4:].startswith("1:3")
    assert "hint: index single elements" in text


def test_error_is_picklable():
    import pickle
    with pytest.raises(zm.CompileError) as info:
        error_kernels.many_errors.specialize(np.zeros(4, np.float32))
    again = pickle.loads(pickle.dumps(info.value))
    assert str(again) == str(info.value)
