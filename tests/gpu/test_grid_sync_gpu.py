"""Grid barriers on a GPU: kernels with `cg.this_grid().sync()` are launched cooperatively,
wait on the driver's grid workspace, and give the interpreter's results; a grid too large to
be resident at once is a launch error that says so."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from backend import grid_sync_kernels as K
from zymo.diagnostics import LaunchError

pytestmark = pytest.mark.gpu


def test_heat_across_blocks_matches_numpy():
    n, steps = 1001, 2000
    start = np.zeros(n)
    start[500] = 10000.0
    for _ in range(2):   # the barrier word is left ready for the next launch
        a, b = zm.to_device(start), zm.to_device(np.zeros(n))
        K.heat[(n + 255) // 256, 256](a, b, steps, 0.25)
    last = (b if steps % 2 else a).copy_to_host()
    np.testing.assert_allclose(last, K.heat_reference(start, steps, 0.25), rtol=1e-9,
                               atol=1e-9)
    assert last.sum() == pytest.approx(10000.0)


def test_blocks_read_what_another_block_wrote_before_the_barrier():
    x = zm.to_device(np.arange(128, dtype=np.float64))
    out = zm.device_array(128 * 64, np.float64)
    K.reversed_total[64, 128](x, out)
    expected = np.tile((np.arange(128) * 2.0)[::-1], 64)
    np.testing.assert_array_equal(out.copy_to_host(), expected)


def test_a_grid_too_large_to_be_resident_is_refused():
    spec = K.heat.specialize(zm.to_device(np.zeros(8)), zm.to_device(np.zeros(8)), 1, 0.5)
    fits = spec.max_cooperative_grid_blocks(256)
    assert fits > 0
    n = (fits + 1) * 256
    with pytest.raises(LaunchError, match="grid.sync"):
        K.heat[fits + 1, 256](zm.to_device(np.zeros(n)), zm.to_device(np.zeros(n)), 1, 0.5)


def test_gradient_through_grid_barriers_on_the_gpu():
    n = 256
    rng = np.random.default_rng(2)
    report = zm.check_grad(K.guarded_heat, 4, 64, zm.Duplicated(rng.random(n), np.zeros(n)),
                           zm.Duplicated(np.zeros(n), np.zeros(n)), 6, zm.Active(0.25),
                           backend="cuda")
    assert report.ok, str(report)


def test_threads_that_exited_do_not_hold_up_a_grid_barrier():
    keys = np.array([1, 1, 1, 2, 2, 3, 3, 3, 3, 4, 5, 5] * 2, np.int64)
    labels = zm.to_device(np.full(len(keys), -1, np.int64))
    K.label_runs[1, 32](zm.to_device(keys), labels)
    np.testing.assert_array_equal(labels.copy_to_host(), K.label_runs_reference(keys))

