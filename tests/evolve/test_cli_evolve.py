"""`zymo evolve SPEC`: the spec file (TOML or JSON) parses, relative paths resolve against its
folder, flags override it, mistakes are reported in words (exit code 2, no traceback), and a
small seeded CPU run finds the known speedup and writes the edit list, report and checkpoint."""
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import zymo as zm
import zymo.runtime.evolution as evolution
from zymo.cli import main
from zymo.runtime.evolution.spec import EvolveSpec, Ref, SpecError, load_spec

from evolve.evolve_kernels import scale_holdout, scale_inputs, scale_launch, wasteful_scale

KERNELS = Path(__file__).resolve().parent / "evolve_kernels.py"
REPO = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def kernel_dir(tmp_path):
    """A folder beside the spec with a kernel module (never imported by the parsing tests)."""
    write(tmp_path / "kernels" / "k.py", "def f(rng):\n    return []\n")
    return tmp_path / "kernels"


SPEC_TOML = """\
kernel = "kernels/k.py:scale"
inputs = "kernels/k.py:make_inputs"
launch = "kernels/k.py:launch"
check = "kernels/k.py:check"
tolerance = 1e-6
population = 8
generations = 3
time_budget = 12.5
seed = 4
backend = "interp"
checkpoint = "out/run.json"
"""


def test_toml_and_json_specs_parse_alike_and_paths_resolve(tmp_path, kernel_dir):
    toml = load_spec(write(tmp_path / "run.toml", SPEC_TOML))
    data = {"kernel": "kernels/k.py:scale", "inputs": "kernels/k.py:make_inputs",
            "launch": "kernels/k.py:launch", "check": "kernels/k.py:check", "tolerance": 1e-6,
            "population": 8, "generations": 3, "time_budget": 12.5, "seed": 4,
            "backend": "interp", "checkpoint": "out/run.json"}
    (tmp_path / "run.json").write_text(json.dumps(data))
    js = load_spec(tmp_path / "run.json")
    folder = tmp_path.resolve()
    for spec in (toml, js):
        assert spec.kernel == Ref(folder / "kernels" / "k.py", "scale")
        assert spec.inputs.name == "make_inputs" and spec.launch.name == "launch"
        assert spec.check == Ref(folder / "kernels" / "k.py", "check")
        assert spec.holdout is None and spec.grid is None and spec.block is None
        assert (spec.tolerance, spec.population, spec.generations) == (1e-6, 8, 3)
        assert (spec.time_budget, spec.seed, spec.backend, spec.minimize) == \
            (12.5, 4, "interp", False)
        # relative to the spec's folder, not to the working directory
        assert spec.checkpoint == folder / "out" / "run.json"
        assert spec.report == folder / f"{spec.path.stem}.report"
        assert spec.edits == folder / f"{spec.path.stem}.edits.json"
    assert dict(vars(toml), path=None) == dict(vars(js), path=None)


def test_defaults_grid_block_and_absolute_paths(tmp_path, kernel_dir):
    spec = load_spec(write(tmp_path / "s.toml", f"""\
        kernel = "{kernel_dir / 'k.py'}:scale"
        inputs = "kernels/k.py:make_inputs"
        grid = [4, 2]
        block = 128
        report = "/somewhere/else"
        """))
    assert spec.kernel.file == kernel_dir / "k.py"
    assert (spec.launch, spec.grid, spec.block) == (None, (4, 2), 128)
    assert (spec.population, spec.generations, spec.time_budget, spec.seed) == (64, 20, 300.0, 0)
    assert spec.backend is None and spec.check is None and spec.workers is None
    assert spec.report == Path("/somewhere/else")


def test_the_example_spec_parses():
    spec = load_spec(REPO / "bench" / "evolve" / "wasteful.toml")
    assert spec.kernel.name == "wasteful_scale" and spec.kernel.file.is_file()
    assert spec.backend == "cpu" and spec.holdout is not None
    assert spec.race_check is not None and spec.race_check.name == "inputs"


