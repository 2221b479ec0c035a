"""CPU-only: host nanoseconds per warm launch of 1, 4 and 16 foreign arrays with
cuLaunchKernel stubbed (libc `abs`), before (Python describers, key, words launcher: the part
of the general path that reads arguments) and after (the guarded launcher reading them
itself). PyTorch CPU tensors (the launcher's own PyTorch reader, with `is_cpu` standing in for
`is_cuda`: the same kind of read), CuPy stand-ins (tests/runtime/test_foreign_launch.py) and,
where JAX is installed, JAX CPU arrays (the JAX reader, with the words its describer leaves).

    python bench/foreign_readers_cpu.py
"""
from __future__ import annotations

import copy
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


def libraries():
    """(name, make(k) -> array, ForeignArrayArg, describe or None) per library."""
    torch_reader = copy.copy(launch._READER_OF[launch._describe_torch])
    torch_reader.flag = "is_cpu"
    yield ("PyTorch (CPU tensors)", lambda k: torch.zeros(1024),
           native.ForeignArrayArg(torch.Tensor, torch_reader, torch.float32, 4, 1, True, True),
           describe_cpu_tensor)

    def cupy(k):
        array = FakeCupy(4096 * (k + 1), (1024,), (1,), dtype=np.dtype("f4"))
        array.itemsize, array.size, array._c_contiguous = 4, 1024, True
        return array
    yield ("CuPy stand-ins", cupy,
           native.ForeignArrayArg(FakeCupy, launch._READER_OF[launch._describe_cupy],
                                  np.dtype("f4"), 4, 1, True, True), launch._describe_cupy)
    try:
        import jax.numpy as jnp
    except ImportError:
        return
    describe = getattr(launch, "_describe_jax", None)
    if describe is None:      # before the JAX reader: no row
        return
    device = object()

    def jax_array(k):
        array = jnp.zeros(1024, jnp.float32) + k
        launch.remember_jax(array, array.dtype, device, array.unsafe_buffer_pointer(),
                            (1024,), (1,))
        return array
    yield ("JAX (CPU arrays)", jax_array,
           native.ForeignArrayArg(type(jax_array(0)), launch._READER_OF[describe],
                                  jnp.float32.dtype if hasattr(jnp.float32, "dtype") else
                                  np.dtype("f4"), 4, 1, True, True, owner=device), None)


def main() -> None:
    words_entry, guarded = native.entries()
    stub = ctypes.cast(ctypes.CDLL(None).abs, ctypes.c_void_p).value   # abs(0): "launched"
    config = native.LaunchConfig((1, 1, 1), (32, 1, 1), 0, 0, driver.DEVICE_EPOCH.value)
    address = ctypes.addressof(config)
    for library, make, spec, describe in libraries():
        for count in (1, 4, 16):
            kinds = ["u64", "i64", "i64"] * count
            args = [make(k) for k in range(count)]
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
            first = f"before {ns(before):6.0f} ns, " if describe is not None else ""
            print(f"{library}, {count:2d} arrays: {first}after {ns(after):6.0f} ns")


if __name__ == "__main__":
    main()
