"""`zm.grad(kernel, max_registers="auto")` without a GPU: the argument, launches on the CPU
and the interpreter (no cap to tune), the choice of caps with a fake compiler and timer, the
timing loop with fake events, and the capped builds made from the first build's PTX."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from corpus.memory import stencil5
from zymo.backend.nvptx import ptxas
from zymo.runtime import autotune
from zymo.runtime.cuda import cache, driver


def _stencil_gradient(dk, backend=None):
    rng = np.random.default_rng(3)
    u = rng.standard_normal((12, 10)).astype(np.float32)
    du, dout = np.zeros_like(u), rng.standard_normal(u.shape).astype(np.float32)
    launcher = dk if backend is None else dk.on(backend)
    (dalpha,) = launcher[(3, 4), (4, 4)](zm.Duplicated(u, du),
                                         zm.Duplicated(np.zeros_like(u), dout),
                                         zm.Active(np.float32(0.2)))
    return du, dalpha


@pytest.mark.parametrize("backend", [None, "interp"])
def test_auto_launches_like_the_default_off_the_gpu(backend):
    auto = zm.grad(stencil5, max_registers="auto")
    du, dalpha = _stencil_gradient(auto, backend)
    expected_du, expected_dalpha = _stencil_gradient(zm.grad(stencil5), backend)
    np.testing.assert_array_equal(du, expected_du)
    assert dalpha == expected_dalpha
    assert np.abs(du).sum() > 0
    assert auto.tuning == {}, "nothing is timed off the GPU"
    assert auto.kernel.max_registers == autotune.CANDIDATES[0]
    assert auto.on("cpu").autotune is auto.autotune, "views share the choices"


def test_auto_takes_composite_arguments_on_the_cpu():
    """A tuple argument goes through the flattened kernel, which keeps "auto" and does not
    take the place of the default derivative's."""
    @zm.kernel
    def scaled(pair, out):
        i = zm.grid(1)
        if i < out.size:
            out[i] = pair[0][i] * pair[1][i]

    x, y = np.arange(1.0, 9.0), np.full(8, 3.0)
    dx, dy = np.zeros(8), np.zeros(8)
    auto = zm.grad(scaled, max_registers="auto")
    auto[1, 8](zm.Duplicated((x, y), (dx, dy)), zm.Duplicated(np.zeros(8), np.ones(8)))
    np.testing.assert_array_equal(dx, y)
    np.testing.assert_array_equal(dy, x)
    flat = next(iter(auto.kernel._flat.values()))
    assert flat.__dict__["_grad"].autotune is auto.autotune
    default = zm.grad(scaled)
    default[1, 8](zm.Duplicated((x, y), (dx, dy)), zm.Duplicated(np.zeros(8), np.ones(8)))
    assert default.kernel._specs is auto.kernel._specs, "one primal compiled for both"
    assert next(iter(default.kernel._flat.values())).__dict__["_grad"].autotune is None


@pytest.mark.parametrize("bad", ["fast", "AUTO", 300, 8, 1.5, True, (255, 128)])
def test_bad_register_caps_are_refused(bad):
    with pytest.raises(TypeError, match=r'max_registers must be an int from 16 to 255 or '
                                        r'"auto" \(the cap timed fastest'):
        zm.grad(stencil5, max_registers=bad)


def test_kernels_take_no_auto():
    with pytest.raises(TypeError, match=r"max_registers must be an int from 16 to 255, not "
                                        r"'auto'"):
        zm.kernel(max_registers="auto")


# ---- the choice, with a fake compiler and timer ---------------------------------------------
class Fake:
    """Builds named by cap, each using `registers[cap]` registers; `times[cap]` ms each."""

    def __init__(self, registers: dict, times: dict | None = None):
        self.registers, self.times = registers, times or {}
        self.built, self.measured = [], []

    def build(self, cap):
        self.built.append(cap)
        return f"build {cap}"

    def used(self, build):
        return self.registers[int(build.split()[1])]

    def measure(self, builds: dict) -> dict:
        assert all(builds[cap] == f"build {cap}" for cap in builds)
        self.measured.append(sorted(builds))
        return {cap: self.times[cap] for cap in builds}

    def choose(self, candidates=(255, 168, 128), unlaunchable=lambda built: None):
        return autotune.choose(candidates, self.build, self.used, self.measure, unlaunchable)


def test_an_unbound_cap_is_built_once_and_not_timed():
    fake = Fake({255: 100})
    chosen, registers, skipped, times = fake.choose()
    assert chosen == 255 and fake.built == [255] and fake.measured == [] and times == {}
    assert registers == {255: 100}
    assert skipped == {168: "the build of cap 255 (100 registers)",
                       128: "the build of cap 255 (100 registers)"}