def test_profile_is_a_function_or_a_boolean(tmp_path, kernel_dir):
    head = 'kernel = "kernels/k.py:f"\ninputs = "kernels/k.py:f"\ngrid = 1\nblock = 32\n'
    assert load_spec(write(tmp_path / "a.toml", head)).profile is True
    assert load_spec(write(tmp_path / "b.toml", head + "profile = false\n")).profile is False
    spec = load_spec(write(tmp_path / "c.toml", head + 'profile = "kernels/k.py:f"\n'))
    assert spec.profile == Ref(kernel_dir.resolve() / "k.py", "f")
    with pytest.raises(SpecError, match="'profile' must be"):
        load_spec(write(tmp_path / "d.toml", head + "profile = 3\n"))


def test_overrides_replace_only_what_is_given(tmp_path, kernel_dir):
    spec = load_spec(write(tmp_path / "run.toml", SPEC_TOML))
    changed = spec.with_overrides(population=32, time_budget=None, backend="cpu", minimize=True)
    assert (changed.population, changed.time_budget, changed.backend, changed.minimize) == \
        (32, 12.5, "cpu", True)
    assert isinstance(changed, EvolveSpec) and spec.population == 8


def fake_evolve(calls):
    def evolve(**options):
        calls.append(options)
        best = SimpleNamespace(save=lambda path: Path(path).write_text("[]"))
        return SimpleNamespace(
            kernel=options["kernel"], backend=options["backend"], speedup=1.5,
            runtimes=(2e-3, 1e-3), edits=["an edit"], best=best,
            minimize=lambda: calls.append("minimize") or SimpleNamespace(edits=[]),
            report=lambda path, analysis: calls.append(("report", path, analysis)))
    return evolve


def test_flags_override_the_spec(tmp_path, monkeypatch, capsys):
    spec = write(tmp_path / "run.toml", f"""\
        kernel = "{KERNELS}:wasteful_scale"
        inputs = "{KERNELS}:scale_inputs"
        grid = 4
        block = 128
        population = 8
        generations = 3
        report = "out/report"
        """)
    calls = []
    monkeypatch.setattr(evolution, "evolve", fake_evolve(calls))
    assert main(["evolve", str(spec), "--budget", "7", "--population", "6", "--generations", "2",
                 "--seed", "3", "--backend", "interp", "--workers", "1", "--minimize"]) == 0
    options, minimized, report = calls
    assert options["kernel"].__name__ == "wasteful_scale"
    assert options["launch"] == (4, 128) and options["inputs"] is scale_inputs
    assert (options["population"], options["generations"], options["time_budget"]) == (6, 2, 7.0)
    assert (options["seed"], options["backend"], options["workers"]) == (3, "interp", 1)
    assert options["check"] is None and options["holdout"] is None
    assert options["checkpoint"] == tmp_path.resolve() / "run.checkpoint.json"
    assert minimized == "minimize" and report[1] == tmp_path.resolve() / "out" / "report"
    out = capsys.readouterr().out
    assert "wasteful_scale: 1.50x on interp (2 ms -> 1 ms, side by side), 1 edit(s)" in out
    assert (tmp_path / "run.edits.json").read_text() == "[]"
    assert (tmp_path / "run.edits.minimized.json").read_text() == "[]"


def test_bad_flags_are_usage_errors(tmp_path, capsys):
    spec = write(tmp_path / "run.toml", SPEC_TOML)
    with pytest.raises(SystemExit) as exit:
        main(["evolve", str(spec), "--population", "0"])
    assert exit.value.code == 2
    assert "--population: expected an integer >= 1, not '0'" in capsys.readouterr().err


