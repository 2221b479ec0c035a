"""`zm.grad(kernel, max_registers="auto")` on the GPU: the candidates built and timed on scratch
copies, the launch's arrays given exactly one launch (checked against the fixed-cap derivative
on equal inputs), the choice remembered, user streams, and no tuning inside a stream capture."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo as zm
from corpus.memory import stencil5
from zymo.runtime import autotune

pytestmark = pytest.mark.gpu


@zm.kernel
def pressure(x, w, y):
    """About 100 registers in its derivative under cap 255 (ptxas, sm_90): caps below bind."""
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        a0, a1 = math.sin(v * w[0]), math.sin(v * w[1])
        a2, a3 = math.sin(v * w[2]), math.sin(v * w[3])
        a4, a5 = math.exp(v * w[4]), math.exp(v * w[5])
        a6, a7 = math.exp(v * w[6]), math.exp(v * w[7])
        b0, b1 = a0 * a4 + a1 * a5, a2 * a6 - a3 * a7
        b2, b3 = a0 * a7 + a3 * a4, a1 * a6 - a2 * a5
        y[i] = math.tanh(b0 * b1) + math.tanh(b2 * b3) + math.sin(b0 + b3) * math.cos(b1 - b2)


@pytest.fixture(autouse=True)
def untuned():
    """Each test tunes anew: the caps chosen are kept with the kernel, where a later
    zm.grad(kernel, max_registers="auto") finds them."""
    for candidates in ((255, 168, 128), (255, 64, 40)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(autotune, "CANDIDATES", candidates)
            for kernel in (pressure, stencil5):
                zm.grad(kernel, max_registers="auto").retune()


def _pressure_arrays(seed=0):
    rng = np.random.default_rng(seed)
    n = 4096
    return [rng.uniform(-1, 1, n), rng.uniform(-0.5, 0.5, 8), np.zeros(n),
            rng.standard_normal(n), rng.standard_normal(8), rng.standard_normal(n)]


def _pressure_launch(dk, host, stream=None):
    """dk on device copies of `host` (x, w, y, dx, dw, dy; the shadows start non-zero, so
    that a second accumulation shows); the arrays after the launch, on the host."""
    x, w, y, dx, dw, dy = [zm.to_device(a) for a in host]
    config = (16, 256) if stream is None else (16, 256, stream)
    dk[config](zm.Duplicated(x, dx), zm.Duplicated(w, dw), zm.Duplicated(y, dy))
    zm.synchronize()
    return [a.copy_to_host() for a in (x, w, y, dx, dw, dy)]


def _assert_same(got, expected):
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def _only(tuning: dict) -> autotune.Tuning:
    assert len(tuning) == 1, tuning
    return next(iter(tuning.values()))


def test_auto_times_the_candidates_on_scratch_copies(monkeypatch):
    monkeypatch.setattr(autotune, "CANDIDATES", (255, 64, 40))
    dk = zm.grad(pressure, max_registers="auto")
    host = _pressure_arrays()
    got = _pressure_launch(dk, host)
    _assert_same(got, _pressure_launch(zm.grad(pressure), host))   # one launch's worth
    record = _only(dk.tuning)
    assert set(record.registers) | set(record.skipped) == {255, 64, 40}, record
    assert all(record.registers[cap] <= cap for cap in record.registers)
    assert record.registers[255] > 64, "the derivative needs more than the caps tried"
    assert set(record.times) == {255, 64, 40} - set(record.skipped)
    assert len(record.times) >= 2 and all(ms > 0 for ms in record.times.values())
    assert record.chosen == min(record.times, key=record.times.get)
    assert dk.last.kernel.max_registers == record.chosen
    assert ".maxnreg" in dk.last.compiled("cuda").ptx
    # remembered: a second launch tunes nothing more, and adds one launch's accumulation
    chosen = dict(dk.autotune.chosen)
    twice = _pressure_launch(dk, got)
    assert dk.autotune.chosen == chosen and len(dk.tuning) == 1
    _assert_same(twice, _pressure_launch(zm.grad(pressure), got))


def test_active_adjoints_and_gathered_shadows_see_one_launch(monkeypatch):
    """stencil5's derivative (28 registers under cap 255, ptxas sm_90) gathers its shadow and
    runs a second kernel that consumes the output cotangents; its Active scalar's adjoint is
    an array the launch allocates."""
    monkeypatch.setattr(autotune, "CANDIDATES", (255, 20, 16))
    rng = np.random.default_rng(1)
    u = rng.standard_normal((45, 70)).astype(np.float32)
    du0 = rng.standard_normal(u.shape).astype(np.float32)
    dout0 = rng.standard_normal(u.shape).astype(np.float32)

    def launch(dk):
        arrays = [zm.to_device(a) for a in (u, du0, np.zeros_like(u), dout0)]
        (dalpha,) = dk[(5, 12), (16, 4)](zm.Duplicated(arrays[0], arrays[1]),
                                          zm.Duplicated(arrays[2], arrays[3]),
                                          zm.Active(np.float32(0.2)))
        return [a.copy_to_host() for a in arrays], dalpha

    auto = zm.grad(stencil5, max_registers="auto")
    got, dalpha = launch(auto)
    expected, expected_dalpha = launch(zm.grad(stencil5))
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dalpha, expected_dalpha, rtol=1e-4)
    assert len(_only(auto.tuning).times) >= 2


def test_default_candidates_skip_the_caps_that_do_not_bind():
    dk = zm.grad(pressure, max_registers="auto")
    host = _pressure_arrays(2)
    _assert_same(_pressure_launch(dk, host), _pressure_launch(zm.grad(pressure), host))
    record = _only(dk.tuning)
    used = record.registers[255]
    for cap in (168, 128):
        if cap >= used:   # a cap the uncapped build does not reach: the same build, not timed
            assert cap in record.skipped and cap not in record.registers
    if used <= 128:
        assert record.times == {} and record.chosen == 255


def test_auto_tunes_on_a_user_stream(monkeypatch):
    monkeypatch.setattr(autotune, "CANDIDATES", (255, 64, 40))
    stream = zm.Stream(non_blocking=True)
    dk = zm.grad(pressure, max_registers="auto")
    host = _pressure_arrays(3)
    got = _pressure_launch(dk, host, stream)
    stream.synchronize()
    _assert_same(got, _pressure_launch(zm.grad(pressure), host))
    assert len(_only(dk.tuning).times) >= 2


def test_a_captured_launch_is_not_tuned(monkeypatch):
    """Inside a stream capture the launch joins the graph under the largest cap, and nothing
    is remembered: the first launch outside the capture tunes."""
    from zymo.runtime.cuda.driver import bindings, call
    monkeypatch.setattr(autotune, "CANDIDATES", (255, 64, 40))
    drv = bindings()
    stream = zm.Stream(non_blocking=True)
    dk = zm.grad(pressure, max_registers="auto")
    arrays = [zm.to_device(a) for a in _pressure_arrays(4)]
    x, w, y, dx, dw, dy = arrays
    call(drv.cuStreamBeginCapture, stream.handle,
         drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED, name="cuStreamBeginCapture")
    try:
        dk[16, 256, stream](zm.Duplicated(x, dx), zm.Duplicated(w, dw), zm.Duplicated(y, dy))
    finally:
        graph = call(drv.cuStreamEndCapture, stream.handle, name="cuStreamEndCapture")
    call(drv.cuGraphDestroy, graph, name="cuGraphDestroy")
    assert dk.tuning == {} and dk.autotune.chosen == {}
    assert dk.last.kernel.max_registers == 255
    dk[16, 256, stream](zm.Duplicated(x, dx), zm.Duplicated(w, dw), zm.Duplicated(y, dy))
    stream.synchronize()
    assert len(_only(dk.tuning).times) >= 2
