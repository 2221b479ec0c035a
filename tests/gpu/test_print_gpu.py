"""print() in a kernel on the GPU: vprintf's lines reach the process's stdout at the sync."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from ops import print_kernels as P

pytestmark = pytest.mark.gpu


def test_print_from_the_gpu(capfd):
    x = zm.to_device(np.arange(8) + 0.5)
    P.show[2, 4](x, 7)
    zm.synchronize()
    lines = sorted(line for line in capfd.readouterr().out.splitlines() if line)
    assert lines == ["thread 0 of 7 has 0.500000 50 %", "thread 1 of 7 has 1.500000 50 %",
                     "thread 2 of 7 has 2.500000 50 %"]