TOML_CASES = {
    "missing kernel": (
        'inputs = "k.py:f"\ngrid = 1\nblock = 32\n',
        "{spec}: missing key 'kernel'; write kernel = \"kernels.py:my_kernel\" "
        "(\"path.py:name\" of a @zm.kernel)"),
    "missing launch": (
        'kernel = "k.py:f"\ninputs = "k.py:f"\n',
        "{spec}: missing key 'launch'; write launch = \"kernels.py:launch\" (\"path.py:name\" of "
        "a function of the argument list that returns (grid, block)), or grid = 4 and "
        "block = 128"),
    "grid without block": (
        'kernel = "k.py:f"\ninputs = "k.py:f"\ngrid = 4\n',
        "{spec}: missing key 'block'; write block = 128 (a positive integer or a list of 1 to 3 "
        "of them)"),
    "both launch forms": (
        'kernel = "k.py:f"\ninputs = "k.py:f"\nlaunch = "k.py:f"\nblock = 32\n',
        "{spec}: give either 'launch' or 'grid' and 'block', not both; write "
        "launch = \"kernels.py:launch\", or grid = 4 and block = 128"),
    "misspelt key": (
        'kernel = "k.py:f"\ninputs = "k.py:f"\ngrid = 1\nblock = 32\ngeneration = 5\n',
        "{spec}: unknown key 'generation'; did you mean 'generations'?"),
    "unknown key": (
        'kernel = "k.py:f"\ninputs = "k.py:f"\ngrid = 1\nblock = 32\n[output]\nx = 1\n',
        "{spec}: unknown key 'output'; the keys are: kernel, inputs, launch, grid, block, "
        "check, holdout, race_check, profile, derivative, width, sizes, mode, tolerance, "
        "population, generations, time_budget, seed, backend, workers, minimize, checkpoint, "
        "report, edits"),
    "wrong type": (
        'kernel = "k.py:f"\ninputs = "k.py:f"\ngrid = 1\nblock = 32\npopulation = "64"\n',
        "{spec}: 'population' must be a positive integer, not \"64\" (a string); write "
        "population = 64"),
    "boolean is not a number": (
        'kernel = "k.py:f"\ninputs = "k.py:f"\ngrid = 1\nblock = 32\ntime_budget = true\n',
        "{spec}: 'time_budget' must be a positive number of seconds, not true (a boolean); "
        "write time_budget = 300"),
    "bad block": (
        'kernel = "k.py:f"\ninputs = "k.py:f"\ngrid = 1\nblock = [0]\n',
        "{spec}: 'block' must be a positive integer or a list of 1 to 3 of them, not [0] "
        "(a list); write block = 128"),
    "unknown backend": (
        'kernel = "k.py:f"\ninputs = "k.py:f"\ngrid = 1\nblock = 32\nbackend = "gpu"\n',
        "{spec}: 'backend' must be one of \"cpu\", \"cuda\", \"interp\", not \"gpu\" "
        "(a string); write backend = \"cpu\""),
    "unknown derivative": (
        'kernel = "k.py:f"\ninputs = "k.py:f"\ngrid = 1\nblock = 32\nderivative = "vjp"\n',
        "{spec}: 'derivative' must be \"grad\" or \"jvp\", not \"vjp\" (a string); write "
        "derivative = \"grad\""),
    "width without jvp": (
        'kernel = "k.py:f"\ninputs = "k.py:f"\ngrid = 1\nblock = 32\nwidth = 3\n',
        "{spec}: 'width' is the number of tangents of a forward-mode derivative; write "
        "derivative = \"jvp\" with it, or drop it"),
    "no function name": (
        'kernel = "k.py"\ninputs = "k.py:f"\ngrid = 1\nblock = 32\n',
        "{spec}: 'kernel' must be \"path.py:name\" of a @zm.kernel, not \"k.py\" (a string); "
        "write kernel = \"kernels.py:my_kernel\""),
    "no such file": (
        'kernel = "k.py:f"\ninputs = "nowhere.py:f"\ngrid = 1\nblock = 32\n',
        "{spec}: 'inputs': no such file {folder}/nowhere.py (relative paths are relative to "
        "the spec file's folder, {folder})"),
}


