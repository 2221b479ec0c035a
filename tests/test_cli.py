"""The command line: `zymo ir` prints each stage; errors are reported, not raised."""
import subprocess
import sys
import textwrap

import pytest

from zymo.cli import main, parse_signature
from zymo.ir import types as T

KERNELS = textwrap.dedent("""
    import zymo as zm

    @zm.func
    def twice(v):
        return v * 2.0

    @zm.kernel
    def double(x, y):
        i = zm.grid(1)
        if i < x.shape[0]:
            y[i] = twice(x[i])

    @zm.kernel
    def broken(x):
        x[0] = [1.0]
""")


@pytest.fixture
def kernel_file(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    return path


def test_signature_parsing():
    assert parse_signature("float, f32[:], i64[:, :], u8") == [
        float, T.Array(T.f32, 1), T.Array(T.i64, 2), T.u8]


def test_ir_prints_every_stage(kernel_file, capsys):
    assert main(["ir", f"{kernel_file}:double", "--sig", "f32[:], f32[:]",
                 "--print-after", "all"]) == 0
    out = capsys.readouterr().out
    assert "// ---- double: frontend ----" in out
    assert "func.call" in out.split("IR after inline")[0]  # before inlining: a call
    assert "IR after inline" in out and "IR after licm" in out
    final = out.split("// ---- double: after passes ----")[1]
    assert "func.call" not in final and "@twice" not in final


def test_ir_of_one_stage(kernel_file, capsys):
    assert main(["ir", f"{kernel_file}:double", "--sig", "f64[:], f64[:]",
                 "--stage", "frontend"]) == 0
    out = capsys.readouterr().out
    assert "arith.mul" in out and "after passes" not in out


def test_compile_errors_are_printed_with_exit_code_1(kernel_file):
    result = subprocess.run([sys.executable, "-m", "zymo.cli", "ir", f"{kernel_file}:broken",
                             "--sig", "f32[:]", "--stage", "frontend"],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert f"{kernel_file}:16:12: error: unsupported expression in a kernel: list literal" \
        in result.stderr
    assert "Traceback" not in result.stderr


def test_grad_show(tmp_path, capsys):
    from zymo.cli import main
    source = tmp_path / "k.py"
    source.write_text("import zymo as zm\n\n\n@zm.kernel\ndef scale(a, x, y):\n"
                      "    i = zm.grid(1)\n    if i < x.shape[0]:\n        y[i] = a * x[i]\n")
    assert main(["grad", f"{source}:scale", "--sig", "active f64, dup f64[:], dup f64[:]",
                 "--show"]) == 0
    out = capsys.readouterr().out
    assert "grad(scale)" in out and "%dx" in out and "atomic.add(%da" in out
