"""The steady-state search (issue 30, item 2), the progress line, and `zymo evolve` stopped with
Ctrl-C and resumed (item 6)."""
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import zymo as zm
from zymo.runtime.evolution.progress import Progress, duration, eta, line

from evolve.evolve_kernels import (neighbour_sum, scale_holdout, scale_inputs, scale_launch,
                                   wasteful_scale)

REPO = Path(__file__).resolve().parents[2]


# ---- the progress line ------------------------------------------------------------------------
def test_the_progress_line_reads_at_a_glance():
    assert line(3, 20, 2.345, 0.64, 12.34, 65) == (
        "generation 3/20: best 2.35x the original in the search's timings, 64% valid, "
        "12.3 eval/s, ETA 1m05s")
    assert line(0, 5, None, 1.0, 0.0, None) == (
        "generation 0/5: best no the original in the search's timings, 100% valid, 0.0 eval/s")
    assert [duration(s) for s in (0, 59.4, 61, 3600 * 2 + 7 * 60)] == \
        ["0s", "59s", "1m01s", "2h07m"]


def test_the_eta_is_the_sooner_of_the_budget_and_the_generations():
    # 2 of 10 generations in 20 s: 80 s more at this rate, unless the budget ends first
    assert eta(20.0, 2, 10, None, 20.0) == pytest.approx(80.0)
    assert eta(20.0, 2, 10, 50.0, 20.0) == pytest.approx(30.0)
    assert eta(0.0, 0, 10, None, 0.0) is None           # no rate yet, no budget
    assert eta(5.0, 10, 10, None, 5.0) == 0.0


class Stream:
    def __init__(self, tty):
        self.tty, self.text = tty, ""

    def isatty(self):
        return self.tty

    def write(self, text):
        self.text += text

    def flush(self):
        pass


ENTRY = {"generation": 2, "best_runtime": 0.5, "baseline": 1.0, "valid_fraction": 0.5,
         "evals_per_second": 4.0, "elapsed": 10.0, "session_elapsed": 10.0}


def test_on_a_terminal_one_line_is_updated_in_place():
    stream = Stream(tty=True)
    say = Progress(stream, 4, None, 8)
    say(ENTRY)
    say(dict(ENTRY, generation=3))
    # each update returns to the line's start and clears it; no newline until a message
    assert stream.text.count("\n") == 0 and stream.text.count("\r\x1b[K") == 2
    assert stream.text.endswith("generation 3/4: best 2.00x the original in the search's "
                                "timings, 50% valid, 4.0 eval/s, ETA 3s")
    say("side by side: ...")
    assert stream.text.endswith("\r\x1b[Kside by side: ...\n")
    say.close()                                          # nothing left open: no extra newline
    assert stream.text.count("\n") == 1


def test_elsewhere_plain_lines():
    stream = Stream(tty=False)
    say = Progress(stream, 4, 60.0, 8)
    say(ENTRY)
    say(dict(ENTRY, generation=3))
    say.close()
    lines = stream.text.splitlines()
    assert len(lines) == 2 and "\r" not in stream.text
    assert lines[1].startswith("generation 3/4: best 2.00x") and lines[1].endswith("ETA 3s")


# ---- the steady-state search ------------------------------------------------------------------
def steady_run(workers=1, mode="steady"):
    with ThreadPoolExecutor(workers) as threads:
        return zm.evolve(neighbour_sum, scale_launch, scale_inputs, population=4,
                         generations=2, seed=3, backend="interp", executor=threads,
                         profile=False, progress=False, mode=mode)


def test_steady_mode_with_one_worker_is_repeatable():
    first, second = steady_run(), steady_run()
    assert [h["generation"] for h in first.history] == [0, 1, 2]
    assert [(h["best_edits"], h["evaluations"]) for h in first.history] == \
        [(h["best_edits"], h["evaluations"]) for h in second.history]
    assert [p.key for p in first.state.population] == [p.key for p in second.state.population]


def test_steady_mode_is_refused_when_misspelled():
    with pytest.raises(ValueError, match="mode must be one of 'generational', 'steady'"):
        steady_run(mode="async")


def test_steady_mode_finds_the_redundant_clearing(tmp_path):
    with ThreadPoolExecutor(2) as threads:
        result = zm.evolve(wasteful_scale, scale_launch, scale_inputs, population=8,
                           generations=3, seed=1, executor=threads, holdout=scale_holdout,
                           race_check=scale_inputs, progress=False, backend="cpu",
                           mode="steady", checkpoint=tmp_path / "steady.json")
    assert result.speedup >= 2.0, result.report()
    history = result.history
    assert [h["generation"] for h in history] == [0, 1, 2, 3]
    # every generation is `population` children inserted, each one evaluation (or a cached
    # verdict), beside the first population's; the evaluations in flight when the last
    # generation fills (workers + 1 = 3) finish too, and may land before it is recorded
    assert history[-1]["evaluations"] - history[0]["evaluations"] <= 3 * 8 + 3
    assert json.loads((tmp_path / "steady.json").read_text())["generation"] == 3


# ---- Ctrl-C, then --resume --------------------------------------------------------------------
SPEC = """\
kernel = "{bench}/wasteful.py:wasteful_scale"
inputs = "{bench}/wasteful.py:inputs"
launch = "{bench}/wasteful.py:launch"
holdout = "{bench}/wasteful.py:holdout"
population = 6
generations = {generations}
time_budget = 600
seed = 2
backend = "cpu"
workers = 1
checkpoint = "out/run.json"
report = "out/report"
edits = "out/best.json"
"""


def _ctrl_c_delivered():
    """In the child: Ctrl-C as in a terminal, even where this test runs in a background job
    of a non-interactive shell, whose commands inherit SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def zymo_evolve(spec, *flags):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "zymo", "evolve", str(spec), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=spec.parent, preexec_fn=_ctrl_c_delivered)


def test_ctrl_c_keeps_the_checkpoint_and_resume_continues_it(tmp_path):
    spec = tmp_path / "run.toml"
    spec.write_text(SPEC.format(bench=REPO / "bench" / "evolve", generations=50))
    checkpoint = tmp_path / "out" / "run.json"
    process = zymo_evolve(spec)
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and process.poll() is None:
        if checkpoint.exists() and json.loads(checkpoint.read_text())["generation"] >= 1:
            break
        time.sleep(0.5)
    assert process.poll() is None, process.communicate()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=400)
    assert process.returncode == 130, (out, err)
    assert "interrupted" in err
    assert out.strip().splitlines()[-1] == f"report: {tmp_path / 'out' / 'report' / 'report.md'}"
    assert (tmp_path / "out" / "report" / "report.md").exists()
    stopped = json.loads(checkpoint.read_text())["generation"]
    assert stopped >= 1
    # resumed with two more generations: it starts from the checkpoint's, not from 0
    again = zymo_evolve(spec, "--resume", "--generations", str(stopped + 2))
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, (out, err)
    assert err.count("generation 0/") == 0 and f"generation {stopped + 2}/" in err, err
    saved = json.loads(checkpoint.read_text())
    assert saved["generation"] == stopped + 2
    assert [h["generation"] for h in saved["history"]] == list(range(stopped + 3))
