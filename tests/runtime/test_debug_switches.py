"""The global debugging switches: ZYMO_BOUNDSCHECK=1 compiles every kernel with bounds checks
(as `zm.kernel(boundscheck=True)`), and ZYMO_DEBUG=1 runs NumPy launches on the reference
interpreter, where data races and out-of-bounds accesses are errors naming the line."""
import numpy as np
import pytest

import zymo as zm


def read_past_end(x, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = x[i + 1]           # the last thread reads one past the end of x


def every_thread_writes_one_element(out):
    out[0] = zm.threadIdx.x         # a write-write race between the threads of the block


@pytest.fixture
def switches(monkeypatch):
    for name in ("ZYMO_BOUNDSCHECK", "ZYMO_DEBUG", "ZYMO_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_boundscheck_switch_checks_every_kernel(switches):
    switches.setenv("ZYMO_BOUNDSCHECK", "1")
    kernel = zm.kernel(read_past_end)          # made after the switch: checked
    assert kernel.boundscheck and kernel.on("cpu").boundscheck
    assert zm.grad(kernel).kernel.boundscheck   # derivatives compile their kernel's way
    x, out = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    with pytest.raises(zm.BoundsError, match="x"):
        kernel[1, 8](x, out)


def test_without_switches_kernels_are_not_checked(switches):
    assert not zm.kernel(read_past_end).boundscheck
    switches.setenv("ZYMO_BOUNDSCHECK", "0")
    assert not zm.kernel(read_past_end).boundscheck


def test_debug_switch_runs_launches_on_the_interpreter(switches):
    switches.setenv("ZYMO_DEBUG", "1")
    with pytest.raises(zm.RaceError, match="data race on `out"):
        zm.kernel(every_thread_writes_one_element)[1, 32](np.zeros(1, np.int32))
    with pytest.raises(zm.BoundsError):
        zm.kernel(read_past_end)[1, 8](np.zeros(8, np.float32), np.zeros(8, np.float32))
    # an explicit backend is kept, bounds-checked
    checked = zm.kernel(read_past_end).on("cpu")
    assert checked.boundscheck
    with pytest.raises(zm.BoundsError):
        checked[1, 8](np.zeros(8, np.float32), np.zeros(8, np.float32))


def test_debug_switch_off(switches):
    switches.setenv("ZYMO_DEBUG", "0")
    from zymo.runtime.kernel import default_backend
    assert default_backend() == "cpu"
    switches.setenv("ZYMO_DEBUG", "1")
    assert default_backend() == "interp"