def test_a_cap_above_the_last_build_is_skipped():
    fake = Fake({255: 150, 128: 128}, {255: 3.0, 128: 2.0})
    chosen, registers, skipped, times = fake.choose((128, 255, 168))   # any order
    assert fake.built == [255, 128] and fake.measured == [[128, 255]]
    assert list(skipped) == [168] and chosen == 128 and times == {255: 3.0, 128: 2.0}


def test_the_fastest_build_wins():
    fake = Fake({255: 210, 168: 168, 128: 128}, {255: 3.0, 168: 1.5, 128: 2.5})
    assert fake.choose()[0] == 168
    assert fake.built == [255, 168, 128] and fake.measured == [[128, 168, 255]]
    assert autotune.fastest({255: 2.0, 168: 2.0, 128: 2.5}) == 255, "a tie: the larger cap"


def test_a_build_that_cannot_run_the_block_is_left_out():
    fake = Fake({255: 240, 168: 168, 128: 128}, {168: 2.0, 128: 1.0})
    chosen, _, skipped, times = fake.choose(
        unlaunchable=lambda built: "at most 256 threads per block" if built == "build 255"
        else None)
    assert chosen == 128 and times == {168: 2.0, 128: 1.0}
    assert skipped == {255: "at most 256 threads per block"}
    nothing = Fake({255: 240, 168: 168, 128: 128})
    assert nothing.choose(unlaunchable=lambda built: "no")[0] == 255 and not nothing.measured


def test_rounds_fit_the_budget():
    assert autotune.rounds_within([300.0, 250.0], 200.0, 7) == 1, "a slow kernel: once"
    assert autotune.rounds_within([20.0, 30.0], 200.0, 7) == 4
    assert autotune.rounds_within([0.01, 0.02], 200.0, 7) == 7


def test_timing_restores_before_every_launch_and_takes_medians(monkeypatch):
    """time_on_gpu with events reading a fake GPU clock that each launch advances."""
    from zymo.runtime.cuda import streams
    clock = [0.0]
    log = []

    class Event:
        def record(self, stream=None):
            assert stream == "user stream"
            self.at = clock[0]
            return self

        def synchronize(self):
            pass

        def elapsed_ms(self, start):
            return self.at - start.at

    monkeypatch.setattr(streams, "Event", Event)
    durations = {255: [90.0, 40.0, 41.0, 45.0, 39.0], 128: [80.0, 30.0, 50.0, 34.0, 31.0]}

    def run(cap):
        def launch():
            log.append(cap)
            clock[0] += durations[cap].pop(0)
        return launch

    times = autotune.time_on_gpu({255: run(255), 128: run(128)},
                                 lambda: log.append("restore"), "user stream", budget=0.55)
    # the untimed round (170 ms) says three more fit 550 ms, taken in alternation
    assert log == ["restore", 255, "restore", 128] * 4
    assert times == {255: 41.0, 128: 34.0}


# ---- capped builds from the first build's PTX --------------------------------------------
def _derivative_spec(cap=None):
    u = zm.Array(zm.f32, 2)
    dk = zm.grad(stencil5, max_registers=cap) if cap else zm.grad(stencil5)
    return dk.specialize(zm.Duplicated(u, u), zm.Duplicated(u, u), zm.Active(zm.f32))


def test_a_capped_build_shares_the_ir_and_recaps_the_ptx(monkeypatch, tmp_path):
    monkeypatch.setattr(driver, "nvjitlink_version", lambda: None)   # no cubin on the CPU
    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))
    spec = _derivative_spec()
    spec.results["cuda"] = cache.compile_program(spec, "sm_90")
    capped = autotune.capped_specialization(spec, 128)
    assert capped.kernel.max_registers == 128 and spec.kernel.max_registers == 255
    for stage in ("derive", "optimize", "codegen"):
        assert capped.results[stage] is spec.results[stage]
    assert capped.params == spec.params and capped.consume is spec.consume
    program = capped.compiled("cuda")
    assert program is not spec.results["cuda"] and ".maxnreg 128" in program.ptx
    # the PTX is what LLVM makes under that cap: only the directive differs
    assert program.ptx == _derivative_spec(128).ptx("sm_90")
    assert spec.compiled("cuda").ptx == spec.ptx("sm_90")
    if ptxas.find() is not None:
        assert ptxas.assemble(program.ptx, "sm_90").registers <= 128
    assert cache.recapped(cache.CudaProgram("k", "no directive", "k", "sm_90", ()), 128) is None


def test_the_arrays_copied_are_those_the_derivative_writes_but_tapes(monkeypatch):
    spec = _derivative_spec()
    # (u, du, out, dout, alpha, dalpha): du accumulated, out written again, dout consumed by
    # the second kernel, dalpha the Active scalar's adjoint
    assert autotune.Scratch.positions(spec) == {1, 2, 3, 5}
    from corpus.shared import matmul_tiled
    monkeypatch.setenv("ZYMO_AD_TILE_REFILL", "0")
    a = zm.Array(zm.f32, 2)
    spec = zm.grad(matmul_tiled).specialize(zm.Duplicated(a, a), zm.Duplicated(a, a),
                                            zm.Duplicated(a, a))
    tapes = set(range(6, 6 + len(spec.tapes)))
    assert tapes and tapes <= spec.array_uses()[0]
    assert autotune.Scratch.positions(spec) == spec.array_uses()[0] - tapes


