"""What a warm `zm.grad` launch on the GPU is keyed by (GradLaunch._read), checked without a GPU
on fake `__cuda_array_interface__` arrays: everything `prepare` decides from (grid, block,
activities, argument types, extents, strides, integers) and nothing else (float scalars change
at every step of a time loop, pointers at every step of a tape's reverse sweep); whether the
arrays' bytes meet, which pointers decide, is `Ready.apart`'s test. Host arrays and CPU
derivatives are not kept."""
from __future__ import annotations

import numpy as np

import zymo as zm
from zymo.ad import activity_of

from .test_cuda_args import FakeCAI


@zm.kernel
def scaled_square(x, y, a, n):
    i = zm.grid(1)
    if i < n:
        y[i] = a * x[i] * x[i]


def read(launcher, *args):
    return launcher._read([activity_of(a) for a in args])


def test_float_scalars_share_a_key_and_everything_else_decides(monkeypatch):
    from zymo.runtime.cuda import streams
    monkeypatch.setattr(streams, "as_stream", lambda stream: 0)   # no driver here
    x, dx, y, dy = (FakeCAI((256,), "<f8", data=0x7F0000100000 * k) for k in range(1, 5))
    launcher = zm.grad(scaled_square)[4, 64]

    def key(*, a=1.0, n=256, shadow=dy, grid_launcher=launcher):
        found = read(grid_launcher, zm.Duplicated(x, dx), zm.Duplicated(y, shadow), a, n)
        assert found is not None
        return found[0]

    base = key()
    assert key(a=-3.5) == base and key(a=np.float64(2.0)) != base   # a value; a type decides
    assert key(n=100) != base                                        # integers decide
    other = FakeCAI((256,), "<f8", data=0x7F0000100000 * 5)
    assert key(shadow=other) == base                                 # pointers do not
    longer = FakeCAI((512,), "<f8", data=0x7F0000100000 * 4)
    assert key(shadow=longer) != base                                # extents do
    assert key(grid_launcher=zm.grad(scaled_square)[8, 64]) != base  # the grid decides
    words = read(launcher, zm.Duplicated(x, dx), zm.Duplicated(y, dy), 0.25, 256)[1]
    assert 0.25 in words and 0x7F0000100000 * 3 in words             # the launch's own words


def test_host_arrays_and_cpu_derivatives_are_not_kept():
    x = np.zeros(8)
    launcher = zm.grad(scaled_square)[1, 8]
    assert read(launcher, zm.Duplicated(x, x.copy()), zm.Duplicated(x.copy(), x.copy()),
                1.0, 8) is None
    fake = FakeCAI((8,), "<f8")
    on_cpu = zm.grad(scaled_square.on("cpu"))[1, 8]
    assert read(on_cpu, zm.Duplicated(fake, fake), zm.Duplicated(fake, fake), 1.0, 8) is None


def spans_of(launcher, *args):
    """The spans a preparation for these arguments would keep, and the launch's words."""
    from zymo.runtime.grad import _relative_span
    _, words, arrays = read(launcher, *args)
    return tuple((p, *_relative_span(v)) for p, v in arrays), words


def test_a_preparation_for_arrays_apart_takes_any_arrays_apart_and_no_others(monkeypatch):
    from zymo.runtime.cuda import streams
    from zymo.runtime.grad import Ready
    monkeypatch.setattr(streams, "as_stream", lambda stream: 0)
    launcher = zm.grad(scaled_square)[4, 64]
    base = 0x7F0000100000
    arrays = [FakeCAI((256,), "<f8", data=base + 4096 * k) for k in range(4)]
    spans, _ = spans_of(launcher, zm.Duplicated(arrays[0], arrays[1]),
                        zm.Duplicated(arrays[2], arrays[3]), 1.0, 256)
    assert [(low, high) for _, low, high in spans] == [(0, 2048)] * 4
    ready = Ready.__new__(Ready)
    ready.spans = spans

    def apart(*starts):
        x, dx, y, dy = (FakeCAI((256,), "<f8", data=base + s) for s in starts)
        return ready.apart(read(launcher, zm.Duplicated(x, dx), zm.Duplicated(y, dy),
                                1.0, 256)[1])

    assert apart(0, 4096, 8192, 12288)        # the prepared pointers
    assert apart(50000, 2048, 20000, 30000)   # other pointers, in another order
    assert not apart(0, 2040, 8192, 12288)    # dx's first element is x's last
    assert not apart(0, 4096, 0, 12288)       # y is x (in place)
    ready.spans = None                        # prepared for overlapping arrays
    assert not apart(0, 4096, 8192, 12288)
