"""CPU-only: host nanoseconds per warm launch of 1, 4 and 16 foreign arrays with
cuLaunchKernel stubbed (libc `abs`), before (Python describers, key, words launcher: the part
of the general path that reads arguments) and after (the guarded launcher reading them
itself). PyTorch CPU tensors (the reader without its `is_cuda` flag) and CuPy stand-ins.

    python bench/foreign_readers_cpu.py
"""
from __future__ import annotations

import ctypes
import sys
import timeit
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.runtime.test_foreign_launch import FakeCupy  # noqa: E402
from zymo.ir.types import SMALL_ELEMENTS  # noqa: E402
from zymo.runtime.cuda import driver, launch, native  # noqa: E402


def describe_cpu_tensor(value, key, words):
    """launch._describe_torch less its refusal of CPU tensors (is_cuda is still read)."""
    value.is_cuda
    shape = value.shape
    contiguous = value.is_contiguous()
    small = contiguous and value.numel() < SMALL_ELEMENTS
    key.append((value.dtype, len(shape), contiguous, small))
    words.append(value.data_ptr())
    words.extend(shape)
    words.extend(value.stride())


def ns(fn) -> float:
    number = 20000
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e9


def main() -> None:
    words_entry, guarded = native.entries()
    stub = ctypes.cast(ctypes.CDLL(None).abs, ctypes.c_void_p).value   # abs(0): "launched"
    config = native.LaunchConfig((1, 1, 1), (32, 1, 1), 0, 0, driver.DEVICE_EPOCH.value)
    address = ctypes.addressof(config)
    cpu_reader = native.ArrayReader(dtype="dtype", pointer="data_ptr()", shape="shape",
                                    strides="stride()")
    for library in ("PyTorch (CPU tensors)", "CuPy stand-ins"):
        for count in (1, 4, 16):
            kinds = ["u64", "i64", "i64"] * count
            if library.startswith("PyTorch"):
                args = [torch.zeros(1024) for _ in range(count)]
                spec = native.ForeignArrayArg(torch.Tensor, cpu_reader, torch.float32, 4, 1,
                                              True, True)
                describe = describe_cpu_tensor
            else:
                args = [FakeCupy(4096 * (k + 1), (1024,), (1,)) for k in range(count)]
                for a in args:
                    a.dtype, a.itemsize, a.size, a._c_contiguous = np.dtype("f4"), 4, 1024, True
                spec = native.ForeignArrayArg(FakeCupy, launch._READER_OF[launch._describe_cupy],
                                              args[0].dtype, 4, 1, True, True)
                describe = launch._describe_cupy
            table = native.PlanTable(kinds, 0, stub)
            guarded_table = native.PlanTable(kinds, 0, stub, [spec] * count)
            plans: dict = {}

            def before(args=args, describe=describe, table=table, plans=plans):
                key: list = []
                words: list = []
                for value in args:
                    describe(value, key, words)
                plans.get(tuple(key))
                words_entry(table.address, address, *words)

            def after(args=args, table=guarded_table):
                return guarded(table.address, address, *args)

            assert after() == 0
            print(f"{library}, {count:2d} arrays: before {ns(before):6.0f} ns, "
                  f"after {ns(after):6.0f} ns")


if __name__ == "__main__":
    main()
