"""The compile driver under threads: an evaluation pool of threads (zm.evolve's executor may be
a ThreadPoolExecutor) asks for one specialization's stages at once; each stage is made once
and every thread gets it (two concurrent runs of the passes on one IR failed a search's
baseline with a KeyError)."""
from __future__ import annotations

import threading

import numpy as np

import zymo as zm


def test_threads_asking_for_one_specialization_share_one_compile():
    @zm.kernel
    def repeated(x, out):
        i = zm.grid(1)
        acc = 0.0
        for r in range(40):
            acc = acc * 0.5 + x[i] * r
        out[i] = acc

    x = np.arange(64, dtype=np.float32)
    spec = repeated.specialize(x, np.zeros(64, np.float32))
    start, got, errors = threading.Barrier(4), [], []

    def build():
        start.wait()
        try:
            got.append(spec.compiled("cpu"))
        except Exception as error:   # a race shows as an exception in some thread
            errors.append(error)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(got) == 4 and all(g is got[0] for g in got)
    out = np.zeros(64, np.float32)
    repeated.on("cpu")[2, 32](x, out)
    expected = np.zeros(64)
    for r in range(40):
        expected = expected * 0.5 + x * r
    np.testing.assert_allclose(out, expected, rtol=1e-5)