@pytest.mark.skipif(ptxas.find() is None, reason="needs ptxas")
def test_the_tuner_on_a_fake_device(monkeypatch, tmp_path):
    """`Autotuner.resolve` as a GPU launch reaches it, with the device faked: registers from
    ptxas, launches logged instead of run, times made up. The builds under caps that bind are
    timed, the fastest is launched and remembered, and `tuning` says what was measured."""
    import math

    class Device:
        ordinal, arch = 0, "sm_90"

    @zm.kernel
    def pressure(x, w, y):
        i = zm.grid(1)
        if i < x.shape[0]:
            v = x[i]
            a0, a1 = math.sin(v * w[0]), math.exp(v * w[1])
            a2, a3 = math.sin(v * w[2]), math.exp(v * w[3])
            y[i] = math.tanh(a0 * a1 + a2 * a3) * math.cos(a0 - a3)

    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(driver, "nvjitlink_version", lambda: None)
    monkeypatch.setattr(driver, "current_device", lambda: Device())
    monkeypatch.setattr(driver, "function_attribute", lambda function, name: function[name])
    monkeypatch.setattr(cache.CudaProgram, "function", lambda program, device: {
        "NUM_REGS": ptxas.assemble(program.ptx, "sm_90").registers,
        "MAX_THREADS_PER_BLOCK": 1024})
    monkeypatch.setattr(autotune, "capturing", lambda stream: False)
    monkeypatch.setattr(autotune.Scratch, "of", classmethod(
        lambda cls, spec, args: cls([np.copy(a) if k in cls.positions(spec) else a
                                     for k, a in enumerate(args)], [])))
    launched = []
    monkeypatch.setattr(autotune, "run_with_consumer",
                        lambda spec, backend, grid, block, args, shared, stream:
                        launched.append(spec.kernel.max_registers))
    made_up = {255: 3.0, 40: 1.0, 24: 2.0}
    monkeypatch.setattr(autotune, "time_on_gpu", lambda runs, restore, stream: [
        run() for run in runs.values()] and {cap: made_up[cap] for cap in runs})
    monkeypatch.setattr(autotune, "CANDIDATES", (255, 40, 24))

    dk = zm.grad(pressure, max_registers="auto").on("cuda")
    x = np.linspace(-1, 1, 64)
    activities = [zm.Duplicated(x, np.zeros(64)), zm.Duplicated(np.ones(4), np.zeros(4)),
                  zm.Duplicated(np.zeros(64), np.ones(64))]
    call = dk[2, 32].prepare(activities)
    record = next(iter(dk.tuning.values()))
    assert record.signature.startswith("grad(pressure)(dup array<f64, 1")
    assert record.grid == (2, 1, 1) and record.block == (32, 1, 1)
    assert record.registers[255] > 40, record   # ptxas: the derivative needs more
    assert set(record.times) == {255, 40, 24} and record.chosen == 40
    assert sorted(launched) == [24, 40, 255]
    assert call.spec.kernel.max_registers == 40 and dk.last is call.spec
    assert ".maxnreg 40" in call.spec.compiled("cuda").ptx
    assert call.spec.results["optimize"] is dk.specialize(*activities).results["optimize"]
    # remembered for this launch shape; another block size tunes again
    assert dk[2, 32].prepare(activities).spec is call.spec and len(launched) == 3
    dk[1, 64].prepare(activities)
    assert len(dk.tuning) == 2 and len(launched) == 6


def test_tuned_derivatives_of_a_kernel_share_their_choices_until_retuned(monkeypatch):
    """zm.grad(k, max_registers="auto") made twice finds the same tuner and prepared launches
    (a tape makes one per backward), apart from a fixed cap's and from another candidate
    set's; retune() forgets both."""
    first = zm.grad(stencil5, max_registers="auto")
    again = zm.grad(stencil5, max_registers="auto")
    assert again.autotune is first.autotune and again.ready is first.ready
    assert zm.grad(stencil5).ready is not first.ready
    monkeypatch.setattr(autotune, "CANDIDATES", (255, 64))
    other = zm.grad(stencil5, max_registers="auto")
    assert other.autotune is not first.autotune and other.ready is not first.ready
    first.autotune.chosen["a launch"] = "a build"
    first.autotune.records["a launch"] = "what was timed"
    first.ready["a key"] = "a preparation"
    again.retune()
    assert first.autotune.chosen == {} and first.autotune.records == {} and first.ready == {}
