"""The command line: each command does its job on the CPU; mistakes are one line `zymo: ...`
with exit code 2 (no traceback), compile errors exit 1, Ctrl-C exits 130."""
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import zymo.runtime.evolution as evolution
from zymo.cli import main, parse_signature
from zymo.ir import types as T

KERNELS = textwrap.dedent("""
    import math

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

    @zm.kernel
    def scale(a, x, y):
        i = zm.grid(1)
        if i < x.shape[0]:
            y[i] = a * math.sin(x[i])

    @zm.kernel
    def gather(x, index, y, n):
        i = zm.grid(1)
        if i < n:
            y[i] = x[index[i]] * x[index[i]]

    @zm.kernel
    def steps(x, y):
        # piecewise constant: its derivative (zero) is not what finite differences see
        i = zm.grid(1)
        if i < x.shape[0]:
            y[i] = math.floor(x[i] * 1e7)

    TILE = 16
""")


@pytest.fixture
def kernel_file(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    return path


def zymo(*args, **options):
    """`python -m zymo ARGS` in a fresh process."""
    return subprocess.run([sys.executable, "-m", "zymo", *map(str, args)], capture_output=True,
                          text=True, **options)


def usage_error(capsys, argv) -> str:
    """The one line a mistake prints, checking exit code 2 (argparse's or ours)."""
    try:
        code = main(argv)
    except SystemExit as exit:
        code = exit.code
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    return captured.err.strip()


# ---- signatures -----------------------------------------------------------------------------
def test_signature_parsing():
    assert parse_signature("float, f32[:], i64[:, :], u8, int") == [
        float, T.Array(T.f32, 1), T.Array(T.i64, 2), T.u8, int]


def test_numba_type_names():
    assert parse_signature("float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, "
                           "uint64, boolean, bool_, bool") == [
        T.f32, T.f64, T.i8, T.i16, T.i32, T.i64, T.u8, T.u16, T.u32, T.u64, T.bool_, T.bool_,
        T.bool_]
    assert parse_signature("float32[:], float32[:, ::1], int64[:,:,::1], f64 [:]") == [
        T.Array(T.f32, 1), T.Array(T.f32, 2), T.Array(T.i64, 3), T.Array(T.f64, 1)]


@pytest.mark.parametrize("sig, message", [
    ("f32[]", "'f32[]': an array type needs its dimensions, e.g. f32[:] or [:, :]"),
    ("float128", "unknown type 'float128' in 'float128'; the types are f16, f32"),
    ("float[:]", "'float[:]': float is a Python number; an array needs an element type, "
                 "e.g. f32[:]"),
    ("float32[::1, :]", "only the last dimension may be contiguous (::1)"),
    ("f32[1:]", "write each dimension as ':' (or '::1' for the last), not '1:'"),
    ("f32[:, :, :, :, :]", "arrays have 1 to 4 dimensions, not 5"),
    ("f32[:", "cannot read the signature 'f32[:'"),
    ("f32,, f32[:]", "cannot read the signature"),
    ("f32*", "cannot read the type 'f32*'"),
])
def test_signature_mistakes(kernel_file, capsys, sig, message):
    line = usage_error(capsys, ["ir", f"{kernel_file}:double", "--sig", sig])
    assert line.startswith("zymo: ") and message in line


# ---- zymo ir --------------------------------------------------------------------------------
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
    assert main(["ir", f"{kernel_file}:double", "--sig", "float64[:], float64[:]",
                 "--stage", "frontend"]) == 0
    out = capsys.readouterr().out
    assert "arith.mul" in out and "after passes" not in out


def test_ir_says_how_python_numbers_are_typed(kernel_file, capsys):
    """`float` in --sig is a Python float: passed as f64 (its exact value), it meets f32 as f32;
    the comment says so where the parameter's f64 would otherwise read as a promotion."""
    assert main(["ir", f"{kernel_file}:scale", "--sig", "float, f32[:], f32[:]",
                 "--stage", "frontend"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("// %a: a Python float, passed as f64; weakly typed, it takes the "
                          "type of what it meets (f32 alone)\n")
    assert "%a: f64" in out and "arith.cast(%a) {to = f32} : f32" in out
    assert main(["ir", f"{kernel_file}:scale", "--sig", "f32, f32[:], f32[:]",
                 "--stage", "frontend"]) == 0
    assert "Python" not in capsys.readouterr().out   # a typed scalar is no Python number


def test_ir_print_after_names_a_pass(kernel_file, capsys):
    line = usage_error(capsys, ["ir", f"{kernel_file}:double", "--sig", "f32[:], f32[:]",
                                "--print-after", "foo"])
    assert line == ("zymo ir: argument --print-after: invalid choice: 'foo' (choose from 'all', "
                    "'inline', 'fold', 'cse', 'dce', 'last-trip', 'licm') (see zymo ir --help)")


def test_compile_errors_are_printed_with_exit_code_1(kernel_file):
    result = zymo("ir", f"{kernel_file}:broken", "--sig", "f32[:]", "--stage", "frontend")
    assert result.returncode == 1
    assert f"{kernel_file}:18:12: error: unsupported expression in a kernel: list literal" \
        in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("target, message", [
    ("{file}", "name a kernel as path.py:kernel, not '{file}'"),
    ("{dir}/nowhere.py:k", "no such file {dir}/nowhere.py"),
    ("{file}:missing", "{file} defines no 'missing'"),
    ("{file}:TILE", "{file}:TILE is not a kernel but int 16"),
    ("{dir}/bad.py:k", "importing {dir}/bad.py failed (at {dir}/bad.py:3): NameError: "
                       "name 'undefined' is not defined"),
])
def test_kernel_targets(kernel_file, capsys, target, message):
    (kernel_file.parent / "bad.py").write_text("import zymo\n\nx = undefined + 1\n")
    names = {"file": kernel_file, "dir": kernel_file.parent}
    line = usage_error(capsys, ["ptx", target.format(**names), "--sig", "f32[:]"])
    assert line == "zymo: " + message.format(**names)


# ---- zymo ptx, zymo grad --------------------------------------------------------------------
def test_ptx(kernel_file, capsys):
    assert main(["ptx", f"{kernel_file}:scale", "--sig", "float32, float32[:], float32[:]",
                 "--arch", "sm_80"]) == 0
    out = capsys.readouterr().out
    assert ".target sm_80" in out and ".entry scale(" in out and ".param .f32" in out


def test_ptx_arch_is_checked(kernel_file, capsys):
    line = usage_error(capsys, ["ptx", f"{kernel_file}:scale", "--sig", "f32, f32[:], f32[:]",
                                "--arch", "hopper"])
    assert line.startswith("zymo ptx: argument --arch: expected a GPU architecture such as "
                           "sm_80 or sm_90, not 'hopper'")


def test_grad_show(kernel_file, capsys):
    assert main(["grad", f"{kernel_file}:scale", "--sig", "active f64, dup f64[:], dup f64[:]",
                 "--show"]) == 0
    out = capsys.readouterr().out
    assert "grad(scale)" in out and "%dx" in out and "%da" in out


def test_grad_unknown_activity(kernel_file, capsys):
    line = usage_error(capsys, ["grad", f"{kernel_file}:scale", "--sig",
                                "actve f64, dup f64[:], dup f64[:]"])
    assert line == ("zymo: unknown activity 'actve' in 'actve f64'; write one of const, active, "
                    "dup, noneed before the type (none: const)")


# ---- zymo check -----------------------------------------------------------------------------
def test_check_grad_passes(kernel_file, capsys):
    assert main(["check", f"{kernel_file}:scale", "--sig", "active f64, dup float64[:], dup f64[:]",
                 "--grid", "2", "--block", "32"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("check_grad(scale) on cpu: pass")
    assert "dot-product" in out and "FAIL" not in out


def test_check_jvp_with_index_arrays_and_python_numbers(kernel_file, capsys):
    assert main(["check", f"{kernel_file}:gather", "--sig", "dup f32[:], i32[:], dup f32[:], int",
                 "--grid", "2", "--block", "16", "--jvp", "--width", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("check_jvp(gather) on cpu: pass") and "direction 1" in out


def test_check_fails_with_exit_code_1(kernel_file, capsys):
    assert main(["check", f"{kernel_file}:steps", "--sig", "dup f64[:], dup f64[:]",
                 "--grid", "1", "--block", "8"]) == 1
    assert "check_grad(steps) on cpu: FAIL" in capsys.readouterr().out


def test_check_mistakes(kernel_file, capsys):
    target = f"{kernel_file}:scale"
    line = usage_error(capsys, ["check", target, "--sig", "f64, f64[:], f64[:]",
                                "--grid", "1", "--block", "8"])
    assert line.startswith("zymo: nothing to check: mark the inputs and outputs in --sig")
    line = usage_error(capsys, ["check", target, "--sig", "active f64, dup f64[:], dup f64[:]",
                                "--grid", "1", "--block", "0"])
    assert line.startswith("zymo check: argument --block: expected 1 to 3 positive integers")
    line = usage_error(capsys, ["check", target, "--sig", "active f64, dup f64[:], dup f64[:]"])
    assert line == ("zymo check: the following arguments are required: --grid, --block "
                    "(see zymo check --help)")


def test_random_arguments_follow_the_signature():
    from zymo.cli import parse_typed_activities, random_arguments
    import zymo as zm
    typed = parse_typed_activities("active float, dup f32[:, :], i64[:], noneed f64[:], int, "
                                   "bool, const u8")
    a, x, index, y, n, flag, small = random_arguments(typed, 6, seed=1)
    assert isinstance(a, zm.Active) and type(a.value) is float and 0.5 <= a.value < 1.5
    assert isinstance(x, zm.Duplicated) and x.value.shape == (6, 6)
    assert x.value.dtype == np.float32 and x.shadow.dtype == np.float32
    assert index.dtype == np.int64 and index.min() >= 0 and index.max() < 6
    assert isinstance(y, zm.DuplicatedNoNeed) and y.value.dtype == np.float64
    assert n == 6 and type(n) is int and flag == np.True_ and small == np.uint8(6)


# ---- zymo bench -----------------------------------------------------------------------------
def test_bench_runs_from_the_package(tmp_path, monkeypatch, capsys):
    """The suite ships inside the package (zymo/bench/), so an installed zymo has it; small
    sizes here, the real ones are `zymo bench --quick`."""
    from zymo.bench import cpu, kernels
    x = np.ones(256, np.float32)
    y = np.ones(256, np.float32)
    monkeypatch.setenv("ZYMO_BENCH_CPU", "1")
    monkeypatch.setattr(cpu, "cases", lambda quick: [
        ("saxpy", "n=256", lambda: kernels.saxpy[1, 256](2.0, x, y), lambda: 2 * x + y)])
    monkeypatch.setattr(cpu, "cold_compile_ms", lambda: 1.0)
    monkeypatch.setattr(cpu, "INTERP_THREADS", 256)
    report = tmp_path / "bench.md"
    assert main(["bench", "--quick", "--output", str(report)]) == 0
    captured = capsys.readouterr()
    assert "| saxpy | n=256 |" in captured.out
    assert report.read_text() == captured.out.rstrip("\n") + "\n"
    assert "saxpy (n=256): zymo" in captured.err            # progress, case by case
    assert f"report written to {report}" in captured.err


def test_bench_suite_is_package_code():
    import zymo
    folder = Path(zymo.__file__).parent / "bench"
    assert {"__init__.py", "cpu.py", "kernels.py", "gpu_kernels.py"} <= \
        {path.name for path in folder.iterdir()}


def test_bench_output_is_checked_before_the_run(tmp_path, capsys):
    missing = tmp_path / "missing" / "x.md"
    line = usage_error(capsys, ["bench", "--output", str(missing)])
    assert line == f"zymo: --output {missing}: no such folder {missing.parent}"
    line = usage_error(capsys, ["bench", "--output", str(tmp_path)])
    assert line.startswith(f"zymo: --output {tmp_path}: is a folder")


# ---- the command as a whole -----------------------------------------------------------------
def test_version_and_python_dash_m(tmp_path):
    import zymo as zm
    done = zymo("--version")
    assert done.returncode == 0 and done.stdout == f"zymo {zm.__version__}\n"
    done = zymo("--help")
    assert done.returncode == 0
    for command in ("ir", "ptx", "grad", "check", "bench", "evolve", "cache"):
        assert f"    {command} " in done.stdout
    assert "not available" not in done.stdout


def test_mistakes_are_one_line_without_a_traceback(tmp_path, capsys):
    done = zymo("bench", "--output", tmp_path / "missing" / "x.md")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("zymo: --output ") and done.stdout == ""
    line = usage_error(capsys, ["frobnicate"])
    assert line.startswith("zymo: argument COMMAND: invalid choice: 'frobnicate'")


def test_ctrl_c_exits_130(kernel_file, monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr("zymo.cli.cmd_ptx", interrupted)
    assert main(["ptx", f"{kernel_file}:scale", "--sig", "f32, f32[:], f32[:]"]) == 130
    assert capsys.readouterr().err == "zymo: interrupted\n"


def test_an_interrupted_evolve_reports_what_it_saved_and_exits_130(tmp_path, monkeypatch,
                                                                     capsys):
    """zm.evolve catches Ctrl-C itself (it saves the checkpoint and returns the best so far):
    the command writes the report and edit list of that, skips minimizing, and exits 130."""
    evolve_kernels = Path(__file__).parent / "evolve" / "evolve_kernels.py"
    spec = tmp_path / "run.toml"
    spec.write_text(f'kernel = "{evolve_kernels}:wasteful_scale"\n'
                    f'inputs = "{evolve_kernels}:scale_inputs"\ngrid = 4\nblock = 128\n'
                    f'minimize = true\n')
    calls = []

    def evolve(**options):
        try:                                    # as the search loop does
            os.kill(os.getpid(), signal.SIGINT)
        except KeyboardInterrupt:
            Path(options["checkpoint"]).write_text("{}")
        return SimpleNamespace(
            kernel=options["kernel"], backend="cpu", speedup=1.5, runtimes=(2e-3, 1e-3),
            edits=["an edit"], best=SimpleNamespace(save=lambda path: Path(path).write_text("[]")),
            minimize=lambda: calls.append("minimize"),
            report=lambda path, analysis: calls.append("report"))

    monkeypatch.setattr(evolution, "evolve", evolve)
    # Ctrl-C as in a terminal (a background job of a non-interactive shell inherits it ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert main(["evolve", str(spec)]) == 130
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # put back
    finally:
        signal.signal(signal.SIGINT, previous)
    assert calls == ["report"]
    assert (tmp_path / "run.edits.json").read_text() == "[]"
    assert (tmp_path / "run.checkpoint.json").exists()
    captured = capsys.readouterr()
    assert "checkpoint: " in captured.out
    assert captured.err.endswith("zymo evolve: interrupted; the checkpoint holds the last "
                                 "finished generation\n")
