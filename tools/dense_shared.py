"""Probe: the dense layer's derivative with smaller block-private buffers, and (CARVEOUT=percent
in the environment) the shared-memory carveout preferred for kernels with static shared memory.
    python tools/dense_shared.py CAPACITY_BYTES TILE_WARPS [grad_overhead options]"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from zymo.ad import private
from zymo.ops import atomic
import os
from zymo.runtime.cuda import launch, driver
if os.environ.get("CARVEOUT"):
    _init = launch.LaunchPlan.__init__
    def _patched(self, *a, **k):
        _init(self, *a, **k)
        if self.static_shared:
            driver.set_function_attribute(self.function, "PREFERRED_SHARED_MEMORY_CARVEOUT",
                                          int(os.environ["CARVEOUT"]))
    launch.LaunchPlan.__init__ = _patched
cap, warps = int(sys.argv[1]), int(sys.argv[2])
private.CAPACITY_BYTES = cap
atomic.TILE_BYTES = warps * 32 * atomic.TILE_STRIDE * 4
sys.argv = [sys.argv[0], *sys.argv[3:]]
import grad_overhead
print(f"== capacity {cap} B, tile {warps} warps (f32), carveout {os.environ.get('CARVEOUT')}")
grad_overhead.main()