@pytest.mark.parametrize("case", TOML_CASES)
def test_bad_specs_are_explained(tmp_path, capsys, case):
    text, expected = TOML_CASES[case]
    write(tmp_path / "k.py", "def f(rng):\n    return []\n")
    spec = write(tmp_path / "bad.toml", text)
    assert main(["evolve", str(spec)]) == 2
    captured = capsys.readouterr()
    assert captured.err == "zymo evolve: " + expected.format(spec=spec, folder=tmp_path.resolve()) \
        + "\n"
    assert captured.out == ""


def test_json_errors_show_json(tmp_path, capsys):
    spec = tmp_path / "bad.json"
    spec.write_text(json.dumps({"kernel": f"{KERNELS}:wasteful_scale",
                                "inputs": f"{KERNELS}:scale_inputs", "seed": -1}))
    assert main(["evolve", str(spec)]) == 2
    assert capsys.readouterr().err == (
        f"zymo evolve: {spec}: missing key 'launch'; write \"launch\": \"kernels.py:launch\" "
        f"(\"path.py:name\" of a function of the argument list that returns (grid, block)), "
        f"or \"grid\": 4 and \"block\": 128\n")
    spec.write_text('{"kernel": "k.py:f",\n "inputs" "k.py:f"}')
    assert main(["evolve", str(spec)]) == 2
    assert capsys.readouterr().err == (f"zymo evolve: {spec}: not valid JSON: Expecting ':' "
                                       f"delimiter: line 2 column 11 (char 31)\n")
    spec.write_text('[1, 2]')
    assert main(["evolve", str(spec)]) == 2
    assert capsys.readouterr().err == (f"zymo evolve: {spec}: the spec must be a JSON object "
                                       f"of keys, not a list\n")


def test_file_errors(tmp_path, capsys):
    assert main(["evolve", str(tmp_path / "none.toml")]) == 2
    assert capsys.readouterr().err == f"zymo evolve: no such spec file {tmp_path}/none.toml\n"
    spec = write(tmp_path / "spec.yaml", "kernel: x\n")
    assert main(["evolve", str(spec)]) == 2
    assert capsys.readouterr().err == f"zymo evolve: {spec}: a spec file is .toml or .json, " \
                                      f"not .yaml\n"
    spec = write(tmp_path / "bad.toml", 'kernel = "k.py:f\n')
    assert main(["evolve", str(spec)]) == 2
    assert capsys.readouterr().err.startswith(f"zymo evolve: {spec}: not valid TOML: ")


def test_a_spec_names_a_derivative(tmp_path):
    spec = write(tmp_path / "run.toml", f"""\
        kernel = "{KERNELS}:restore_square"
        inputs = "{KERNELS}:jvp_inputs"
        launch = "{KERNELS}:activity_launch"
        derivative = "jvp"
        width = 2
        """)
    kernel = load_spec(spec).load()["kernel"]
    assert isinstance(kernel, zm.runtime.jvp.JvpKernel) and kernel.width == 2
    assert kernel.__name__ == "jvp(restore_square)"
    spec.write_text(spec.read_text().replace('"jvp"', '"grad"').replace("width = 2\n", ""))
    assert load_spec(spec).load()["kernel"].__name__ == "grad(restore_square)"


def test_names_that_the_module_lacks(tmp_path, capsys):
    spec = write(tmp_path / "run.toml", f"""\
        kernel = "{KERNELS}:wasteful_scale"
        inputs = "{KERNELS}:make_them"
        grid = 4
        block = 128
        """)
    assert main(["evolve", str(spec)]) == 2
    assert capsys.readouterr().err == \
        f"zymo evolve: {spec}: 'inputs': evolve_kernels.py defines no 'make_them'\n"
    spec.write_text(spec.read_text().replace(":make_them", ":N"))
    assert main(["evolve", str(spec)]) == 2
    assert capsys.readouterr().err == (
        f"zymo evolve: {spec}: 'inputs' names N, which is an int, not a function; write "
        f"inputs = \"kernels.py:make_inputs\"\n")


def test_errors_exit_2_without_a_traceback(tmp_path):
    spec = write(tmp_path / "bad.toml", 'kernel = "k.py:f"\n')
    done = subprocess.run([sys.executable, "-m", "zymo.cli", "evolve", str(spec)],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.startswith(f"zymo evolve: {spec}: ") and "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One small seeded run on the CPU, as tests/evolve/test_search.py runs zm.evolve."""
    folder = tmp_path_factory.mktemp("cli_evolve")
    spec = folder / "wasteful.json"
    spec.write_text(json.dumps({
        "kernel": f"{KERNELS}:wasteful_scale", "inputs": f"{KERNELS}:scale_inputs",
        "launch": f"{KERNELS}:scale_launch", "holdout": f"{KERNELS}:scale_holdout",
        "population": 16, "generations": 5, "time_budget": 60, "seed": 1, "backend": "cpu",
        "workers": 2, "checkpoint": "out/run.json", "report": "out/report",
        "edits": "out/best.json"}, indent=1))
    code = main(["evolve", str(spec)])
    return code, spec, folder / "out"


def test_a_seeded_cli_run_finds_the_speedup(run, capfd):
    code, spec, out = run
    assert code == 0
    report = (out / "report" / "report.md").read_text()
    speedup = float(re.search(r"\| ([\d.]+)x \|", report).group(1))
    assert speedup >= 2.0, report
    variant = zm.load_variant(wasteful_scale, out / "best.json")
    assert variant.edits
    big = scale_holdout(np.random.default_rng(9))
    expected = [a.copy() for a in big]
    wasteful_scale[scale_launch(big)](*expected)
    variant[scale_launch(big)](*big)
    np.testing.assert_array_equal(big[1], expected[1])
    checkpoint = json.loads((out / "run.json").read_text())
    assert checkpoint["generation"] == 5 and len(checkpoint["history"]) == 6


def test_the_checkpoint_is_kept_unless_resumed(run, capsys):
    _, spec, out = run
    before = json.loads((out / "run.json").read_text())
    assert main(["evolve", str(spec)]) == 2
    assert capsys.readouterr().err == (
        f"zymo evolve: {spec}: the checkpoint {out / 'run.json'} exists from an earlier run; "
        f"pass --resume to continue it, or delete it (or name another checkpoint in the spec) "
        f"to start over\n")
    assert main(["evolve", str(spec), "--resume", "--generations", "6"]) == 0
    after = json.loads((out / "run.json").read_text())
    assert after["generation"] == 6 and after["history"][:6] == before["history"]
    summary = capsys.readouterr().out
    assert f"edit list: {out / 'best.json'}" in summary
    assert f"report: {out / 'report' / 'report.md'}" in summary
    assert re.search(r"wasteful_scale: [\d.]+x on cpu \(", summary)


def test_resume_needs_a_checkpoint_of_the_kernel(tmp_path, capsys):
    spec = write(tmp_path / "run.toml", f"""\
        kernel = "{KERNELS}:wasteful_scale"
        inputs = "{KERNELS}:scale_inputs"
        grid = 4
        block = 128
        """)
    assert main(["evolve", str(spec), "--resume"]) == 2
    assert capsys.readouterr().err == (
        f"zymo evolve: {spec}: no checkpoint {tmp_path.resolve() / 'run.checkpoint.json'} to "
        f"resume from; run without --resume to start\n")
    (tmp_path / "run.checkpoint.json").write_text('{"kernel": "spin"}')
    assert main(["evolve", str(spec), "--resume"]) == 2
    assert capsys.readouterr().err == (
        f"zymo evolve: {spec}: the checkpoint {tmp_path.resolve() / 'run.checkpoint.json'} is "
        f"of the kernel 'spin', not 'wasteful_scale'; name another checkpoint in the spec\n")


def test_spec_errors_are_spec_errors(tmp_path):
    with pytest.raises(SpecError, match="missing key 'kernel'"):
        load_spec(write(tmp_path / "s.toml", 'inputs = "x.py:f"\n'))
